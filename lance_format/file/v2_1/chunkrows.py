"""Single values out of mini-block chunks, for takes: no chunk is decoded whole.

A take of a few rows touches many chunks but wants one or two values of each. Fixed-width values
sit at a computable byte offset of their chunk, and a value of a bit-packed chunk (the 1024-value
"fastlanes" transposed layout, see ``bitpack.py``) lives in one or two known words, so the wanted
values are read directly instead of unpacking every touched chunk (1,024 values per chunk).
A variable-width value (a string) is two offsets and one byte range of its chunk, so only those
are copied, not every offset and byte of the touched chunks.
"""

from __future__ import annotations

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import Block, ChunkSet, Fixed, Fsl, Var, pool_take, range_index
from lance_format.file.v2_1.compression import fsl_chain, kind_of, var_offset_bits

_BLOCK = 1024
#: From this many addresses, aligned words are gathered whole (below, the byte gather costs less).
_WORD_GATHER_MIN = 16


def decode_rows(enc: pb.CompressiveEncoding, cs: ChunkSet, rows: np.ndarray) -> Block | None:
    """The values at ``rows`` (positions among all the chunks' values, any order).

    Returns None for encodings without a direct path (the caller decodes the chunks whole).

    Raises:
        CorruptFileError: a chunk is too small for the values it claims.
    """
    kind = kind_of(enc)
    if len(cs.starts) != 1 or not len(rows):
        return None
    first = np.zeros(len(cs.counts) + 1, np.int64)
    np.cumsum(cs.counts, out=first[1:])
    chunk = np.searchsorted(first, rows, side="right") - 1
    pos = rows - first[chunk]
    if kind == "flat" and not enc.flat.HasField("data") and enc.flat.bits_per_value % 8 == 0:
        bits = int(enc.flat.bits_per_value)
        if not 0 < bits <= 1 << 16:
            return None
        return Fixed(bits, _fixed_values(cs, chunk, pos, bits // 8), len(rows))
    if kind == "fixed_size_list":
        dims, inner = fsl_chain(enc.fixed_size_list)
        if _has_validity(enc.fixed_size_list) or kind_of(inner) != "flat" or inner.flat.HasField("data"):
            return None
        bits = int(inner.flat.bits_per_value)
        dim = int(np.prod(dims))
        if bits % 8 or not 0 < bits * dim <= 1 << 20:
            return None
        vals = _fixed_values(cs, chunk, pos, bits * dim // 8)
        return Fsl(dims, [None] * len(dims), Fixed(bits, vals, len(rows) * dim), len(rows))
    if kind == "inline_bitpacking":
        t = int(enc.inline_bitpacking.uncompressed_bits_per_value)
        if t not in (8, 16, 32, 64):
            return None
        return _bitpacked_values(cs, chunk, pos, t)
    if kind == "variable":
        return _variable_values(cs, chunk, pos, var_offset_bits(enc.variable) // 8)
    return None


def _has_validity(fsl: pb.FixedSizeList) -> bool:
    cur = fsl
    while not cur.has_validity:
        if kind_of(cur.values) != "fixed_size_list":
            return False
        cur = cur.values.fixed_size_list
    return True


def _words(data: np.ndarray, addr: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes at every address, as one row each (addresses checked by the caller)."""
    if len(addr) >= _WORD_GATHER_MIN and width in (2, 4, 8) and data.flags.c_contiguous:
        # chunk buffers start 8-byte aligned, so the words usually are: then one gather of whole
        # words, not one per byte (~25x faster for 10,000 values)
        q, r = np.divmod(addr, width)
        if not r.any():
            words = data[: data.size - data.size % width].view(f"<u{width}")
            out: np.ndarray = words[q].view(np.uint8).reshape(-1, width)
            return out
    return data[addr[:, None] + np.arange(width, dtype=np.int64)[None, :]]


def _fixed_values(cs: ChunkSet, chunk: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    if (cs.counts * width > cs.sizes[0]).any():
        raise CorruptFileError("flat mini-block chunk is truncated")
    return _words(cs.data, cs.starts[0][chunk] + pos * width, width).reshape(-1)


def _variable_values(cs: ChunkSet, chunk: np.ndarray, pos: np.ndarray, width: int) -> Var:
    """Strings of variable-width chunks: each chunk is ``count + 1`` little-endian offsets from
    the chunk's start, then the bytes (``rust/lance-encoding/src/encodings/physical/binary.rs``)."""
    starts, sizes = cs.starts[0], cs.sizes[0]
    if ((cs.counts + 1) * width > sizes).any():
        raise CorruptFileError("variable chunk is too small for its offsets")
    le = np.dtype(f"<u{width}")
    base = starts[chunk]
    pair = np.ascontiguousarray(_words(cs.data, base + pos * width, 2 * width)).view(le)
    lo, hi = pair[:, 0].astype(np.int64), pair[:, 1].astype(np.int64)
    head = np.ascontiguousarray(_words(cs.data, base, width)).view(le).reshape(-1).astype(np.int64)
    # the value's bytes lie after the chunk's offsets and inside the chunk (as the whole-chunk
    # decoder checks for every value)
    if not ((head >= (cs.counts[chunk] + 1) * width) & (lo >= head) & (hi >= lo) & (hi <= sizes[chunk])).all():
        raise CorruptFileError("variable chunk offsets are out of range")
    lens = hi - lo
    offsets = np.zeros(len(pos) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    idx = range_index(base + lo, lens, offsets)
    return Var(offsets, pool_take(cs.data, idx))


def _bitpacked_values(cs: ChunkSet, chunk: np.ndarray, pos: np.ndarray, t: int) -> Fixed:
    """Values of inline bit-packed chunks: a width word, then 1024 values packed to that width."""
    dtype = bitpack.uint_dtype(t)
    wb = dtype.itemsize
    starts, sizes = cs.starts[0], cs.sizes[0]
    if (cs.counts > _BLOCK).any():
        raise CorruptFileError("inline bit-packed chunk holds more than 1024 values")
    if (sizes < wb).any():
        raise CorruptFileError("inline bit-packed chunk lacks its width word")
    le = np.dtype(dtype).newbyteorder("<")
    widths = np.ascontiguousarray(_words(cs.data, starts, wb)).view(le).reshape(-1).astype(np.int64)
    if (widths > t).any():
        raise CorruptFileError(f"inline bit width exceeds {t}")
    if (sizes < wb + widths * (_BLOCK // 8)).any():
        raise CorruptFileError("inline bit-packed chunk is truncated")
    out = np.zeros(len(pos), dtype)
    row_width = widths[chunk]
    lanes = _BLOCK // t
    for w_np in distinct(row_width):
        width = int(w_np)
        if width == 0:
            continue  # width-0 chunks hold zeros
        sel = np.flatnonzero(row_width == width)
        word, shift, _spill, _back = bitpack.gather_table(width, t)
        j = pos[sel]
        base = starts[chunk[sel]] + wb
        w0 = word[j]
        sh = shift[j]
        lo = np.ascontiguousarray(_words(cs.data, base + w0 * wb, wb)).view(le).reshape(-1)
        vals = lo >> sh.astype(dtype)
        spills = np.flatnonzero(sh + width > t)
        if spills.size:  # the value's high bits continue in the same lane's next word
            hi_addr = base[spills] + (w0[spills] + lanes) * wb
            hi = np.ascontiguousarray(_words(cs.data, hi_addr, wb)).view(le).reshape(-1)
            vals[spills] |= hi << (t - sh[spills]).astype(dtype)
        if width < t:
            vals &= dtype.type((1 << width) - 1)
        out[sel] = vals
    return Fixed(t, out.view(np.uint8), len(pos))


__all__ = ["decode_rows"]
