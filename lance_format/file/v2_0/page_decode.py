"""Decode one 2.0 page encoding tree (``lance.encodings.ArrayEncoding``) into Arrow.

Every function takes a :class:`Sel` and reads only the bytes of the selected rows: a
contiguous span becomes one read per buffer, scattered rows become merged small reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

import lance_format.file.v2_0.compressed as compressed
from lance_format.errors import UnsupportedEncodingError
from lance_format.file.v2_0.buffers import (
    PageCtx,
    Sel,
    bitmap,
    fixed_width,
    gather_fixed,
    gather_var,
    unpack_bits,
)
from lance_format.file.v2_1 import fsst as fsst_codec

_BINARY_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def is_binary_like(typ: pa.DataType) -> bool:
    """Whether ``typ`` is (large) string or (large) binary."""
    return any(check(typ) for check in _BINARY_TYPES)


def _is_large(typ: pa.DataType) -> bool:
    return bool(pa.types.is_large_string(typ) or pa.types.is_large_binary(typ))


def decode_array(enc: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    """Decode the selected rows of ``enc`` as an Arrow array of type ``typ``."""
    kind = enc.WhichOneof("array_encoding")
    if kind == "nullable":
        return _decode_nullable(enc.nullable, ctx, sel, typ)
    if kind == "flat":
        return _decode_flat(enc.flat, ctx, sel, typ)
    if kind == "fixed_size_list":
        return _decode_fsl(enc.fixed_size_list, ctx, sel, typ)
    if kind == "binary":
        return _decode_binary(enc.binary, ctx, sel, typ)
    if kind == "dictionary":
        return _decode_dictionary(enc.dictionary, ctx, sel, typ)
    if kind == "fixed_size_binary":
        return _decode_fixed_size_binary(enc.fixed_size_binary, ctx, sel, typ)
    if kind == "packed_struct":
        return _decode_packed_struct(enc.packed_struct, ctx, sel, typ)
    if kind == "constant":
        return _decode_constant(enc.constant, sel, typ)
    if kind == "fsst":
        return decode_fsst(enc.fsst, ctx, sel, typ)
    if kind == "bitpacked":
        return compressed.decode_bitpacked(enc.bitpacked, ctx, sel, typ)
    if kind == "bitpacked_for_non_neg":
        return compressed.decode_bitpacked_non_neg(enc.bitpacked_for_non_neg, ctx, sel, typ)
    raise UnsupportedEncodingError(f"{ctx.where}: array encoding {kind!r} is not supported in a 2.0 page")


def decode_uints(enc: Any, ctx: PageCtx, sel: Sel) -> np.ndarray:
    """Decode an offsets / indices encoding as a uint64 numpy array."""
    while (
        enc.WhichOneof("array_encoding") == "nullable"
        and enc.nullable.WhichOneof("nullability") == "no_nulls"
    ):
        enc = enc.nullable.no_nulls.values
    if enc.WhichOneof("array_encoding") == "flat" and enc.flat.bits_per_value in (8, 16, 32, 64):
        bits = int(enc.flat.bits_per_value)
        raw = _read_fixed(enc.flat, ctx, sel, bits // 8)
        return raw.view(f"<u{bits // 8}").astype(np.uint64, copy=False)
    arr = decode_array(enc, ctx, sel, pa.uint64())
    if arr.null_count:
        raise ctx.corrupt("offsets / indices contain nulls")
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint64)


def _decode_uints_masked(enc: Any, ctx: PageCtx, sel: Sel) -> tuple[np.ndarray, np.ndarray | None]:
    """Offsets that may carry a validity bitmap (writers before ``null_adjustment`` marked nulls so)."""
    if (
        enc.WhichOneof("array_encoding") == "nullable"
        and enc.nullable.WhichOneof("nullability") == "some_nulls"
    ):
        valid = decode_validity(enc.nullable.some_nulls.validity, ctx, sel)
        return decode_uints(enc.nullable.some_nulls.values, ctx, sel), valid
    return decode_uints(enc, ctx, sel), None


def _compressed(flat: Any) -> bool:
    return bool(flat.HasField("compression") and flat.compression.scheme not in ("", "none"))


def _read_fixed(flat: Any, ctx: PageCtx, sel: Sel, width: int) -> np.ndarray:
    if _compressed(flat):
        whole = compressed.whole_buffer(flat, ctx)
        if sel.stop * width > len(whole):
            raise ctx.corrupt("decompressed values end before the selected rows")
        if sel.rows is None:
            part: np.ndarray = whole[sel.start * width : sel.stop * width]
            return part
        part = whole[: len(whole) // width * width].reshape(-1, width)[sel.rows].reshape(-1)
        return part
    if sel.rows is None:
        return ctx.read(flat.buffer, sel.start * width, (sel.stop - sel.start) * width)
    blob, pos = ctx.gather(flat.buffer, sel.rows * width, width)
    return gather_fixed(blob, pos, width)


def read_bits(flat: Any, ctx: PageCtx, sel: Sel) -> np.ndarray:
    """Selected bits of a 1-bit ``Flat`` buffer as bools."""
    if _compressed(flat):
        whole = compressed.whole_buffer(flat, ctx)
        if (sel.stop + 7) // 8 > len(whole):
            raise ctx.corrupt("decompressed bitmap ends before the selected rows")
        bits: np.ndarray = unpack_bits(whole, 0, sel.stop)[sel.as_rows()]
        return bits
    if sel.rows is None:
        first, last = sel.start // 8, (sel.stop + 7) // 8
        data = ctx.read(flat.buffer, first, last - first)
        return unpack_bits(data, sel.start % 8, sel.stop - sel.start)
    blob, pos = ctx.gather(flat.buffer, sel.rows // 8, 1)
    picked: np.ndarray = ((blob[pos] >> (sel.rows & 7).astype(np.uint8)) & 1).astype(bool)
    return picked


def decode_validity(enc: Any, ctx: PageCtx, sel: Sel) -> np.ndarray:
    """Validity encoding (normally ``Flat`` with 1 bit) as bools."""
    if enc.WhichOneof("array_encoding") == "flat" and enc.flat.bits_per_value == 1:
        return read_bits(enc.flat, ctx, sel)
    arr = decode_array(enc, ctx, sel, pa.bool_())
    return np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def with_validity(arr: pa.Array, valid: np.ndarray) -> pa.Array:
    """Return ``arr`` with the given validity (``valid`` has one entry per element)."""
    if len(valid) != len(arr):
        raise ValueError("validity length mismatch")
    if bool(valid.all()):
        return arr
    typ = arr.type
    if pa.types.is_fixed_size_list(typ):
        values = arr.values
        return pa.FixedSizeListArray.from_arrays(values, type=typ, mask=pa.array(~valid))
    if pa.types.is_dictionary(typ):
        indices = with_validity(arr.indices, valid & ~np.asarray(arr.indices.is_null()))
        return pa.DictionaryArray.from_arrays(indices, arr.dictionary)
    if pa.types.is_null(typ):
        return arr
    if arr.null_count:
        valid = valid & np.asarray(arr.is_valid())
    bufs = arr.buffers()
    if arr.offset:
        valid = np.concatenate([np.zeros(arr.offset, dtype=bool), valid])
    return pa.Array.from_buffers(typ, len(arr), [bitmap(valid), *bufs[1:]], offset=arr.offset)


def _decode_nullable(nul: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    kind = nul.WhichOneof("nullability")
    if kind == "no_nulls":
        return decode_array(nul.no_nulls.values, ctx, sel, typ)
    if kind == "all_nulls":
        return pa.nulls(len(sel), type=typ)
    if kind == "some_nulls":
        valid = decode_validity(nul.some_nulls.validity, ctx, sel)
        values = decode_array(nul.some_nulls.values, ctx, sel, typ)
        return with_validity(values, valid)
    raise ctx.corrupt("Nullable encoding without a nullability variant")


def _decode_flat(flat: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    bits = int(flat.bits_per_value)
    n = len(sel)
    if bits == 1:
        if not pa.types.is_boolean(typ):
            raise ctx.corrupt(f"1-bit values for a field of type {typ}")
        return pa.Array.from_buffers(pa.bool_(), n, [None, bitmap(read_bits(flat, ctx, sel))])
    if pa.types.is_null(typ):
        return pa.nulls(n)
    if bits % 8 or bits == 0:
        raise UnsupportedEncodingError(f"{ctx.where}: flat values of {bits} bits per value")
    width = bits // 8
    if fixed_width(typ) != width:
        raise ctx.corrupt(f"flat values of {bits} bits do not fit field type {typ}")
    data = _read_fixed(flat, ctx, sel, width)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)])


def _decode_fsl(fsl: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    if not pa.types.is_fixed_size_list(typ):
        raise ctx.corrupt(f"fixed-size-list encoding for a field of type {typ}")
    dim = int(fsl.dimension)
    if dim != typ.list_size:
        raise ctx.corrupt(f"fixed-size-list dimension {dim} but field type is {typ}")
    items = decode_array(fsl.items, ctx, sel.scaled(dim), typ.value_type)
    return pa.FixedSizeListArray.from_arrays(items, type=typ)


def _normalize(vals: np.ndarray, adj: int) -> tuple[np.ndarray, np.ndarray]:
    """Split encoded end offsets into (ends, valid) using the null adjustment."""
    if adj == 0:
        return vals, np.ones(len(vals), dtype=bool)
    valid = vals < adj
    if bool(valid.all()):  # no nulls in this range (the common case): no adjusted copy
        return vals, valid
    return np.where(valid, vals, vals - np.uint64(adj)), valid


def read_ranges_encoded(
    offsets_enc: Any, ctx: PageCtx, sel: Sel, adj: int, num_items: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start / end item positions and validity of the selected rows of an end-offsets encoding.

    Shared by Binary (bytes) and List (items): entry ``i`` is ``end_i`` or ``end_i + adj`` when null,
    and row ``i`` covers ``[end_{i-1}, end_i)`` with ``end_{-1} = 0``.
    """
    if sel.rows is None:
        lo = max(sel.start - 1, 0)
        raw, mask = _decode_uints_masked(offsets_enc, ctx, Sel(lo, sel.stop))
        ends, valid = _normalize(raw, adj)
        if mask is not None:
            valid &= mask
        if sel.start > 0:
            starts = ends[:-1]
            ends, valid = ends[1:], valid[1:]
        else:
            starts = np.concatenate([np.zeros(1, np.uint64), ends[:-1]])
    else:
        rows = sel.rows
        prev = rows - 1
        want = np.union1d(rows, prev[prev >= 0])
        raw, mask = _decode_uints_masked(offsets_enc, ctx, Sel.of_rows(want))
        all_ends, all_valid = _normalize(raw, adj)
        if mask is not None:
            all_valid &= mask
        at = np.searchsorted(want, rows)
        ends, valid = all_ends[at], all_valid[at]
        starts = np.zeros(len(rows), dtype=np.uint64)
        has_prev = prev >= 0
        starts[has_prev] = all_ends[np.searchsorted(want, prev[has_prev])]
    if len(ends) and (bool((ends < starts).any()) or (num_items is not None and int(ends.max()) > num_items)):
        raise ctx.corrupt("offsets are not monotonic or point past the end of the items")
    return starts.astype(np.int64), ends.astype(np.int64), valid


