"""How Arrow fields map to 2.0 columns (shared by the 2.0 encoder and decoder).

In 2.0 every Lance field owns a column, in pre-order: a struct owns a data-less header column,
a list owns its offsets column, then come the children. Fixed-size lists, dictionaries,
binary types and packed structs are single "primitive" columns (their children own none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lance_format.errors import UnsupportedTypeError

PRIMITIVE, STRUCT, LIST, PACKED = "primitive", "struct", "list", "packed"
#: A binary field marked ``lance-encoding:blob``: its pages hold (position, size) pairs of bytes stored
#: elsewhere in the file (``Blob`` column encoding in protos/encodings_v2_0.proto).
BLOB = "blob"
#: The stored description of one blob (v1) value: where its bytes are in the file.
BLOB_DESCRIPTION_V1 = pa.struct([pa.field("position", pa.uint64()), pa.field("size", pa.uint64())])

PACKED_KEYS = (b"packed", b"lance-encoding:packed")
BLOB_KEY = b"lance-encoding:blob"


def is_packed(f: pa.Field) -> bool:
    """Whether a struct field asks for the packed-struct encoding (one column)."""
    meta = f.metadata or {}
    if b"packed" in meta:
        return bool(meta[b"packed"].lower() == b"true")
    return b"lance-encoding:packed" in meta


@dataclass
class Node:
    """One field and the column it owns.

    Attributes:
        kind: ``primitive``, ``struct``, ``list`` or ``packed``.
        field: The Arrow field.
        column: Index of the column the field owns.
        children: Child nodes (struct fields, list item).
    """

    kind: str
    field: pa.Field
    column: int
    children: list[Node] = field(default_factory=list)


def _check_leaf_type(f: pa.Field) -> None:
    t = storage_of(f.type)
    if pa.types.is_map(t):
        # pylance 14.0.2 refuses too: "Lance v2.0 has no field encoding for ... Map".
        raise UnsupportedTypeError(
            f"field {f.name!r}: map columns need data storage version 2.2 (file version 2.0 cannot store {t})"
        )
    if pa.types.is_union(t) or pa.types.is_run_end_encoded(t):
        raise UnsupportedTypeError(f"field {f.name!r}: type {t} is not supported by Lance")
    if (
        pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary_view(t)
    ):
        raise UnsupportedTypeError(f"field {f.name!r}: view type {t} is not supported by Lance")


def is_blob(f: pa.Field) -> bool:
    """Whether ``f`` is a blob (v1) column: a binary field with ``lance-encoding:blob`` set."""
    t = storage_of(f.type)
    return (f.metadata or {}).get(BLOB_KEY) is not None and (pa.types.is_large_binary(t) or pa.types.is_binary(t))


def storage_of(t: pa.DataType) -> pa.DataType:
    """The storage type of an extension type (other types unchanged)."""
    return t.storage_type if isinstance(t, pa.BaseExtensionType) else t


def build_node(f: pa.Field, counter: list[int]) -> Node:
    """Assign columns to ``f`` and its children in pre-order, advancing ``counter[0]``."""
    _check_leaf_type(f)
    col = counter[0]
    counter[0] += 1
    t = storage_of(f.type)
    if is_blob(f):
        return Node(BLOB, f, col)
    if pa.types.is_struct(t):
        if is_packed(f):
            return Node(PACKED, f, col)
        return Node(STRUCT, f, col, [build_node(t.field(i), counter) for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return Node(LIST, f, col, [build_node(t.value_field, counter)])
    if pa.types.is_fixed_size_list(t) and (
        pa.types.is_struct(t.value_type)
        or pa.types.is_list(t.value_type)
        or pa.types.is_large_list(t.value_type)
        # pylance 14.0.2 neither writes nor reads 2.0 fixed-size lists of variable-width items
        # (its 2.0 decoder stops at ``todo!()`` in rust/lance-encoding/src/decoder.rs).
        or pa.types.is_string(t.value_type)
        or pa.types.is_large_string(t.value_type)
        or pa.types.is_binary(t.value_type)
        or pa.types.is_large_binary(t.value_type)
    ):
        raise UnsupportedTypeError(
            f"field {f.name!r}: fixed-size lists of {t.value_type} are not supported in file version 2.0"
        )
    if pa.types.is_dictionary(t) and not (
        pa.types.is_integer(t.index_type) and not pa.types.is_nested(t.value_type)
    ):
        raise UnsupportedTypeError(f"field {f.name!r}: dictionary type {t} is not supported")
    return Node(PRIMITIVE, f, col)


def build_nodes(schema: pa.Schema) -> list[Node]:
    """Column assignment of a whole schema (top-level nodes, in order)."""
    counter = [0]
    return [build_node(schema.field(i), counter) for i in range(len(schema))]


def count_columns(nodes: list[Node]) -> int:
    """Total columns owned by ``nodes`` and their descendants."""
    return sum(1 + count_columns(n.children) for n in nodes)
