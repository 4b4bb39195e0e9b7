"""Arrow type helpers shared by the 2.1 writer modules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.errors import UnsupportedTypeError


def is_var(t: pa.DataType) -> bool:
    """String / binary types (32- or 64-bit offsets)."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def fixed_bits(t: pa.DataType) -> int:
    """Bits per value of a fixed-width type."""
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t):
        return int(t.byte_width) * 8
    try:
        return int(t.bit_width)
    except ValueError:
        raise UnsupportedTypeError(f"cannot write a column of type {t}: not a fixed-width type") from None


def is_large(t: pa.DataType) -> bool:
    """Variable-width types with 64-bit offsets."""
    return bool(pa.types.is_large_string(t) or pa.types.is_large_binary(t))


def fsl_item(t: pa.DataType) -> tuple[pa.DataType, int]:
    """Innermost item type and total dimension of (nested) fixed-size lists."""
    dim = 1
    while pa.types.is_fixed_size_list(t):
        dim *= t.list_size
        t = t.value_type
    return t, dim


def fsl_values(arr: pa.Array) -> pa.Array:
    """The item values covered by a (possibly sliced) fixed-size-list array."""
    size = arr.type.list_size
    return arr.values.slice(arr.offset * size, len(arr) * size)


def var_parts(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (from 0) and bytes of a variable-width array, null values emptied."""
    large = is_large(values.type)
    bufs = values.buffers()
    offs = np.frombuffer(bufs[1], np.int64 if large else np.int32)[
        values.offset : values.offset + len(values) + 1
    ]
    offs = offs.astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    if values.null_count:
        # nulls may own bytes in Arrow; lance writes them as empty values
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
        lens = np.where(valid, np.diff(offs), 0)
        keep_starts = offs[:-1]
        new_offs = np.concatenate([[0], np.cumsum(lens)])
        idx = np.repeat(keep_starts - new_offs[:-1], lens) + np.arange(int(new_offs[-1]))
        return new_offs, data[idx]
    return offs - offs[0], data[int(offs[0]) : int(offs[-1])]


def is_leaf_type(t: pa.DataType) -> bool:
    """Leaves own a column in 2.1+ (everything except structs with children and lists)."""
    if pa.types.is_struct(t):
        return bool(t.num_fields == 0)
    return not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t))


def item_field(t: pa.DataType) -> pa.Field:
    """The child of a list-like type (a map's child is its ``entries`` struct)."""
    return t.field(0) if pa.types.is_map(t) else t.value_field


def is_packed(field: pa.Field) -> bool:
    """lance's ``Field::is_packed_struct``: metadata ``packed`` or ``lance-encoding:packed`` = true."""
    meta = field.metadata or {}
    return any(meta.get(k, b"").lower() == b"true" for k in (b"packed", b"lance-encoding:packed"))


def leaf_paths(field: pa.Field) -> list[list[pa.Field]]:
    """Root-to-leaf field paths under ``field`` in pre-order (packed structs count as leaves)."""
    if is_leaf_type(field.type) or (pa.types.is_struct(field.type) and is_packed(field)):
        return [[field]]
    if pa.types.is_struct(field.type):
        return [[field] + p for i in range(field.type.num_fields) for p in leaf_paths(field.type.field(i))]
    return [[field] + p for p in leaf_paths(item_field(field.type))]
