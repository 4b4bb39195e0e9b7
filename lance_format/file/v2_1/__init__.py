"""Lance file format 2.1 / 2.2: structural (rep/def) page layouts, reader and writer.

``FileDecoder21`` and ``FileEncoder21`` follow the decoder / encoder protocol described in
:mod:`lance_format.file.container`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.file.v2_1.arrow import item_field, leaf_paths
from lance_format.file.v2_1.decoder import Decoder21, make_decoder
from lance_format.file.v2_1.encoder import Encoder21

FileDecoder21 = Decoder21


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


class FileEncoder21(Encoder21):
    """Encoder plugged into :class:`lance_format.file.writer.LanceFileWriter` for 2.1 / 2.2.

    Args:
        writer: ``ContainerWriter`` receiving page buffers.
        schema: Arrow schema of the batches.
        max_page_bytes: Bytes buffered per top-level field before a page is written.
        version: ``(2, 1)`` or ``(2, 2)``; the page grammar differs, so the writer must pass it
            (defaults to the writer's ``file_version`` attribute if present, else 2.2).
    """

    def __init__(
        self,
        writer: Any,
        schema: pa.Schema,
        *,
        max_page_bytes: int | None = None,
        version: tuple[int, int] | None = None,
    ) -> None:
        if version is None:
            version = getattr(writer, "file_version", None) or getattr(writer, "version", None) or (2, 2)
        super().__init__(schema, (int(version[0]), int(version[1])), writer, max_page_bytes)
        self.owning_fields = owning_field_positions(schema)


__all__ = [
    "Decoder21",
    "Encoder21",
    "FileDecoder21",
    "FileEncoder21",
    "make_decoder",
    "owning_field_positions",
]
