"""Whole-page decoding of mini-block values: the common encodings without per-chunk numpy work."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
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
    take_var,
)
from lance_format.file.v2_1.compression import (
    decode_miniblock,
    flat_encoding,
    fsl_chain,
    kind_of,
    var_offset_bits,
    variable_chunks,
)
from lance_format.file.v2_1.fsst import SymbolTable, num_threads, pool
from lance_format.file.v2_1.fsst import decode as fsst_decode
from lance_format.file.v2_1.fsst import decode_serial as fsst_decode_one

_FSST_SPLIT_MIN_BYTES = 4 << 20  # smaller FSST pages are decoded by one thread


def decode_chunkset(enc: pb.CompressiveEncoding, cs: ChunkSet, rows: np.ndarray | None = None) -> Block:
    """Decode all chunks of a page; common encodings avoid per-chunk numpy work.

    With ``rows`` (positions among the chunks' values) only those values are returned; FSST then
    decompresses just the selected strings.
    """
    if rows is not None:
        if kind_of(enc) == "fsst" and len(cs.starts) >= 1:
            table = SymbolTable(enc.fsst.symbol_table)
            compressed = decode_chunkset(enc.fsst.values, cs)
            if not isinstance(compressed, Var):
                raise UnsupportedEncodingError("FSST must wrap variable-width data")
            picked = take_var(compressed, rows)
            data, offsets = fsst_decode(table, picked.data, picked.offsets)
            return Var(offsets, data)
        return take_block(decode_chunkset(enc, cs), rows)
    kind = kind_of(enc)
    nb = len(cs.starts)
    total = int(cs.counts.sum())
    if kind == "flat" and nb >= 1 and not enc.flat.HasField("data"):
        bits = int(enc.flat.bits_per_value)
        if bits % 8 == 0 and 0 < bits <= 1 << 16:
            need = cs.counts * (bits // 8)
            if (need > cs.sizes[0]).any():
                raise CorruptFileError("flat mini-block chunk is truncated")
            return Fixed(bits, gather_ranges(cs.data, cs.starts[0], need), total)
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
    return decode_miniblock(enc, cs.chunks())


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
    results = list(pool("fsst").map(lambda part: _fsst_part(enc, table, part, 1), parts))
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
    maxc = int(counts.max())
    if (starts % width).any() or nchunks * (maxc + 1) > 2 * int(counts.sum()) + 4096:
        return variable_chunks(cs.chunks(), bits)  # unaligned or very ragged chunks: generic path
    dt = np.uint32 if bits == 32 else np.uint64
    words = cs.data[: len(cs.data) // width * width].view(dt)
    # one row per chunk, padded to the largest chunk (uniform chunks: no padding at all); padded
    # cells read some other in-bounds word and are masked out below
    cols = np.arange(maxc + 1, dtype=np.int64)
    idx = (starts // width)[:, None] + cols[None, :]
    np.minimum(idx, len(words) - 1, out=idx)
    local = words[idx].astype(np.int64)
    rows = np.arange(nchunks)
    head = local[:, 0].copy()  # local is shifted in place below
    tail = local[rows, counts]
    per = counts + 1
    ok = (head >= per * width) & (tail <= sizes) & (tail >= head)
    uniform = bool((counts == len(cols) - 1).all())
    if not ok.all():
        raise CorruptFileError("variable chunk offsets are out of range")
    lens = tail - head
    base = np.zeros(nchunks, np.int64)
    np.cumsum(lens[:-1], out=base[1:])
    local += (base - head)[:, None]
    total = base[-1] + lens[-1]
    if uniform:
        inner = local[:, :-1].reshape(-1)
    else:  # drop the padding and each chunk's closing offset (the next chunk's first repeats it)
        inner = local[cols[None, :] < counts[:, None]]
    offsets = np.empty(len(inner) + 1, np.int64)
    offsets[:-1] = inner
    offsets[-1] = total
    # each chunk's shifted offsets run from base to base + (tail - head), so one global
    # monotonicity check also proves every chunk's own offsets ascend within its head..tail
    if (offsets[1:] < offsets[:-1]).any():
        raise CorruptFileError("variable chunk offsets are out of range")
    return Var(offsets, gather_ranges(cs.data, starts + head, lens))


def _inline_bitpacked_chunkset(cs: ChunkSet, t: int) -> Fixed:
    dtype = bitpack.uint_dtype(t)
    w = dtype.itemsize
    counts = cs.counts
    starts, sizes = cs.starts[0], cs.sizes[0]
    if (counts > 1024).any():
        raise CorruptFileError("inline bit-packed chunk holds more than 1024 values")
    if (sizes < w).any():
        raise CorruptFileError("inline bit-packed chunk lacks its width word")
    widths = np.zeros(len(counts), np.int64)
    for k in range(w):
        widths |= cs.data[starts + k].astype(np.int64) << (8 * k)
    if (widths > t).any():
        raise CorruptFileError(f"inline bit width exceeds {t}")
    if (sizes < w + widths * 128).any():
        raise CorruptFileError("inline bit-packed chunk is truncated")
    d = cs.data
    groups = np.unique(widths)
    if len(groups) == 1 and groups[0] > 0:  # one width (common): unpack straight into the output
        width = int(groups[0])
        words = gather_ranges(d, starts + w, np.full(len(starts), 128 * width, np.int64)).view(dtype)
        out = bitpack.unpack_blocks(words, width, t).reshape(len(counts), 1024)
        groups = groups[:0]
    elif groups[0] == 0:  # width-0 chunks hold zeros
        out = np.zeros((len(counts), 1024), dtype)
    else:  # every chunk is written below
        out = np.frombuffer(pa.allocate_buffer(len(counts) * 1024 * w), dtype).reshape(len(counts), 1024)
    for w_np in groups:
        width = int(w_np)
        if width == 0:
            continue
        sel = np.flatnonzero(widths == width)
        nbytes = 128 * width
        words = gather_ranges(d, starts[sel] + w, np.full(len(sel), nbytes, np.int64)).view(dtype)
        unpacked = bitpack.unpack_blocks(words, width, t).reshape(len(sel), 1024)
        first, last = int(sel[0]), int(sel[-1])
        if last - first + 1 == len(sel):  # a run of chunks (widths often grow or stay put)
            out[first : last + 1] = unpacked
        else:
            out[sel] = unpacked
    if (counts == 1024).all():
        vals = out.reshape(-1)
    elif (counts[:-1] == 1024).all():
        vals = out.reshape(-1)[: int(counts.sum())]
    else:
        vals = out[np.arange(1024)[None, :] < counts[:, None]]
    return Fixed(t, vals.view(np.uint8), int(counts.sum()))
