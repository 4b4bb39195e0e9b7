"""Whole-page decoding of mini-block values: the common encodings without per-chunk numpy work."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import pool_empty
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import (
    Block,
    ChunkSet,
    Fixed,
    Fsl,
    Var,
    gather_ranges,
    take_block,
)
from lance_format.file.v2_1.chunkrows import decode_rows
from lance_format.file.v2_1.compression import (
    MAX_DECOMPRESSED,
    ZSTD,
    decode_miniblock,
    flat_encoding,
    fsl_chain,
    kind_of,
    var_offset_bits,
)
from lance_format.file.v2_1.fsst import SymbolTable
from lance_format.file.v2_1.fsst import decode as fsst_decode
from lance_format.file.v2_1.fsst import decode_serial as fsst_decode_one
from lance_format.file.workers import num_threads, run_all

_FSST_SPLIT_MIN_BYTES = 4 << 20  # smaller FSST pages are decoded by one thread
_FEW_RANGES = 8  # up to this many ranges are sliced directly (Arrow's take has a fixed setup cost)


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``gather_ranges`` with a cheap path for the few chunks of a small page."""
    n = len(starts)
    if 0 < n <= _FEW_RANGES:
        st = starts.tolist()
        ln = lengths.tolist()
        if min(st) >= 0 and min(ln) >= 0 and max(a + b for a, b in zip(st, ln, strict=True)) <= len(data):
            if n == 1:
                return data[st[0] : st[0] + ln[0]]
            return np.concatenate([data[a : a + b] for a, b in zip(st, ln, strict=True)])
    return gather_ranges(data, starts, lengths)


