"""Encode one page of Arrow data with the encodings the real 2.0 writer picks.

* fixed-width values: ``Nullable{no_nulls|some_nulls|all_nulls}`` around ``Flat`` (validity first)
* (large) string / binary: ``Binary{indices: u64 end offsets (+null_adjustment when null), bytes}``
* ``string`` pages of >= 100 rows with < 100 distinct values: ``Dictionary{u8 indices (0 = null), items}``
* Arrow dictionaries: ``Dictionary{indices, items}``, null keys pointing at a null item
* fixed-size lists: ``Nullable{.. FixedSizeList{dimension, items}}``
* packed structs: ``PackedStruct{inner Flat per child, one row-major buffer}``
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format._pb import encodings_v2_0_pb2 as pb
from lance_format.errors import UnsupportedTypeError
from lance_format.file.v2_0.buffers import fixed_width
from lance_format.file.v2_0.compressed import compress
from lance_format.file.v2_0.page_decode import is_binary_like

#: Pages of at least this many rows may switch ``string`` to dictionary encoding.
DICT_MIN_ROWS = 100
#: ... when they hold fewer distinct values than this.
DICT_MAX_DISTINCT = 100


class PageBuffers:
    """Buffers of the page being encoded, in buffer-index order."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []

    def add(self, data: Any) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1


def _flat(bits: int, index: int) -> Any:
    enc = pb.ArrayEncoding()
    enc.flat.bits_per_value = bits
    enc.flat.buffer.buffer_index = index
    return enc


