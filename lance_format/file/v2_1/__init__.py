"""Lance file format 2.1 / 2.2: structural (rep/def) page layouts, reader and writer.

``FileDecoder21`` and ``FileEncoder21`` follow the decoder / encoder protocol described in
:mod:`lance_format.file.container`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.file.v2_1.types21 import item_field, leaf_paths


def owning_field_positions(schema: pa.Schema) -> list[int]:
    """Pre-order positions (as in ``LanceSchema.flat()``) of the fields that own a column."""
    out: list[int] = []
    pos = 0

    def visit(field: pa.Field, leaf: bool) -> None:
        nonlocal pos
        here = pos
        pos += 1
        t = field.type
        if leaf:
            out.append(here)
        if pa.types.is_struct(t):
            leaf_children = not leaf
            for i in range(t.num_fields):
                child = t.field(i)
                visit(child, leaf_children and _is_leaf_here(child))
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            item = item_field(t)
            visit(item, not leaf and _is_leaf_here(item))

    def _is_leaf_here(field: pa.Field) -> bool:
        return leaf_paths(field) == [[field]]

    for f in schema:
        visit(f, _is_leaf_here(f))
    return out


#: Where the reader and writer live: each is imported on first use, so a process that only
#: reads 2.1 files skips the encoder modules (~8 ms) and one that only writes skips the
#: decoder modules (~10 ms).
_LAZY = {"Encoder21": "file_encoder", "FileEncoder21": "file_encoder", "Decoder21": "decoder",
         "FileDecoder21": "decoder", "make_decoder": "decoder"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), "Decoder21" if name == "FileDecoder21" else name)
    globals()[name] = value
    return value


__all__ = [
    "Decoder21",
    "Encoder21",
    "FileDecoder21",
    "FileEncoder21",
    "make_decoder",
    "owning_field_positions",
]
