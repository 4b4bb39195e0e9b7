"""Turning decoded blocks and rep/def structure into Arrow arrays, and merging leaf columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format.arrays import arrow_array, numbers
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.utf8 import string_problem
from lance_format.file.v2_1.blocks import (
    Block,
    Constant,
    Fixed,
    Fsl,
    PackedStruct,
    Var,
    VarPackedStruct,
    fixed_to_uint,
)
from lance_format.file.v2_1.layout import PageData
from lance_format.file.v2_1.repdef import unravel
from lance_format.file.v2_1.types21 import is_leaf_type, is_packed, item_field, leaf_paths


class _InvalidStrings(CorruptFileError):
    """String values whose bytes are not UTF-8 (or whose offsets are broken); the page names the column."""


def _bitmap(validity: np.ndarray | None) -> pa.Buffer | None:
    if validity is None or validity.all():
        return None
    return pa.py_buffer(np.packbits(validity, bitorder="little"))


def _fixed_width_bits(t: pa.DataType) -> int:
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t):
        return int(t.byte_width) * 8
    return int(t.bit_width)


def _constant_block(block: Constant, t: pa.DataType, n: int) -> Block:
    assert block.value is not None
    if _is_var(t):
        offs = np.arange(n + 1, dtype=np.int64) * len(block.value)
        return Var(offs, np.frombuffer(block.value * n, np.uint8))
    if pa.types.is_boolean(t):
        bit = bool(block.value[0]) if block.value else False
        return Fixed(1, np.packbits(np.full(n, bit), bitorder="little"), n)
    if pa.types.is_fixed_size_list(t):
        bits = _fixed_width_bits(_fsl_item_type(t)[0])
        dims = _fsl_item_type(t)[1]
        dim = int(np.prod(dims))
        items = Fixed(bits, np.frombuffer(block.value * n, np.uint8), n * dim)
        return Fsl(dims, [None] * len(dims), items, n)
    return Fixed(len(block.value) * 8, np.frombuffer(block.value * n, np.uint8), n)


def _is_var(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    )


def _fsl_item_type(t: pa.DataType) -> tuple[pa.DataType, list[int]]:
    dims = []
    while pa.types.is_fixed_size_list(t):
        dims.append(t.list_size)
        t = t.value_type
    return t, dims


def block_to_arrow(block: Block, t: pa.DataType, validity: np.ndarray | None, n: int) -> pa.Array:
    """Build an Arrow array of type ``t`` with ``n`` values from a decoded block."""
    if pa.types.is_struct(t) and t.num_fields == 0:  # lance stores empty structs as an all-null page
        return pa.Array.from_buffers(t, n, [None], children=[])
    if isinstance(block, Constant):
        if block.value is None:
            return pa.nulls(n, t)
        block = _constant_block(block, t, n)
    if block.n != n:
        raise CorruptFileError(f"page holds {block.n} values but its structure needs {n}")
    if pa.types.is_dictionary(t):
        raise UnsupportedEncodingError("dictionary arrays need a dictionary page")
    if isinstance(block, Var):
        if not _is_var(t):
            raise CorruptFileError(f"variable-width data for column of type {t}")
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        offs = block.offsets
        if not large and len(offs) and offs[-1] > np.iinfo(np.int32).max:
            raise CorruptFileError("string data exceeds 2 GiB for 32-bit offsets")
        offs = offs - offs[0] if len(offs) and offs[0] else offs
        data = block.data[int(block.offsets[0]) : int(block.offsets[-1])] if len(offs) else block.data
        ob = pa.py_buffer(offs.astype(np.int64 if large else np.int32))
        arr = pa.Array.from_buffers(t, n, [_bitmap(validity), ob, pa.py_buffer(np.ascontiguousarray(data))])
        # Bytes from the file become strings only here: checked once, where decoding runs (on the
        # column threads), and a dictionary page's strings once per dictionary, not once per row.
        problem = string_problem(arr) if pa.types.is_string(t) or pa.types.is_large_string(t) else None
        if problem is not None:
            raise _InvalidStrings(problem)
        return arr
    if isinstance(block, Fsl):
        if not pa.types.is_fixed_size_list(t):
            raise CorruptFileError(f"fixed-size-list data for column of type {t}")
        item_t, dims = _fsl_item_type(t)
        if dims != block.dims:
            raise CorruptFileError(f"fixed-size-list dimension {block.dims} != schema {dims}")
        total = n * int(np.prod(dims))
        arr = _fixed_to_arrow(block.items, item_t, block.validity[-1], total)
        types = []
        cur = t
        while pa.types.is_fixed_size_list(cur):
            types.append(cur)
            cur = cur.value_type
        for li in range(len(dims) - 1, -1, -1):
            count = n * int(np.prod(dims[:li]))
            val = validity if li == 0 else block.validity[li - 1]
            arr = pa.FixedSizeListArray.from_arrays(arr, type=types[li], mask=_mask(val))
            assert len(arr) == count
        return arr
    if isinstance(block, PackedStruct):
        return _packed_struct(block, t, validity, n)
    if isinstance(block, VarPackedStruct):
        return _var_packed_struct(block, t, validity, n)
    assert isinstance(block, Fixed)
    return _fixed_to_arrow(block, t, validity, n)


def _mask(validity: np.ndarray | None) -> pa.Array | None:
    if validity is None or validity.all():
        return None
    return pa.array(~validity)


def _fixed_to_arrow(block: Fixed, t: pa.DataType, validity: np.ndarray | None, n: int) -> pa.Array:
    if pa.types.is_null(t):
        return pa.nulls(n)
    bits = _fixed_width_bits(t)
    if bits == 1 and block.bits == 8:  # full-zip stores booleans one per byte
        if len(block.data) < n:
            raise CorruptFileError("boolean values are truncated")
        block = Fixed(1, np.packbits(block.data[:n] != 0, bitorder="little"), n)
    if block.bits != bits:
        raise CorruptFileError(f"{block.bits}-bit values for column of type {t}")
    nbytes = (n * bits + 7) // 8
    if len(block.data) < nbytes:
        raise CorruptFileError("fixed-width values are truncated")
    data = pa.py_buffer(np.ascontiguousarray(block.data[:nbytes]))
    return pa.Array.from_buffers(t, n, [_bitmap(validity), data])


def _packed_struct(block: PackedStruct, t: pa.DataType, validity: np.ndarray | None, n: int) -> pa.Array:
    if any(b % 8 for b in block.bits):
        raise UnsupportedEncodingError("packed struct children must be byte aligned")
    row = sum(block.bits) // 8
    mat = np.ascontiguousarray(block.data[: n * row]).reshape(n, row)
    children = []
    pos = 0
    for i, b in enumerate(block.bits):
        child_t = t.field(i).type
        raw = np.ascontiguousarray(mat[:, pos : pos + b // 8]).reshape(-1)
        if pa.types.is_fixed_size_list(child_t):
            item_t, dims = _fsl_item_type(child_t)
            dim = int(np.prod(dims))
            children.append(
                block_to_arrow(
                    Fsl(dims, [None] * len(dims), Fixed(b // dim, raw, n * dim), n), child_t, None, n
                )
            )
        else:
            children.append(_fixed_to_arrow(Fixed(b, raw, n), child_t, None, n))
        pos += b // 8
    return pa.StructArray.from_arrays(children, fields=list(t), mask=_mask(validity))


def _var_packed_struct(
    block: VarPackedStruct, t: pa.DataType, validity: np.ndarray | None, n: int
) -> pa.Array:
    if len(block.children) != t.num_fields:
        raise CorruptFileError("packed struct has a different number of fields than the schema")
    children = [block_to_arrow(c, t.field(i).type, None, n) for i, c in enumerate(block.children)]
    return pa.StructArray.from_arrays(children, fields=list(t), mask=_mask(validity))


def dictionary_to_arrow(page: PageData, t: pa.DataType, validity: np.ndarray | None, n: int) -> pa.Array:
    """Resolve dictionary indices (mini-block dictionary pages)."""
    assert page.dictionary is not None
    idx_block = page.values
    if isinstance(idx_block, Constant):
        idx = np.full(n, int.from_bytes(idx_block.value or b"\0", "little"), np.int64)
    elif isinstance(idx_block, Fixed):
        if idx_block.n != n:
            raise CorruptFileError(f"page holds {idx_block.n} values but its structure needs {n}")
        idx = fixed_to_uint(idx_block)  # Arrow's take reads unsigned indices as they are: no widening copy
    else:
        raise CorruptFileError("dictionary indices must be fixed-width")
    value_t = t.value_type if pa.types.is_dictionary(t) else t
    ndict = page.dictionary.n
    dictionary = block_to_arrow(page.dictionary, value_t, None, ndict)
    if validity is not None:
        idx = np.where(validity, idx, 0)
    if len(idx) and (idx.min() < 0 or idx.max() >= max(ndict, 1)):
        raise CorruptFileError("dictionary index out of range")
    if pa.types.is_dictionary(t):
        keys = pa.Array.from_buffers(
            t.index_type, n, [_bitmap(validity), pa.py_buffer(idx.astype(t.index_type.to_pandas_dtype()))]
        )
        return pa.DictionaryArray.from_arrays(keys, dictionary)
    idx = np.ascontiguousarray(idx)  # from_buffers, not pa.array: pyarrow imports pandas (~0.45 s) on pa.array
    out = dictionary.take(pa.Array.from_buffers(pa.from_numpy_dtype(idx.dtype), len(idx), [None, pa.py_buffer(idx)]))
    if validity is not None and not validity.all():
        out = pa.compute.if_else(pa.array(validity), out, pa.nulls(n, t))
    return out


def page_to_arrow(page: PageData, path: list[pa.Field], where: str = "") -> pa.Array:
    """Build the root-to-leaf nested array (one child per struct) for one page.

    ``where`` prefixes errors; callers whose errors are named elsewhere leave it empty.
    """
    at = f"{where}: " if where else ""
    if len(page.layers) != len(path):
        raise CorruptFileError(f"{at}page has {len(page.layers)} rep/def layers, schema path {len(path)}")
    if page.rep is not None:
        num_levels = len(page.rep)
    elif page.defs is not None:
        num_levels = len(page.defs)
    else:
        num_levels = page.values.n
    outs, npos = unravel(page.rep, page.defs, page.layers, num_levels)
    leaf_t = path[-1].type
    try:
        if page.dictionary is not None:
            arr = dictionary_to_arrow(page, leaf_t, outs[0].validity, npos)
        else:
            arr = block_to_arrow(page.values, leaf_t, outs[0].validity, npos)
    except _InvalidStrings as exc:  # pylance refuses such a page too ("invalid utf-8 sequence")
        raise CorruptFileError(f"column {path[0].name!r} holds invalid data ({exc})") from None
    for k in range(1, len(path)):
        node = path[len(path) - 1 - k]
        out = outs[k]
        child_field = path[len(path) - k]
        if pa.types.is_struct(node.type):
            item = pa.field(child_field.name, arr.type, child_field.nullable, child_field.metadata)
            arr = pa.StructArray.from_arrays([arr], fields=[item], mask=_mask(out.validity))
        else:
            assert out.offsets is not None
            large = pa.types.is_large_list(node.type)
            # from the buffers: pa.array of an ndarray imports pandas (~0.3 s) on a first query
            offs = arrow_array(out.offsets, pa.int64() if large else pa.int32())
            cls = pa.LargeListArray if large else pa.ListArray
            item = pa.field(child_field.name, arr.type, child_field.nullable, child_field.metadata)
            arr = cls.from_arrays(offs, arr, type=_list_type(node.type, item), mask=_mask(out.validity))
    if len(arr) != page.num_rows:
        raise CorruptFileError(f"{at}page decodes to {len(arr)} rows, expected {page.num_rows}")
    return arr


def _list_type(t: pa.DataType, child: pa.Field) -> pa.DataType:
    # A map's per-leaf path array is a plain list; ``merge`` turns the leaves into the map.
    return pa.large_list(child) if pa.types.is_large_list(t) else pa.list_(child)


def merge(field: pa.Field, arrays: list[pa.Array]) -> pa.Array:
    """Combine the per-leaf path arrays under ``field`` into one array of ``field.type``."""
    t = field.type
    if is_leaf_type(t) or (pa.types.is_struct(t) and is_packed(field)):
        return arrays[0]
    first = arrays[0]
    if pa.types.is_struct(t):
        children = []
        pos = 0
        for i in range(t.num_fields):
            cf = t.field(i)
            k = len(leaf_paths(cf))
            children.append(merge(cf, [a.field(0) for a in arrays[pos : pos + k]]))
            pos += k
        valid = first.is_valid()
        mask = pa.compute.invert(valid) if first.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    offsets = first.offsets
    o0 = offsets[0].as_py()
    o1 = offsets[-1].as_py()
    child_arrays = [a.values.slice(a.offsets[0].as_py(), o1 - o0) for a in arrays]
    child = merge(item_field(t), child_arrays)
    # a sliced offsets array cannot carry a validity mask into from_arrays (Arrow refuses "null
    # bitmap with offsets slice"), so a slice is rebased into a fresh array even when it starts at 0
    # (in numpy: pa.scalar and pa.compute import pandas, ~0.3 s on a first query)
    new_offs = arrow_array(numbers(offsets) - o0, offsets.type) if o0 or offsets.offset else offsets
    mask = pa.compute.invert(first.is_valid()) if first.null_count else None
    if pa.types.is_map(t):
        if child.type.num_fields != 2 or child.null_count:
            raise CorruptFileError(f"map column {field.name!r}: entries must be non-null key/value structs")
        return pa.MapArray.from_arrays(new_offs, child.field(0), child.field(1), type=t, mask=mask)
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    return cls.from_arrays(new_offs, child, type=t, mask=mask)