def _decode_binary(binary: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    if not is_binary_like(typ):
        raise ctx.corrupt(f"binary encoding for a field of type {typ}")
    bytes_enc = binary.bytes
    while bytes_enc.WhichOneof("array_encoding") == "nullable":
        if bytes_enc.nullable.WhichOneof("nullability") != "no_nulls":
            raise UnsupportedEncodingError(f"{ctx.where}: nullable bytes buffer in a binary page")
        bytes_enc = bytes_enc.nullable.no_nulls.values
    if bytes_enc.WhichOneof("array_encoding") != "flat" or bytes_enc.flat.bits_per_value != 8:
        raise UnsupportedEncodingError(
            f"{ctx.where}: binary bytes encoded as {bytes_enc.WhichOneof('array_encoding')}"
        )
    flat = bytes_enc.flat
    whole = compressed.whole_buffer(flat, ctx) if _compressed(flat) else None
    size = len(whole) if whole is not None else ctx.buffer_size(flat.buffer)
    starts, ends, valid = read_ranges_encoded(binary.indices, ctx, sel, int(binary.null_adjustment), size)
    lengths = ends - starts
    n = len(lengths)
    if whole is not None:
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = gather_var(whole, starts, lengths)
    elif n and sel.rows is None:
        base = int(starts[0])
        data = ctx.read(bytes_enc.flat.buffer, base, int(ends[-1]) - base)
        offsets = np.concatenate([starts[:1], ends]) - base
    else:
        blob, pos = ctx.gather(bytes_enc.flat.buffer, starts, lengths)
        data = gather_var(blob, pos, lengths)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
    return make_binary(typ, offsets, data, valid)


def make_binary(
    typ: pa.DataType, offsets: np.ndarray, data: np.ndarray, valid: np.ndarray | None
) -> pa.Array:
    """Arrow (large) string/binary array from int64 offsets, bytes and validity."""
    n = len(offsets) - 1
    if _is_large(typ):
        off = offsets.astype(np.int64, copy=False)
    else:
        if len(offsets) and int(offsets[-1]) >= 2**31:
            raise UnsupportedEncodingError(f"{int(offsets[-1])} bytes do not fit a 32-bit offset {typ} array")
        off = offsets.astype(np.int32)
    vbuf = None if valid is None or bool(valid.all()) else bitmap(valid)
    return pa.Array.from_buffers(typ, n, [vbuf, pa.py_buffer(off), pa.py_buffer(data)])


def _decode_dictionary(dic: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    n_items = int(dic.num_dictionary_items)
    value_type = typ.value_type if pa.types.is_dictionary(typ) else typ
    items = decode_array(dic.items, ctx, Sel(0, n_items), value_type)
    if pa.types.is_dictionary(typ):
        indices = decode_array(dic.indices, ctx, sel, typ.index_type)
        idx = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= max(n_items, 1)):
            raise ctx.corrupt(f"dictionary index out of range ({n_items} items)")
        valid = np.asarray(indices.is_valid())
        if items.null_count and len(idx):
            valid &= np.asarray(items.is_valid())[np.minimum(idx, len(items) - 1)]
        indices = with_validity(indices, valid)
        return pa.DictionaryArray.from_arrays(indices, items)
    # a plain string column dictionary-encoded by the writer: u8 indices, 0 = null, item i+1
    codes = decode_uints(dic.indices, ctx, sel).astype(np.int64)
    if len(codes) and int(codes.max()) > n_items:
        raise ctx.corrupt(f"dictionary index out of range ({n_items} items)")
    valid = codes > 0
    if valid.all():  # from_buffers, not pa.array: pyarrow imports pandas (~0.45 s) on pa.array
        return items.take(pa.Array.from_buffers(pa.int64(), len(codes), [None, pa.py_buffer(codes - 1)]))
    return items.take(pa.array(codes - 1, mask=~valid))


def _decode_fixed_size_binary(fsb: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    width = int(fsb.byte_width)
    if width <= 0:
        raise ctx.corrupt("fixed-size binary with non-positive width")
    raw = decode_array(fsb.bytes, ctx, sel.scaled(width), pa.uint8())
    data = np.asarray(raw.to_numpy(zero_copy_only=False), dtype=np.uint8)
    offsets = np.arange(len(sel) + 1, dtype=np.int64) * width
    if pa.types.is_fixed_size_binary(typ):
        return pa.Array.from_buffers(typ, len(sel), [None, pa.py_buffer(data)])
    return make_binary(typ, offsets, data, None)


def _decode_packed_struct(ps: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    if not pa.types.is_struct(typ) or len(ps.inner) != typ.num_fields:
        raise ctx.corrupt(f"packed struct encoding for a field of type {typ}")
    widths = [_packed_width(inner, ctx) for inner in ps.inner]
    row = sum(widths)
    n = len(sel)
    if sel.rows is None:
        data = ctx.read(ps.buffer, sel.start * row, n * row)
    else:
        blob, pos = ctx.gather(ps.buffer, sel.rows * row, row)
        data = gather_fixed(blob, pos, row)
    rows = data.reshape(n, row)
    children = []
    at = 0
    for i, width in enumerate(widths):
        col = np.ascontiguousarray(rows[:, at : at + width]).reshape(-1)
        at += width
        ftype = typ.field(i).type
        if pa.types.is_fixed_size_list(ftype):
            vals = pa.Array.from_buffers(ftype.value_type, n * ftype.list_size, [None, pa.py_buffer(col)])
            children.append(pa.FixedSizeListArray.from_arrays(vals, type=ftype))
        else:
            children.append(pa.Array.from_buffers(ftype, n, [None, pa.py_buffer(col)]))
    return pa.StructArray.from_arrays(children, fields=list(typ))


def _packed_width(enc: Any, ctx: PageCtx) -> int:
    """Bytes per row of one packed-struct child encoding (``[Nullable.no_nulls] Flat`` or FSL of those)."""
    kind = enc.WhichOneof("array_encoding")
    if kind == "nullable" and enc.nullable.WhichOneof("nullability") == "no_nulls":
        return _packed_width(enc.nullable.no_nulls.values, ctx)
    if kind == "fixed_size_list":
        return int(enc.fixed_size_list.dimension) * _packed_width(enc.fixed_size_list.items, ctx)
    if kind == "flat" and enc.flat.bits_per_value % 8 == 0 and enc.flat.bits_per_value:
        return int(enc.flat.bits_per_value) // 8
    raise UnsupportedEncodingError(f"{ctx.where}: packed struct child encoded as {kind}")


def _decode_constant(const: Any, sel: Sel, typ: pa.DataType) -> pa.Array:
    n = len(sel)
    width = fixed_width(typ)
    value = bytes(const.value)
    if width and len(value) == width:
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(value * n)])
    raise UnsupportedEncodingError(f"constant encoding of {len(value)} bytes for type {typ}")


def decode_fsst(fsst: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    """FSST-compressed strings."""
    comp = decode_array(fsst.binary, ctx, sel, pa.large_binary())
    bufs = comp.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[comp.offset : comp.offset + len(comp) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    data = data[int(offsets[0]) : int(offsets[-1])]
    table = fsst_codec.SymbolTable(bytes(fsst.symbol_table))
    out, out_offsets = fsst_codec.decode(table, data, offsets - offsets[0])
    valid = np.asarray(comp.is_valid()) if comp.null_count else None
    return make_binary(typ, np.asarray(out_offsets, dtype=np.int64), np.asarray(out, dtype=np.uint8), valid)