def decode_chunkset(enc: pb.CompressiveEncoding, cs: ChunkSet, rows: np.ndarray | None = None) -> Block:
    """Decode all chunks of a page; common encodings avoid per-chunk numpy work.

    With ``rows`` (positions among the chunks' values) only those values are returned; FSST then
    decompresses just the selected strings.
    """
    if rows is not None:
        if kind_of(enc) == "fsst" and len(cs.starts) >= 1:
            table = SymbolTable(enc.fsst.symbol_table)
            picked = decode_chunkset(enc.fsst.values, cs, rows)  # the wanted compressed strings
            if not isinstance(picked, Var):
                raise UnsupportedEncodingError("FSST must wrap variable-width data")
            data, offsets = fsst_decode(table, picked.data, picked.offsets)
            return Var(offsets, data)
        if kind_of(enc) == "general" and len(cs.starts) == 1 and enc.general.compression.scheme == ZSTD:
            inflated = _zstd_chunkset(cs)  # the touched chunks at once, then just the wanted values
            if inflated is not None:
                return decode_chunkset(enc.general.values, inflated, rows)
        direct = decode_rows(enc, cs, rows)  # just the wanted values, no chunk decoded whole
        return direct if direct is not None else take_block(decode_chunkset(enc, cs), rows)
    kind = kind_of(enc)
    nb = len(cs.starts)
    total = int(cs.counts.sum())
    if kind == "flat" and nb >= 1 and not enc.flat.HasField("data"):
        bits = int(enc.flat.bits_per_value)
        if bits % 8 == 0 and 0 < bits <= 1 << 16:
            need = cs.counts * (bits // 8)
            if (need > cs.sizes[0]).any():
                raise CorruptFileError("flat mini-block chunk is truncated")
            return Fixed(bits, _gather(cs.data, cs.starts[0], need), total)
    if kind == "fixed_size_list" and nb == 1:
        dims, inner = fsl_chain(enc.fixed_size_list)
        if not _fsl_has_validity(enc.fixed_size_list) and kind_of(inner) == "flat":
            dim = int(np.prod(dims))
            items = decode_chunkset(
                flat_encoding(int(inner.flat.bits_per_value)),
                ChunkSet(cs.data, cs.starts, cs.sizes, cs.counts * dim),
            )
            if isinstance(items, Fixed):
                return Fsl(dims, [None] * len(dims), items, total)
    if kind == "variable" and nb >= 1:
        return _variable_chunkset(cs, var_offset_bits(enc.variable))
    if kind == "fsst" and nb >= 1:
        return _fsst_chunkset(enc, cs)
    if kind == "inline_bitpacking" and nb >= 1:
        return _inline_bitpacked_chunkset(cs, int(enc.inline_bitpacking.uncompressed_bits_per_value))
    if kind == "general" and nb == 1 and enc.general.compression.scheme == ZSTD and len(cs.counts) > 1:
        inflated = _zstd_chunkset(cs)
        if inflated is not None:
            return decode_chunkset(enc.general.values, inflated)
    return decode_miniblock(enc, cs.chunks())


_ZSTD_MAGIC = np.frombuffer(b"\x28\xb5\x2f\xfd", np.uint8)
_ZSTD_HEAD = 26  # u64 size prefix, magic, and the longest frame header up to its content size
_FCS_LEN = np.array([2, 4, 8], np.int64)
_DICT_ID_LEN = np.array([0, 1, 2, 4], np.int64)


def _zstd_chunkset(cs: ChunkSet) -> ChunkSet | None:
    """Inflate every chunk's size-prefixed zstd frame with one call; the result as a new ChunkSet.

    Each chunk buffer is a u64 inflated size and one zstd frame (``compress`` in
    rust/lance-encoding/src/encodings/physical/block.rs). zstd inflates concatenated frames in
    one call, so the frames are joined and inflated at once (per-chunk calls cost ~20x more),
    provided every frame header states the same size as its prefix (RFC 8878, section 3.1.1.1),
    which fixes where each chunk's output starts. Returns None for anything unusual: the
    per-chunk path then decodes (or reports) it chunk by chunk.
    """
    starts, sizes = cs.starts[0], cs.sizes[0]
    n = len(starts)
    if (sizes < 14).any() or int((starts + sizes).max()) > len(cs.data):
        return None
    cols = np.arange(_ZSTD_HEAD, dtype=np.int64)
    idx = np.minimum(starts[:, None] + cols[None, :], len(cs.data) - 1)
    head = cs.data[idx]  # (n, 26) bytes; cells past a chunk's end are never relied on below
    prefix = np.ascontiguousarray(head[:, :8]).view("<u8").reshape(n).astype(np.int64)
    if not (head[:, 8:12] == _ZSTD_MAGIC[None, :]).all():
        return None
    desc = head[:, 12].astype(np.int64)
    fcs_flag, single, dict_flag = desc >> 6, (desc >> 5) & 1, desc & 3
    fcs_len = np.where(fcs_flag == 0, single, _FCS_LEN[np.maximum(fcs_flag - 1, 0)])
    pos = 13 + (1 - single) + _DICT_ID_LEN[dict_flag]
    stated = np.zeros(n, np.int64)
    rows = np.arange(n)
    for k in range(8):  # little-endian content size field, fcs_len bytes (pos + k <= 25)
        byte = head[rows, np.minimum(pos + k, _ZSTD_HEAD - 1)].astype(np.int64)
        stated |= np.where(k < fcs_len, byte << (8 * k), 0)
    stated += np.where(fcs_len == 2, 256, 0)
    if (fcs_len == 0).any() or (pos + fcs_len > sizes).any() or (stated != prefix).any():
        return None
    total = int(prefix.sum())
    if (prefix <= 0).any() or total > MAX_DECOMPRESSED:
        return None
    frames = gather_ranges(cs.data, starts + 8, sizes - 8)
    try:
        out = np.frombuffer(pa.decompress(frames, decompressed_size=total, codec="zstd"), np.uint8)
    except Exception:  # noqa: BLE001 - sizes or frames disagree: let the per-chunk path say where
        return None
    bounds = np.zeros(n, np.int64)
    np.cumsum(prefix[:-1], out=bounds[1:])
    return ChunkSet(out, [bounds], [prefix], cs.counts)


def _fsst_chunkset(enc: pb.CompressiveEncoding, cs: ChunkSet) -> Var:
    """FSST pages; big ones are split by chunks so threads decode offsets and strings together."""
    table = SymbolTable(enc.fsst.symbol_table)
    workers = num_threads()
    nchunks = len(cs.counts)
    small = int(cs.sizes[0].sum()) < _FSST_SPLIT_MIN_BYTES or nchunks < 2 * workers
    if workers < 2 or small or kind_of(enc.fsst.values) != "variable":
        return _fsst_part(enc, table, cs, workers)
    cuts = np.linspace(0, nchunks, workers + 1).astype(np.int64).tolist()
    parts = [
        ChunkSet(cs.data, [x[a:b] for x in cs.starts], [x[a:b] for x in cs.sizes], cs.counts[a:b])
        for a, b in zip(cuts[:-1], cuts[1:], strict=True)
    ]
    results = run_all([partial(_fsst_part, enc, table, part, 1) for part in parts], "fsst")
    data = np.concatenate([r.data for r in results])
    offsets = np.empty(sum(len(r.offsets) - 1 for r in results) + 1, np.int64)
    pos = base = 0
    for r in results:  # one step per piece (2 to 4 of them)
        k = len(r.offsets) - 1
        np.add(r.offsets[:-1], base, out=offsets[pos : pos + k])
        pos += k
        base += int(r.offsets[-1])
    offsets[-1] = base
    return Var(offsets, data)


def _fsst_part(enc: pb.CompressiveEncoding, table: SymbolTable, cs: ChunkSet, workers: int) -> Var:
    inner_block = decode_chunkset(enc.fsst.values, cs)
    if not isinstance(inner_block, Var):
        raise UnsupportedEncodingError("FSST must wrap variable-width data")
    if workers > 1:
        data, offsets = fsst_decode(table, inner_block.data, inner_block.offsets)
    else:
        data, offsets = fsst_decode_one(table, inner_block.data, inner_block.offsets)
    return Var(offsets, data)


def _fsl_has_validity(fsl: pb.FixedSizeList) -> bool:
    cur = fsl
    while True:
        if cur.has_validity:
            return True
        if kind_of(cur.values) != "fixed_size_list":
            return False
        cur = cur.values.fixed_size_list


def _variable_chunkset(cs: ChunkSet, bits: int) -> Var:
    width = bits // 8
    counts = cs.counts
    starts, sizes = cs.starts[0], cs.sizes[0]
    nchunks = len(counts)
    if ((counts + 1) * width > sizes).any():
        raise CorruptFileError("variable chunk is too small for its offsets")
    if nchunks <= _FEW_RANGES:  # small page: a few numpy steps per chunk beat the padded 2-D path
        parts = [
            _variable_one_chunk(cs.data, a, b, c, width)
            for a, b, c in zip(starts.tolist(), sizes.tolist(), counts.tolist(), strict=True)
        ]
        if len(parts) == 1:
            return parts[0]
        offsets = np.empty(sum(len(v.offsets) - 1 for v in parts) + 1, np.int64)
        at = shift = 0
        for v in parts:
            k = len(v.offsets) - 1
            np.add(v.offsets[:-1], shift, out=offsets[at : at + k])
            at += k
            shift += int(v.offsets[-1])
        offsets[-1] = shift
        return Var(offsets, np.concatenate([v.data for v in parts]))
    maxc = int(counts.max())
    if (starts % width).any() or not bool((counts == maxc).all()):
        # unaligned or ragged chunks (FSST text): no padded 2-D copy (as fast, less memory)
        return _variable_gathered(cs.data, starts, sizes, counts, width)
    if int((starts + sizes).max()) > len(cs.data):
        raise CorruptFileError("variable chunk runs past the end of the page")
    # 64-bit offsets are read signed: one past 2**63 turns negative and fails the checks below
    dt = np.dtype("<u4" if bits == 32 else "<i8")
    # one row per chunk (all hold the same number of values): every chunk's offsets copied out
    # back to back in one step, into pooled memory (fresh numpy temporaries of this size fault
    # in page by page, which cost more than the arithmetic)
    local = np.frombuffer(gather_ranges(cs.data, starts, np.full(nchunks, (maxc + 1) * width)), dt)
    local = local.reshape(nchunks, maxc + 1)
    head = local[:, 0].astype(np.int64)
    tail = local[:, maxc].astype(np.int64)
    per = counts + 1
    ok = (head >= per * width) & (tail <= sizes) & (tail >= head)
    if not ok.all():
        raise CorruptFileError("variable chunk offsets are out of range")
    lens = tail - head
    base = np.zeros(nchunks, np.int64)
    np.cumsum(lens[:-1], out=base[1:])
    total = base[-1] + lens[-1]
    offsets = pool_empty(nchunks * maxc + 1, np.int64)
    # each chunk's closing offset is the next one's first: only the first maxc of each are kept
    np.subtract(local[:, :-1], (head - base)[:, None], out=offsets[:-1].reshape(nchunks, maxc))
    offsets[-1] = total
    # each chunk's shifted offsets run from base to base + (tail - head), so one global
    # monotonicity check also proves every chunk's own offsets ascend within its head..tail
    if (offsets[1:] < offsets[:-1]).any():
        raise CorruptFileError("variable chunk offsets are out of range")
    return Var(offsets, _gather(cs.data, starts + head, lens))


def _variable_gathered(
    data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, counts: np.ndarray, width: int
) -> Var:
    """Variable-width chunks at any alignment: every chunk's offsets copied out back to back first.

    Callers checked ``(counts + 1) * width <= sizes`` and that the chunks lie inside ``data``.
    """
    per = counts + 1
    dt = np.dtype("<u4" if width == 4 else "<i8")  # 64-bit: past 2**63 turns negative, fails below
    cols = np.arange(width, dtype=np.int64)[None, :]
    head = np.ascontiguousarray(data[starts[:, None] + cols]).view(dt).reshape(-1).astype(np.int64)
    tail = np.ascontiguousarray(data[(starts + counts * width)[:, None] + cols]).view(dt).reshape(-1)
    tail = tail.astype(np.int64)
    if not ((head >= per * width) & (tail <= sizes) & (tail >= head)).all():
        raise CorruptFileError("variable chunk offsets are out of range")
    lens = tail - head
    base = np.zeros(len(counts), np.int64)
    np.cumsum(lens[:-1], out=base[1:])
    # all but each chunk's closing offset (the next chunk's first repeats it), back to back in
    # fresh Arrow memory (aligned for the view), shifted into one pooled output
    inner = np.frombuffer(gather_ranges(data, starts, counts * width), dt)
    offsets = pool_empty(len(inner) + 1, np.int64)
    np.subtract(inner, np.repeat(head - base, counts), out=offsets[:-1])
    offsets[-1] = int(base[-1] + lens[-1])
    # shifted chunk offsets run from base to base + lens: one global check proves each ascends
    if (offsets[1:] < offsets[:-1]).any():
        raise CorruptFileError("variable chunk offsets are out of range")
    return Var(offsets, gather_ranges(data, starts + head, lens))


def _variable_one_chunk(data: np.ndarray, start: int, size: int, count: int, width: int) -> Var:
    """A page of one variable-width chunk (small string pages): offsets then bytes."""
    # callers checked (count + 1) * width <= size
    if start < 0 or start + size > len(data):
        raise CorruptFileError("variable chunk runs past the end of the page")
    dt = np.dtype(np.uint32 if width == 4 else np.uint64).newbyteorder("<")
    local = np.frombuffer(data[start : start + (count + 1) * width].tobytes(), dt).astype(np.int64)
    head, tail = int(local[0]), int(local[-1])
    if not (head >= (count + 1) * width and head <= tail <= size):
        raise CorruptFileError("variable chunk offsets are out of range")
    offsets = local - head
    if (offsets[1:] < offsets[:-1]).any():
        raise CorruptFileError("variable chunk offsets are out of range")
    return Var(offsets, data[start + head : start + tail])


def _le_words(data: np.ndarray, starts: np.ndarray, w: int) -> np.ndarray:
    """The little-endian ``w``-byte unsigned word at each of ``starts`` (all in bounds)."""
    if len(starts) <= _FEW_RANGES:
        st = starts.tolist()
        if all(s >= 0 and s + w <= len(data) for s in st):
            # a small page: Python ints beat numpy's per-call overhead
            return np.array([int.from_bytes(data[s : s + w].tobytes(), "little") for s in st], np.int64)
    # one gather of every word's bytes, read as little-endian words
    words = data[starts[:, None] + np.arange(w, dtype=np.int64)[None, :]]
    return words.view(np.dtype(f"<u{w}")).reshape(-1).astype(np.int64)


def _few_bitpacked(cs: ChunkSet, t: int, dtype: np.dtype[Any]) -> Fixed | None:
    """Inline bit-packed chunks of a small page that share one bit width (checks in Python ints).

    Returns None when the general path must decide (many chunks, mixed widths, width 0)."""
    w = dtype.itemsize
    n = len(cs.counts)
    if not 0 < n <= _FEW_RANGES:
        return None
    counts, sizes = cs.counts.tolist(), cs.sizes[0].tolist()
    starts = cs.starts[0]
    st = starts.tolist()
    if not all(s >= 0 and s + w <= len(cs.data) for s in st):
        return None
    widths = [int.from_bytes(cs.data[s : s + w].tobytes(), "little") for s in st]
    if max(widths) > t:
        raise CorruptFileError(f"inline bit width exceeds {t}")
    if any(z < w + b * 128 for z, b in zip(sizes, widths, strict=True)):
        raise CorruptFileError("inline bit-packed chunk is truncated")
    width = widths[0]
    if width == 0 or any(b != width for b in widths):
        return None
    words = _gather(cs.data, starts + w, np.full(n, 128 * width, np.int64)).view(dtype)
    out = bitpack.unpack_blocks(words, width, t).reshape(n, 1024)
    total = sum(counts)
    if all(c == 1024 for c in counts[:-1]):
        vals = out.reshape(-1)[:total]
    else:
        vals = out[np.arange(1024)[None, :] < cs.counts[:, None]]
    return Fixed(t, vals.view(np.uint8), total)


def _inline_bitpacked_chunkset(cs: ChunkSet, t: int) -> Fixed:
    dtype = bitpack.uint_dtype(t)
    w = dtype.itemsize
    counts = cs.counts
    starts, sizes = cs.starts[0], cs.sizes[0]
    if (counts > 1024).any():
        raise CorruptFileError("inline bit-packed chunk holds more than 1024 values")
    if (sizes < w).any():
        raise CorruptFileError("inline bit-packed chunk lacks its width word")
    few = _few_bitpacked(cs, t, dtype)
    if few is not None:
        return few
    widths = _le_words(cs.data, starts, w)
    if (widths > t).any():
        raise CorruptFileError(f"inline bit width exceeds {t}")
    if (sizes < w + widths * 128).any():
        raise CorruptFileError("inline bit-packed chunk is truncated")
    d = cs.data
    # the distinct widths, ascending: np.unique's first call imports numpy.ma (~17 ms a process)
    groups = np.flatnonzero(np.bincount(widths.astype(np.int64)))
    if len(groups) == 1 and groups[0] > 0:  # one width (common): unpack straight into the output
        width = int(groups[0])
        words = _gather(d, starts + w, np.full(len(starts), 128 * width, np.int64)).view(dtype)
        out = bitpack.unpack_blocks(words, width, t).reshape(len(counts), 1024)
        groups = groups[:0]
    elif groups[0] == 0:  # width-0 chunks hold zeros
        out = np.zeros((len(counts), 1024), dtype)
    else:  # every chunk is written below
        out = pool_empty(len(counts) * 1024, dtype).reshape(len(counts), 1024)
    for w_np in groups:
        width = int(w_np)
        if width == 0:
            continue
        sel = np.flatnonzero(widths == width)
        nbytes = 128 * width
        words = _gather(d, starts[sel] + w, np.full(len(sel), nbytes, np.int64)).view(dtype)
        first, last = int(sel[0]), int(sel[-1])
        if last - first + 1 == len(sel):  # a run of chunks (widths often grow or stay put)
            bitpack.unpack_blocks(words, width, t, out=out[first : last + 1].reshape(-1))
        else:
            out[sel] = bitpack.unpack_blocks(words, width, t).reshape(len(sel), 1024)
    if (counts == 1024).all():
        vals = out.reshape(-1)
    elif (counts[:-1] == 1024).all():
        vals = out.reshape(-1)[: int(counts.sum())]
    else:
        vals = out[np.arange(1024)[None, :] < counts[:, None]]
    return Fixed(t, vals.view(np.uint8), int(counts.sum()))
