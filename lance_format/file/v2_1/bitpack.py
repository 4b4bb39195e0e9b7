"""FastLanes bit-packing (the layout of lance's `bitpacking` crate), vectorized with numpy.

A block holds 1024 values of a ``T``-bit unsigned type packed to ``W`` bits each.  The block is
viewed as ``1024 / T`` lanes; lane ``l`` holds the ``T`` values at indices
``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l`` for rows ``r = 0..T-1``, concatenated LSB-first
into ``W`` words of ``T`` bits.  Word ``w`` of lane ``l`` is stored at ``packed[w * LANES + l]``.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from lance_format.arrays import pool_empty
from lance_format.errors import CorruptFileError

FL_ORDER = np.array([0, 4, 2, 6, 1, 5, 3, 7], dtype=np.int64)
BLOCK = 1024

_DTYPES: dict[int, np.dtype[Any]] = {
    8: np.dtype(np.uint8),
    16: np.dtype(np.uint16),
    32: np.dtype(np.uint32),
    64: np.dtype(np.uint64),
}


def uint_dtype(bits: int) -> np.dtype[Any]:
    """The unsigned numpy dtype with ``bits`` bits (8/16/32/64)."""
    try:
        return _DTYPES[bits]
    except KeyError:
        raise CorruptFileError(f"unsupported bit-packing word size {bits}") from None


def _block_perm(t: int) -> np.ndarray:
    """Order of the ``t / 8`` row groups inside each 128-value span of a FastLanes block."""
    lanes = BLOCK // t
    return (FL_ORDER[: t // 8] * 16) // lanes


def _rows_to_values(rows: np.ndarray, t: int) -> np.ndarray:
    """(n, T, lanes) row-major lane values -> (n, 1024) logical order.

    Value ``FL_ORDER[g] * 16 + s * 128 + lane`` sits at row ``8 * g + s``: with ``q`` the rank of
    ``g`` inside a 128-value span, the output is ``[s][q][lane]`` = ``rows[g][s][lane]``.
    """
    n = rows.shape[0]
    lanes = BLOCK // t
    grouped = rows.reshape(n, t // 8, 8, lanes)
    inv = np.argsort(_block_perm(t))
    return np.ascontiguousarray(grouped[:, inv].transpose(0, 2, 1, 3)).reshape(n, BLOCK)


def _values_to_rows(values: np.ndarray, t: int) -> np.ndarray:
    n = values.shape[0]
    lanes = BLOCK // t
    spans = values.reshape(n, 8, t // 8, lanes).transpose(0, 2, 1, 3)  # [q][s][lane]
    return np.ascontiguousarray(spans[:, _block_perm(t)]).reshape(n, t, lanes)


def unpack_blocks(packed: np.ndarray, width: int, t: int, out: np.ndarray | None = None) -> np.ndarray:
    """Unpack ``n`` consecutive blocks of ``1024*width/t`` words each into ``n*1024`` values.

    Args:
        packed: 1-D array of dtype uint{t}; its length must be a multiple of ``1024*width/t``.
        width: packed bit width (1..t; 0 needs no words and yields no blocks).
        t: bit width of the unpacked type.
        out: Where to write the values (C-contiguous uint{t}, ``n * 1024`` long) instead of a new
            array: a caller filling one output from runs of blocks saves a copy per run.

    Returns:
        1-D uint{t} array of ``n * 1024`` values in logical order (``out`` when given).
    """
    dtype = uint_dtype(t)
    if not 0 <= width <= t:
        raise CorruptFileError(f"bit width {width} out of range for {t}-bit values")
    words_per_block = BLOCK * width // t
    if width == 0:
        n = 0 if words_per_block == 0 else len(packed) // words_per_block
        return np.zeros(n * BLOCK, dtype)
    if len(packed) % words_per_block:
        raise CorruptFileError("bit-packed buffer is not a whole number of blocks")
    n = len(packed) // words_per_block
    if out is not None and (out.dtype != dtype or out.shape != (n * BLOCK,) or not out.flags.c_contiguous):
        raise ValueError(f"unpack_blocks: out must be a contiguous uint{t} array of {n * BLOCK} values")
    if n == 1 and width < t:  # one block: a table-driven gather (fewest calls of all)
        vals = _unpack_gather(packed.astype(dtype, copy=False), n, width, t)
        if out is None:
            return vals
        out[:] = vals
        return out
    flat = pool_empty(n * BLOCK, dtype) if out is None else out
    if n <= _TAKE_MAX_BLOCKS[t]:
        _unpack_take(packed.astype(dtype, copy=False), n, width, t, flat)
    elif _rows_first(n):
        _unpack_rows_first(packed.astype(dtype, copy=False), n, width, t, flat)
    else:
        _unpack_groups(packed.astype(dtype, copy=False), n, width, t, flat)
    return flat


#: Up to this many blocks, :func:`_unpack_take` unpacks every bit row at once (a handful of numpy
#: calls in all; beyond, its temporaries outgrow the caches and the row loops below win). Measured
#: on 1..500 blocks of widths 1..t/2: 2-5x faster than the loops below these sizes.
_TAKE_MAX_BLOCKS = {8: 48, 16: 64, 32: 96, 64: 64}


@functools.lru_cache(maxsize=256)
def _take_table(width: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """For each bit row in output order (``[s][q]``, see :func:`_rows_to_values`): its first
    word, shift, next word and the left shift that brings that word's bits in (a shift of at least
    ``width`` where the row does not spill: those bits are masked off), and whether any row spills."""
    dtype = uint_dtype(t)
    r = np.arange(t, dtype=np.int64)
    w0, sh = np.divmod(r * width, t)
    spill = sh + width > t
    w1 = np.minimum(w0 + 1, width - 1)
    back = np.where(spill, t - sh, t - 1)
    order = (8 * np.argsort(_block_perm(t))[None, :] + np.arange(8)[:, None]).reshape(-1)
    return w0[order], sh[order].astype(dtype), w1[order], back[order].astype(dtype), bool(spill.any())


def _unpack_take(p1: np.ndarray, n: int, width: int, t: int, flat: np.ndarray) -> None:
    """Unpack every bit row of every block and lane at once: each row's word taken straight into
    its place in the output (rows in output order, so no reordering copy), then shifted, joined
    with the next word where values spill into it, and masked."""
    dtype = p1.dtype
    p = p1.reshape(n, width, BLOCK // t)
    w0, sh, w1, back, spills = _take_table(width, t)
    out = flat.reshape(n, t, BLOCK // t)
    np.take(p, w0, axis=1, out=out, mode="clip")  # "raise" would buffer the output
    out >>= sh[None, :, None]
    if spills:
        hi = np.take(p, w1, axis=1, mode="clip")
        hi <<= back[None, :, None]
        out |= hi
    if width < t:
        out &= dtype.type((1 << width) - 1)


#: From this many blocks on, unpack bit row by bit row over whole arrays (fewer bytes moved per
#: step, more numpy calls: 2-4 per bit row, which the group loop's 5 per 8 rows beat on short
#: pages). Measured on 16..1024 blocks of 16/32/64-bit values, widths 1..t.
_ROWS_FIRST_BLOCKS = 64


def _rows_first(n: int) -> bool:
    """Whether :func:`_unpack_rows_first` beats :func:`_unpack_groups` for ``n`` blocks."""
    return n >= _ROWS_FIRST_BLOCKS


def _unpack_groups(p1: np.ndarray, n: int, width: int, t: int, flat: np.ndarray) -> None:
    """Unpack by row groups: 8 bit rows of every block and lane per vectorized step."""
    dtype = p1.dtype
    lanes = BLOCK // t
    p = p1.reshape(n, width, lanes)
    # rows r = 8 * g + s (s = 0..7) of every lane go straight to their logical places
    # [s][perm[g]][lane], one strided slice per row group g (no row-major intermediate): a few
    # vectorized steps per 8 bit rows, over all blocks and lanes (a step per row costs ~1.5x
    # more, in per-call overhead).  The output comes from Arrow's pool, which reuses freed
    # memory (fresh numpy pages fault in).
    grid = flat.reshape(n, 8, t // 8, lanes)
    mask = dtype.type((1 << width) - 1) if width < t else None
    rows = _ROW_WORDS.get((width, t)) or _row_words(width, t)
    for (w0, sh), q in zip(rows, _block_perm(t).tolist(), strict=True):
        vals = p[:, w0, :]  # (n, 8, lanes): the first word of each of the 8 rows
        vals >>= sh[None, :, None]
        spill = np.flatnonzero(sh.astype(np.int64) + width > t)
        if spill.size:  # high bits continue in the lane's next word
            vals[:, spill, :] |= p[:, w0[spill] + 1, :] << (t - sh[spill])[None, :, None]
        if mask is not None:
            vals &= mask
        grid[:, :, q, :] = vals


def _scratch(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An uninitialized C-contiguous array from Arrow's memory pool."""
    count = int(np.prod(shape))
    return pool_empty(count, dtype).reshape(shape)


