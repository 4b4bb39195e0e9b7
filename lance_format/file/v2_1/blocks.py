"""Decoded data blocks: the in-memory shapes compressive encodings decode into."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import pool_empty


@dataclass
class Fixed:
    """``n`` fixed-width values of ``bits`` bits each, packed LSB-first in ``data`` (uint8)."""

    bits: int
    data: np.ndarray
    n: int


@dataclass
class Var:
    """``len(offsets) - 1`` variable-width values; ``offsets`` are int64 into ``data`` (uint8)."""

    offsets: np.ndarray
    data: np.ndarray

    @property
    def n(self) -> int:
        return len(self.offsets) - 1


@dataclass
class Fsl:
    """Fixed-size lists of fixed-width items; ``validity[i]`` (or None) is the item validity of layer i."""

    dims: list[int]
    validity: list[np.ndarray | None]
    items: Fixed
    n: int


@dataclass
class PackedStruct:
    """Row-major packed struct of fixed-width children (bits per child)."""

    bits: list[int]
    data: np.ndarray
    n: int


@dataclass
class VarPackedStruct:
    """Row-major struct with variable-width children, unzipped into one block per child."""

    children: list[Block]
    n: int


@dataclass
class BlobRefs:
    """Blob descriptions: absolute file ``positions`` and ``sizes`` of each row's bytes."""

    positions: np.ndarray
    sizes: np.ndarray
    n: int


@dataclass
class Constant:
    """``n`` copies of one value (``value`` raw bytes) or ``n`` nulls (``value`` is None)."""

    value: bytes | None
    n: int


Block = Fixed | Var | Fsl | PackedStruct | VarPackedStruct | BlobRefs | Constant


@dataclass
class Chunk:
    """The value buffers of one mini-block chunk and the number of values it holds."""

    buffers: list[np.ndarray]
    n: int
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class ChunkSet:
    """All chunks of a mini-block page: value buffer ``b`` of chunk ``i`` is
    ``data[starts[b][i] : starts[b][i] + sizes[b][i]]``; chunk ``i`` holds ``counts[i]`` values."""

    data: np.ndarray
    starts: list[np.ndarray]
    sizes: list[np.ndarray]
    counts: np.ndarray

    def chunks(self) -> list[Chunk]:
        """Materialize per-chunk buffer views (for the generic decoders)."""
        st = [s.tolist() for s in self.starts]
        sz = [s.tolist() for s in self.sizes]
        d = self.data
        return [
            Chunk([d[st[b][i] : st[b][i] + sz[b][i]] for b in range(len(st))], c)
            for i, c in enumerate(self.counts.tolist())
        ]

    def slices(self, b: int, nbytes: np.ndarray | None = None, skip: int = 0) -> list[np.ndarray]:
        """Views of buffer ``b`` of every chunk, from byte ``skip``, ``nbytes`` long (default: all)."""
        st = (self.starts[b] + skip).tolist()
        ln = (self.sizes[b] - skip if nbytes is None else nbytes).tolist()
        d = self.data
        return [d[s : s + n] for s, n in zip(st, ln, strict=False)]


def pool_take(a: np.ndarray, idx: np.ndarray, dtype: np.dtype | type | None = None) -> np.ndarray:
    """``a[idx].astype(dtype)`` (1-D) with both the gather and the cast in pool memory.

    Raises:
        IndexError: an index lies outside ``a`` (as fancy indexing would).
    """
    n = len(idx)
    if n and (int(idx.min()) < 0 or int(idx.max()) >= len(a)):
        raise IndexError("index out of range of the gathered array")
    got = pool_empty(n, a.dtype)
    np.take(a, idx, out=got, mode="clip")  # "raise" would buffer the output (a numpy temporary)
    if dtype is None or np.dtype(dtype) == a.dtype:
        return got
    out = pool_empty(n, dtype)
    np.copyto(out, got, casting="unsafe")
    return out