def _bits_of(buf: pa.Buffer | None, offset: int, n: int) -> Any:
    """Bitmap of ``n`` bits starting at bit ``offset`` re-based to bit 0."""
    nbytes = (n + 7) // 8
    if buf is None:
        return np.full(nbytes, 0xFF, dtype=np.uint8)
    if offset % 8 == 0:
        return pa.py_buffer(buf)[offset // 8 : offset // 8 + nbytes]
    raw = np.frombuffer(buf, dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[offset : offset + n]
    return np.packbits(bits, bitorder="little")


def _validity_bits(arr: pa.Array) -> Any:
    return _bits_of(arr.buffers()[0], arr.offset, len(arr))


def _nullable(arr: pa.Array, out: PageBuffers, values_fn: Any) -> Any:
    """Wrap the encoding produced by ``values_fn()`` in the Nullable variant ``arr`` needs."""
    enc = pb.ArrayEncoding()
    nulls = arr.null_count
    if len(arr) and nulls == len(arr):
        enc.nullable.all_nulls.SetInParent()
    elif nulls == 0:
        enc.nullable.no_nulls.values.CopyFrom(values_fn())
    else:
        enc.nullable.some_nulls.validity.CopyFrom(_flat(1, out.add(_validity_bits(arr))))
        enc.nullable.some_nulls.values.CopyFrom(values_fn())
    return enc


def _fixed_values(arr: pa.Array, out: PageBuffers) -> Any:
    typ = arr.type
    if pa.types.is_boolean(typ):
        return _flat(1, out.add(_bits_of(arr.buffers()[1], arr.offset, len(arr))))
    width = fixed_width(typ)
    if width is None:
        raise UnsupportedTypeError(f"cannot encode type {typ} as fixed-width values")
    data = arr.buffers()[1]
    view = (
        pa.py_buffer(data)[arr.offset * width : (arr.offset + len(arr)) * width]
        if data is not None
        else np.zeros(len(arr) * width, np.uint8)
    )
    return _flat(width * 8, out.add(view))


def _fsl_values(arr: pa.Array, out: PageBuffers) -> Any:
    dim = arr.type.list_size
    items = arr.values.slice(arr.offset * dim, len(arr) * dim)
    enc = pb.ArrayEncoding()
    enc.fixed_size_list.dimension = dim
    enc.fixed_size_list.items.CopyFrom(encode_array(items, out))
    return enc


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, Any, int]:
    """``(u64 end offsets with nulls adjusted, bytes, null_adjustment)`` of a binary-like array."""
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    bufs = arr.buffers()
    n = len(arr)
    offsets = (
        np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
        if bufs[1] is not None
        else np.zeros(n + 1, np.int64)
    )
    first, last = int(offsets[0]), int(offsets[-1])
    ends = offsets[1:].astype(np.uint64) - np.uint64(first)
    adjustment = last - first + 1
    if arr.null_count:
        valid = np.unpackbits(np.frombuffer(_bits_of(bufs[0], arr.offset, n), np.uint8), bitorder="little")[
            :n
        ]
        ends = ends + np.where(valid.astype(bool), np.uint64(0), np.uint64(adjustment))
    data = pa.py_buffer(bufs[2])[first:last] if bufs[2] is not None else b""
    return ends, data, adjustment


def _binary(arr: pa.Array, out: PageBuffers, compression: tuple[str, int | None] | None = None) -> Any:
    ends, data, adjustment = binary_parts(arr)
    enc = pb.ArrayEncoding()
    enc.binary.indices.nullable.no_nulls.values.CopyFrom(_flat(64, out.add(ends)))
    if compression is None:
        enc.binary.bytes.CopyFrom(_flat(8, out.add(data)))
    else:
        scheme, level = compression
        enc.binary.bytes.CopyFrom(_flat(8, out.add(compress(scheme, data, level))))
        enc.binary.bytes.flat.compression.scheme = scheme
        if level is not None:
            enc.binary.bytes.flat.compression.level = level
    enc.binary.null_adjustment = adjustment
    return enc


def field_compression(metadata: dict[bytes, bytes] | None) -> tuple[str, int | None] | None:
    """General compression requested by ``lance-encoding:compression`` (zstd / lz4) field metadata."""
    meta = metadata or {}
    scheme = meta.get(b"lance-encoding:compression", b"").decode(errors="replace").strip().lower()
    if scheme not in ("zstd", "lz4"):
        return None  # fsst / none / unknown: plain (2.0 FSST is not written by this implementation)
    level_raw = meta.get(b"lance-encoding:compression-level")
    try:
        level = int(level_raw) if level_raw is not None else None
    except ValueError:
        level = None
    return scheme, level


def _wants_dictionary(arr: pa.Array) -> bool:
    if not pa.types.is_string(arr.type) or len(arr) < DICT_MIN_ROWS:
        return False
    # growing prefixes: high-cardinality pages are rejected after hashing a few hundred values,
    # like the real writer's early-exiting cardinality estimate
    size = 256
    while True:
        prefix = arr.slice(0, size)
        if int(pc.count_distinct(prefix, mode="only_valid").as_py()) >= DICT_MAX_DISTINCT:
            return False
        if size >= len(arr):
            return True
        size *= 16


def _string_dictionary(arr: pa.Array, out: PageBuffers) -> Any:
    encoded = pc.dictionary_encode(arr)
    items = encoded.dictionary
    codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64) + 1
    if len(items) == 0:
        items = pa.array([None], type=arr.type)
    enc = pb.ArrayEncoding()
    enc.dictionary.indices.nullable.no_nulls.values.CopyFrom(_flat(8, out.add(codes.astype(np.uint8))))
    enc.dictionary.items.CopyFrom(_binary(items, out))
    enc.dictionary.num_dictionary_items = len(items)
    return enc


def _arrow_dictionary(arr: pa.Array, out: PageBuffers) -> Any:
    items = arr.dictionary
    indices = arr.indices
    if len(indices) and indices.null_count == len(indices):
        # an all-null page becomes one null item with every key 0, as the real writer does
        items = pa.nulls(1, type=items.type)
        indices = pa.array(np.zeros(len(indices), dtype=indices.type.to_pandas_dtype()), type=indices.type)
    elif indices.null_count:
        null_items = np.flatnonzero(np.asarray(items.is_null()))
        if null_items.size:
            target = int(null_items[0])
        else:
            target = len(items)
            items = pa.concat_arrays([items, pa.nulls(1, type=items.type)])
        indices = indices.fill_null(pa.scalar(target, type=indices.type))
    enc = pb.ArrayEncoding()
    enc.dictionary.indices.nullable.no_nulls.values.CopyFrom(_fixed_values(indices, out))
    enc.dictionary.items.CopyFrom(encode_array(items, out, allow_dict=False))
    enc.dictionary.num_dictionary_items = len(items)
    return enc


