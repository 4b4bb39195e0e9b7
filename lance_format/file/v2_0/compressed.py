"""Less common 2.0 page encodings: general buffer compression, FSST, and the bit-packed variants.

* ``Flat.compression`` (``zstd`` / ``lz4``, set through field metadata
  ``lance-encoding:compression``) compresses a whole buffer: zstd as ``u64`` uncompressed size +
  zstd frame (a bare frame is accepted too), lz4 as ``u32`` uncompressed size + LZ4 block.
* ``Fsst{binary, symbol_table}``: a Binary of FSST-compressed strings.
* ``Bitpacked``: LSB-first bit stream of ``compressed_bits_per_value`` bits, sign-extended if ``signed``.
* ``BitpackedForNonNeg``: FastLanes blocks of 1024 values.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_0.buffers import PageCtx, Sel, fixed_width
from lance_format.file.v2_1.bitpack import unpack_blocks

#: Refuse to inflate a buffer beyond this many times its compressed size (corrupt size prefixes).
_MAX_RATIO = 1 << 14
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def decompress(scheme: str, raw: np.ndarray, where: str) -> np.ndarray:
    """Decompress one whole buffer written with general compression ``scheme``."""
    data = raw.tobytes()
    limit = max(1 << 20, _MAX_RATIO * len(data))
    try:
        if scheme == "zstd":
            if not data:
                return np.empty(0, np.uint8)
            bare = data[:4] == _ZSTD_MAGIC and len(data) >= 5 and not data[4] & 0x10
            if bare:
                out = pa.input_stream(pa.py_buffer(data), compression="zstd").read()
            else:
                (size,) = struct.unpack_from("<Q", data)
                if size > limit:
                    raise CorruptFileError(f"{where}: zstd buffer claims {size} uncompressed bytes")
                out = pa.Codec("zstd").decompress(data[8:], decompressed_size=size).to_pybytes()
        elif scheme == "lz4":
            (size,) = struct.unpack_from("<I", data)
            if size > limit:
                raise CorruptFileError(f"{where}: lz4 buffer claims {size} uncompressed bytes")
            out = pa.Codec("lz4_raw").decompress(data[4:], decompressed_size=size).to_pybytes()
        else:
            raise UnsupportedEncodingError(f"{where}: buffer compression {scheme!r} is not supported")
    except (struct.error, OSError, pa.ArrowException) as exc:
        raise CorruptFileError(f"{where}: cannot decompress {scheme} buffer: {exc}") from exc
    return np.frombuffer(out, dtype=np.uint8)


def compress(scheme: str, data: Any, level: int | None) -> bytes:
    """Compress a buffer the way the real 2.0 writer does (see :func:`decompress`)."""
    raw = memoryview(data).cast("B").tobytes()
    if scheme == "zstd":
        codec = pa.Codec("zstd", compression_level=level) if level is not None else pa.Codec("zstd")
        return struct.pack("<Q", len(raw)) + bytes(codec.compress(raw, asbytes=True))
    if scheme == "lz4":
        return struct.pack("<I", len(raw)) + bytes(pa.Codec("lz4_raw").compress(raw, asbytes=True))
    raise UnsupportedEncodingError(f"buffer compression {scheme!r} is not supported")


def whole_buffer(flat: Any, ctx: PageCtx) -> np.ndarray:
    """A compressed ``Flat`` buffer, decompressed (cached per page)."""
    key = (int(flat.buffer.buffer_type), int(flat.buffer.buffer_index))
    hit = ctx.cache.get(key)
    if hit is None:
        raw = ctx.read(flat.buffer, 0, ctx.buffer_size(flat.buffer))
        hit = decompress(flat.compression.scheme, raw, ctx.where)
        ctx.cache[key] = hit
    return hit


def _span(ctx: PageCtx, buf: Any, sel: Sel, bits: int) -> tuple[np.ndarray, int]:
    """Bytes covering the bits of rows ``[sel.start, sel.stop)`` and the bit offset of row ``start``."""
    first_bit = sel.start * bits
    end_byte = -(-(sel.stop * bits) // 8)
    data = ctx.read(buf, first_bit // 8, end_byte - first_bit // 8)
    return data, first_bit % 8


def decode_bitpacked(bp: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    """Legacy LSB-first bit-packed integers."""
    bits, full = int(bp.compressed_bits_per_value), int(bp.uncompressed_bits_per_value)
    if not (0 < bits <= full <= 64) or full not in (8, 16, 32, 64):
        raise ctx.corrupt(f"bit-packed widths {bits}/{full} are invalid")
    data, shift = _span(ctx, bp.buffer, sel, bits)
    n = sel.stop - sel.start
    stream = (
        np.unpackbits(data, bitorder="little")[shift : shift + n * bits].reshape(n, bits).astype(np.uint64)
    )
    values = (stream << np.arange(bits, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    if bp.signed and bits < 64:
        sign = np.uint64(1) << np.uint64(bits - 1)
        values = (values ^ sign) - sign  # two's-complement sign extension, wrapping in uint64
    out = values.astype(f"<u{full // 8}")
    if sel.rows is not None:
        out = out[sel.rows - sel.start]
    return _as_type(out, typ)


def decode_bitpacked_non_neg(bp: Any, ctx: PageCtx, sel: Sel, typ: pa.DataType) -> pa.Array:
    """FastLanes bit-packed non-negative integers (blocks of 1024 values)."""

    bits, full = int(bp.compressed_bits_per_value), int(bp.uncompressed_bits_per_value)
    if not (0 < bits <= full) or full not in (8, 16, 32, 64):
        raise ctx.corrupt(f"bit-packed widths {bits}/{full} are invalid")
    block_bytes = 1024 * bits // 8
    first, last = sel.start // 1024, (sel.stop - 1) // 1024 + 1
    packed = ctx.read(bp.buffer, first * block_bytes, (last - first) * block_bytes)
    values = unpack_blocks(packed.view(f"<u{full // 8}"), bits, full)
    base = first * 1024
    out = values[sel.start - base : sel.stop - base] if sel.rows is None else values[sel.rows - base]
    return _as_type(np.ascontiguousarray(out), typ)


def _as_type(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    if fixed_width(typ) == values.dtype.itemsize:
        return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)])
    return pa.array(values).cast(typ)


__all__ = [
    "compress",
    "decode_bitpacked",
    "decode_bitpacked_non_neg",
    "decompress",
    "whole_buffer",
]