def range_index(starts: np.ndarray, lens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Positions ``starts[i] .. starts[i] + lens[i] - 1`` for all ``i`` back to back (int64, in
    pool memory): ``np.repeat(starts - offsets[:-1], lens) + arange`` without numpy temporaries
    of the output's size. ``offsets`` is the cumulative sum of ``lens`` with a leading 0."""
    total = int(offsets[-1])
    idx = pool_empty(total, np.int64)
    if total == 0:
        return idx
    nz = lens > 0
    s, o, ln = starts[nz], offsets[:-1][nz], lens[nz]
    idx.fill(1)  # +1 inside a range; at each range's first position, the jump from the last one
    idx[o[1:]] = s[1:] - (s[:-1] + ln[:-1]) + 1
    idx[0] = s[0]
    np.cumsum(idx, out=idx)
    return idx


def gather_ranges(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``data[starts[i] : starts[i] + lengths[i]]`` for all ``i``, concatenated (read-only result).

    Ascending, non-overlapping ranges (chunks of a page) are copied by one Arrow ``take`` over a
    binary array whose values alternate range / gap: one C++ call instead of a numpy slice and
    concatenation step per chunk (pages hold thousands of chunks).
    """
    st = np.asarray(starts, np.int64)
    ln = np.asarray(lengths, np.int64)
    n = len(st)
    if n == 0:
        return np.zeros(0, np.uint8)
    ends = st + ln
    if (
        int(ln.min()) < 0
        or int(st[0]) < 0
        or int(ends.max()) > len(data)
        or (n > 1 and bool((st[1:] < ends[:-1]).any()))
        or not data.flags.c_contiguous
    ):
        parts = [data[a:b] for a, b in zip(st.tolist(), ends.tolist(), strict=True)]
        return np.concatenate(parts)
    total = int(ln.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    if n > 1:
        # ranges that continue one another are one run: copied as such (one view when all are)
        joins = st[1:] == ends[:-1]
        if joins.any():
            head = np.ones(n, bool)
            head[1:] = ~joins
            tail = np.ones(n, bool)
            tail[:-1] = ~joins
            st, ends = st[head], ends[tail]
            ln = ends - st
            n = len(st)
    if n == 1:
        view = data[int(st[0]) : int(ends[0])]
        view.flags.writeable = False
        return view
    if n == 2:
        both = np.concatenate([data[a:b] for a, b in zip(st.tolist(), ends.tolist(), strict=True)])
        both.flags.writeable = False
        return both
    if n > 2:
        strided = _gather_strided(data, st, ln, total)
        if strided is not None:
            return strided
    large = int(ends[-1]) >= 1 << 31
    bounds = pool_empty(2 * n, np.int64 if large else np.int32)  # Arrow's offsets, built in place
    bounds[0::2] = st
    bounds[1::2] = ends
    typ = pa.large_binary() if large else pa.binary()
    ob = pa.py_buffer(bounds)
    arr = pa.Array.from_buffers(typ, 2 * n - 1, [None, ob, pa.py_buffer(data)])
    # the indices from a buffer: pa.array(ndarray) would import pandas (~0.3 s) on a first read
    idx = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.arange(0, 2 * n, 2, dtype=np.int32))])
    taken = pc.take(arr, idx)
    return np.frombuffer(taken.buffers()[2], np.uint8, total)


def _gather_strided(
    data: np.ndarray, st: np.ndarray, ln: np.ndarray, total: int, out: np.ndarray | None = None
) -> np.ndarray | None:
    """Equal ranges at equal distances (the full chunks of a fixed-width page), copied as one
    strided 2-D block (about twice as fast as the general path); the last range may be shorter.

    Returns None when the ranges are not like that. Callers checked the ranges lie in ``data``.
    ``out``: write there (``total`` bytes) instead of a new buffer.
    """
    n = len(st)
    size = int(ln[0])
    step = int(st[1] - st[0])
    if size <= 0 or step < size or int(ln[-1]) > size:
        return None
    body = n - 1 if int(ln[-1]) != size else n
    if not (bool((ln[:body] == size).all()) and bool((st[1:] - st[:-1] == step).all())):
        return None
    fresh = out is None
    if out is None:
        out = pool_empty(total, np.uint8)
    first = int(st[0])
    if data.flags.c_contiguous and data.dtype == np.uint8:  # a direct view (as_strided: ~20 us)
        src = np.ndarray((body, size), np.uint8, data, first, (step, 1))
    else:  # a strided source: its own element stride (not 1 byte)
        unit = data.strides[0]
        src = np.lib.stride_tricks.as_strided(data[first:], shape=(body, size), strides=(step * unit, unit))
    out[: body * size].reshape(body, size)[...] = src
    if body < n:
        last = int(st[-1])
        out[body * size :] = data[last : last + int(ln[-1])]
    if fresh:
        out.flags.writeable = False
    return out


def gather_into(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """Write ``data[starts[i] : starts[i] + lengths[i]]`` for all ``i`` back to back into ``out``.

    For ascending, non-overlapping ranges inside ``data`` whose lengths sum to ``len(out)``
    (callers check). The first range may be trimmed at its front and the last at its end (a row
    range starting and ending inside chunks): the evenly spaced ones between go as one strided copy.
    """
    n = len(starts)
    if n == 0:
        return
    first = int(lengths[0])
    s0 = int(starts[0])
    out[:first] = data[s0 : s0 + first]
    if n == 1:
        return
    rest_st, rest_ln = starts[1:], lengths[1:]
    total = len(out) - first
    if n < 4 or _gather_strided(data, rest_st, rest_ln, total, out[first:]) is None:
        out[first:] = gather_ranges(data, rest_st, rest_ln)


def fixed_to_uint(block: Fixed) -> np.ndarray:
    """View a byte-aligned fixed block of 8/16/32/64 bits as an unsigned numpy array."""
    dt = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[block.bits]
    nbytes = block.n * block.bits // 8
    return np.ascontiguousarray(block.data[:nbytes]).view(dt)


def take_var(block: Var, rows: np.ndarray) -> Var:
    """The values at ``rows`` of a variable-width block."""
    starts = block.offsets[rows]
    lens = block.offsets[rows + 1] - starts
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    idx = range_index(starts, lens, offsets)
    return Var(offsets, pool_take(block.data, idx))


def take_block(block: Block, rows: np.ndarray) -> Block:
    """The values at ``rows`` (int64 positions) of any decoded block."""
    if isinstance(block, Var):
        return take_var(block, rows)
    if isinstance(block, Constant):
        return Constant(block.value, len(rows))
    if isinstance(block, Fixed):
        if block.bits % 8 == 0:
            width = block.bits // 8
            mat = np.ascontiguousarray(block.data[: block.n * width]).reshape(block.n, width)
            return Fixed(block.bits, mat[rows].reshape(-1), len(rows))
        bits = np.unpackbits(block.data, bitorder="little", count=block.n * block.bits).reshape(
            block.n, block.bits
        )
        return Fixed(block.bits, np.packbits(bits[rows].reshape(-1), bitorder="little"), len(rows))
    if isinstance(block, PackedStruct):
        width = sum(block.bits) // 8
        mat = np.ascontiguousarray(block.data[: block.n * width]).reshape(block.n, width)
        return PackedStruct(block.bits, mat[rows].reshape(-1), len(rows))
    if isinstance(block, Fsl):
        dim = int(np.prod(block.dims))
        item_rows = (rows[:, None] * dim + np.arange(dim)[None, :]).reshape(-1)
        items = take_block(block.items, item_rows)
        assert isinstance(items, Fixed)
        validity: list[np.ndarray | None] = []
        cum = 1
        for d, v in zip(block.dims, block.validity, strict=True):
            cum *= d
            if v is None:
                validity.append(None)
            else:
                validity.append(v.reshape(block.n, cum)[rows].reshape(-1))
        return Fsl(block.dims, validity, items, len(rows))
    raise TypeError(f"cannot take rows of {type(block).__name__}")