def _narrow_bits(width: int, t: int) -> int:
    """The word size :func:`_unpack_rows_first` computes in for ``width``-bit values of ``t`` bits.

    The narrowest of 8/16/32/64 bits wider than ``width`` (a whole-word width turned the row steps
    into copies, slower than the shifts they save); 16-bit values stay 16-bit (8-bit words
    measured slower there).  Narrow words only make sense on little-endian hosts.
    """
    if t <= 16 or sys.byteorder != "little":
        return t
    return next(b for b in (8, 16, 32, 64) if b > width or b == t)


def _unpack_rows_first(p1: np.ndarray, n: int, width: int, t: int, flat: np.ndarray) -> None:
    """Unpack one bit row at a time over contiguous arrays, then reorder once.

    The words go word-major (``[w][block][lane]``, one transposing copy), so each bit row of
    every block and lane is one contiguous shift/OR/mask without strides; the rows land in
    ``[q][s][block][lane]`` order and a single transposing (and widening) copy puts them in
    logical order.  A lane's words form one little-endian bit stream, so the stream is read in
    the narrowest of 8/16/32/64-bit words that holds ``width`` bits: less memory per row step.
    """
    lanes = BLOCK // t
    c = _narrow_bits(width, t)
    k = t // c  # narrow words per packed word, least significant first
    dtype = uint_dtype(c)
    # narrow word j of a lane is part j % k of its packed word j // k
    # scratch from Arrow's pool, which keeps freed pages: fresh numpy arrays this size are
    # mapped anew per call and fault in page by page (~2x the unpacking in a scan)
    pt = _scratch((width, k, n, lanes), dtype)
    pt[...] = p1.view(dtype).reshape(n, width, lanes, k).transpose(1, 3, 0, 2)
    rows = _scratch((t // 8, 8, n, lanes), dtype)
    tmp = _scratch((n, lanes), dtype)
    mask = dtype.type((1 << width) - 1)
    perm = _block_perm(t).tolist()
    for r in range(t):
        j, sh = divmod(r * width, c)
        dst = rows[perm[r // 8], r % 8]
        src = pt[j // k, j % k]
        if sh + width > c:  # high bits continue in the lane's next word
            np.right_shift(src, dtype.type(sh), out=dst)
            np.left_shift(pt[(j + 1) // k, (j + 1) % k], dtype.type(c - sh), out=tmp)
            dst |= tmp
            dst &= mask
        elif sh:
            np.right_shift(src, dtype.type(sh), out=dst)
            if sh + width < c:  # the row ending a word needs no mask
                dst &= mask
        elif width < c:
            np.bitwise_and(src, mask, out=dst)
        else:
            dst[...] = src
    flat.reshape(n, 8, t // 8, lanes)[...] = rows.transpose(2, 1, 0, 3)


#: Up to this many blocks, pack without the per-row loop: that loop costs a few numpy calls per
#: bit row (~0.3 ms for 64-bit values), which dominates small pages.
_SMALL_BLOCKS = 4


_ROW_WORDS: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}


def _row_words(width: int, t: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per row group of 8 bit rows: each row's first packed word and its shift (cached)."""
    dtype = uint_dtype(t)
    out = []
    for g in range(t // 8):
        w0, sh = np.divmod(np.arange(8 * g, 8 * g + 8, dtype=np.int64) * width, t)
        out.append((w0, sh.astype(dtype)))
    _ROW_WORDS[(width, t)] = out  # at most 4 * 64 small entries: (width, t) pairs
    return out


# Process-wide on purpose (not in a Session): the key domain is (width <= t, t in 8/16/32/64),
# at most 256 cached tables of <= 32 KiB each (8 MiB worst case), whatever data is read.
@functools.lru_cache(maxsize=256)
def _gather_table(width: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per logical value of one block: first word, shift, and (where it spills) the next word."""
    lanes = BLOCK // t
    rows = np.arange(t)
    lane = np.arange(lanes)
    logical = (FL_ORDER[rows // 8] * 16 + (rows % 8) * 128)[:, None] + lane[None, :]
    w0, sh = np.divmod(rows * width, t)
    word = np.empty(BLOCK, np.int64)
    shift = np.empty(BLOCK, np.int64)
    word[logical.ravel()] = (w0[:, None] * lanes + lane[None, :]).ravel()
    shift[logical.ravel()] = np.repeat(sh, lanes)
    spill = np.flatnonzero(shift + width > t)
    return word, shift, spill, t - shift[spill]


def gather_table(width: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each of a block's 1024 logical positions: its first word and shift (the value's
    high bits, where ``shift + width > t``, continue in word ``first + 1024 // t``), then the
    spilling positions and their back shifts. Lets a take read single values of a block."""
    return _gather_table(width, t)


@functools.lru_cache(maxsize=256)
def _gather_consts(width: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_gather_table` ready for :func:`_unpack_gather`: shifts in the value dtype, and each
    spilling position's next word (same key domain and bound as :func:`_gather_table`)."""
    dtype = uint_dtype(t)
    word, shift, spill, back = _gather_table(width, t)
    return word, shift.astype(dtype), spill, word[spill] + BLOCK // t, back.astype(dtype)


def _unpack_gather(packed: np.ndarray, n: int, width: int, t: int) -> np.ndarray:
    dtype = packed.dtype
    word, shift, spill, spill_word, back = _gather_consts(width, t)
    if n == 1:
        out: np.ndarray = packed[word]
        out >>= shift
        if spill.size:
            out[spill] |= packed[spill_word] << back
    else:
        # (n, 1024): each block's table broadcast over the blocks (no tiled per-call copies)
        base = (np.arange(n, dtype=np.int64) * (BLOCK * width // t))[:, None]
        out = packed[base + word]
        out >>= shift
        if spill.size:
            out[:, spill] |= packed[base + spill_word] << back
    out &= dtype.type((1 << width) - 1)
    return out.reshape(-1)


def pack_blocks(values: np.ndarray, width: int, t: int) -> np.ndarray:
    """Pack ``n*1024`` values (uint{t}) to ``width`` bits each; inverse of :func:`unpack_blocks`."""
    dtype = uint_dtype(t)
    if len(values) % BLOCK:
        raise ValueError("pack_blocks needs a multiple of 1024 values")
    n = len(values) // BLOCK
    if width == 0:
        return np.zeros(0, dtype)
    if width < t and n > _SMALL_BLOCKS:
        return _pack_rows_outer(values.astype(dtype, copy=False), n, width, t)
    v = _values_to_rows(values.astype(dtype, copy=False).reshape(n, BLOCK), t)
    if width == t:
        return v.reshape(-1)
    v = v & dtype.type((1 << width) - 1)
    return _pack_reduce(v, width, t)


def _pack_rows_outer(values: np.ndarray, n: int, width: int, t: int) -> np.ndarray:
    """:func:`pack_blocks` for many blocks: bit row ``r`` of every block and lane is one contiguous
    array, so each step is a flat shift-and-OR without temporaries (about 1.6x the strided loop)."""
    dtype = values.dtype
    lanes = BLOCK // t
    # [block][s][q][lane] -> [g][s][block][lane] with row r = 8 * g + s (q = perm[g])
    spans = values.reshape(n, 8, t // 8, lanes).transpose(2, 1, 0, 3)
    rows = np.ascontiguousarray(spans[_block_perm(t)]).reshape(t, n * lanes)
    rows &= dtype.type((1 << width) - 1)
    out = np.zeros((width, n * lanes), dtype)
    tmp = np.empty(n * lanes, dtype)
    for r in range(t):
        w0, sh = divmod(r * width, t)
        if sh:
            np.left_shift(rows[r], dtype.type(sh), out=tmp)
            out[w0] |= tmp
        else:
            out[w0] |= rows[r]
        if sh + width > t:
            np.right_shift(rows[r], dtype.type(t - sh), out=tmp)
            out[w0 + 1] |= tmp
    packed: np.ndarray = np.ascontiguousarray(out.reshape(width, n, lanes).transpose(1, 0, 2)).reshape(-1)
    return packed


@functools.lru_cache(maxsize=256)
def _pack_table(width: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per bit row: its shift, the first row of every word, and the rows spilling into the next word."""
    w0, sh = np.divmod(np.arange(t) * width, t)
    starts = np.flatnonzero(np.diff(w0, prepend=-1))  # every word 0..width-1 starts at some row
    spill = np.flatnonzero(sh + width > t)
    return sh, starts, spill, w0[spill] + 1, t - sh[spill]


def _pack_reduce(v: np.ndarray, width: int, t: int) -> np.ndarray:
    # Small inputs: all rows shifted at once, then the rows of each word OR-ed together with one
    # reduceat; the high bits of the (at most one per word) spilling row go into the next word.
    dtype = v.dtype
    sh, starts, spill, spill_word, back = _pack_table(width, t)
    shifted = v << sh.astype(dtype)[None, :, None]
    out: np.ndarray = np.bitwise_or.reduceat(shifted, starts, axis=1)
    if spill.size:
        out[:, spill_word, :] |= v[:, spill, :] >> back.astype(dtype)[None, :, None]
    return out.reshape(-1)


def bit_widths(values: np.ndarray, t: int) -> np.ndarray:
    """Bits needed per 1024-value block (the last block may be partial)."""
    dtype = uint_dtype(t)
    v = values.astype(dtype, copy=False)
    n = len(v)
    nblocks = (n + BLOCK - 1) // BLOCK
    full = n // BLOCK
    mx = np.zeros(nblocks, dtype)
    if full:  # whole blocks straight from the input (no padded copy)
        np.max(v[: full * BLOCK].reshape(full, BLOCK), axis=1, out=mx[:full])
    if full < nblocks:
        mx[full] = v[full * BLOCK :].max()
    widths = np.zeros(nblocks, np.int64)
    nz = mx > 0
    if nz.any():
        # bit_length of max; float log2 is exact enough after splitting into 32-bit halves
        m = mx[nz].astype(np.uint64)
        hi = (m >> np.uint64(32)).astype(np.float64)
        lo = (m & np.uint64(0xFFFFFFFF)).astype(np.float64)
        bl = np.where(
            hi > 0, np.floor(np.log2(np.maximum(hi, 1))) + 33, np.floor(np.log2(np.maximum(lo, 1))) + 1
        )
        widths[nz] = bl.astype(np.int64)
    return widths