def _packed_struct(arr: pa.Array, out: PageBuffers) -> Any:
    typ = arr.type
    n = len(arr)
    columns = []
    enc = pb.ArrayEncoding()
    children = arr.flatten()  # offset-adjusted children (a packed struct has no nulls)
    for i in range(typ.num_fields):
        child = children[i]
        ctype = child.type
        if pa.types.is_fixed_size_list(ctype):
            values = child.values.slice(child.offset * ctype.list_size, n * ctype.list_size)
            width = fixed_width(ctype.value_type)
            data = values.buffers()[1]
            start, count = values.offset, n * ctype.list_size
        else:
            width = fixed_width(ctype)
            data = child.buffers()[1]
            start, count = child.offset, n
        if width is None or data is None:
            raise UnsupportedTypeError(
                f"packed struct child {typ.field(i).name!r} of type {ctype} is not fixed-width"
            )
        raw = np.frombuffer(data, dtype=np.uint8)[start * width : (start + count) * width]
        columns.append(raw.reshape(n, width * (ctype.list_size if pa.types.is_fixed_size_list(ctype) else 1)))
        inner = enc.packed_struct.inner.add()
        values = _flat(width * 8, 0)
        if pa.types.is_fixed_size_list(ctype):
            fsl = pb.ArrayEncoding()
            fsl.fixed_size_list.dimension = ctype.list_size
            fsl.fixed_size_list.items.nullable.no_nulls.values.CopyFrom(values)
            values = fsl
        inner.nullable.no_nulls.values.CopyFrom(values)
    packed = np.hstack(columns) if columns else np.empty((n, 0), np.uint8)
    enc.packed_struct.buffer.buffer_index = out.add(np.ascontiguousarray(packed).reshape(-1))
    return enc


def encode_array(
    arr: pa.Array,
    out: PageBuffers,
    *,
    allow_dict: bool = True,
    packed: bool = False,
    compression: tuple[str, int | None] | None = None,
) -> Any:
    """Encode ``arr`` (one page of one column), appending its buffers to ``out``.

    Args:
        arr: The page's values.
        out: Receives the page buffers.
        allow_dict: Whether a ``string`` page may switch to dictionary encoding.
        packed: Encode a struct as one packed-struct buffer.
        compression: General compression for the bytes of binary-like values.
    """
    typ = arr.type
    if packed:
        if arr.null_count:
            raise UnsupportedTypeError("packed struct columns cannot hold null structs in file version 2.0")
        return _packed_struct(arr, out)
    if pa.types.is_dictionary(typ):
        return _arrow_dictionary(arr, out)
    if is_binary_like(typ):
        if allow_dict and _wants_dictionary(arr):
            return _string_dictionary(arr, out)
        return _binary(arr, out, compression)
    if pa.types.is_null(typ):
        enc = pb.ArrayEncoding()
        enc.nullable.all_nulls.SetInParent()
        return enc
    if pa.types.is_fixed_size_list(typ):
        return _nullable(arr, out, lambda: _fsl_values(arr, out))
    return _nullable(arr, out, lambda: _fixed_values(arr, out))


def list_offsets(arr: pa.Array, out: PageBuffers) -> tuple[Any, int, int]:
    """Offsets page of a (large) list array: ``(encoding, first item, end item)`` into ``arr.values``."""
    large = pa.types.is_large_list(arr.type)
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + n + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    ends = offsets[1:].astype(np.uint64) - np.uint64(first)
    num_items = last - first
    adjustment = num_items + 1
    if arr.null_count:
        valid = np.unpackbits(np.frombuffer(_bits_of(bufs[0], arr.offset, n), np.uint8), bitorder="little")[
            :n
        ]
        ends = ends + np.where(valid.astype(bool), np.uint64(0), np.uint64(adjustment))
    enc = pb.ArrayEncoding()
    enc.list.offsets.nullable.no_nulls.values.CopyFrom(_flat(64, out.add(ends)))
    enc.list.null_offset_adjustment = adjustment
    enc.list.num_items = num_items
    return enc, first, last
