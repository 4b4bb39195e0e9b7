"""Whole-page decoding of mini-block values: the common encodings without per-chunk numpy work."""

from __future__ import annotations

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import Block, ChunkSet, Fixed, Fsl, Var, take_block, take_var
from lance_format.file.v2_1.compression import (
    decode_miniblock,
    flat_encoding,
    fsl_chain,
    kind_of,
    var_offset_bits,
    variable_chunks,
)
from lance_format.file.v2_1.fsst import SymbolTable
from lance_format.file.v2_1.fsst import decode as fsst_decode


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
            parts = cs.slices(0, need)
            return Fixed(bits, np.concatenate(parts) if parts else np.zeros(0, np.uint8), total)
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
        table = SymbolTable(enc.fsst.symbol_table)
        inner_block = decode_chunkset(enc.fsst.values, cs)
        if not isinstance(inner_block, Var):
            raise UnsupportedEncodingError("FSST must wrap variable-width data")
        data, offsets = fsst_decode(table, inner_block.data, inner_block.offsets)
        return Var(offsets, data)
    if kind == "inline_bitpacking" and nb >= 1:
        return _inline_bitpacked_chunkset(cs, int(enc.inline_bitpacking.uncompressed_bits_per_value))
    return decode_miniblock(enc, cs.chunks())


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
    if (starts % width).any():
        return variable_chunks(cs.chunks(), bits)
    dt = np.uint32 if bits == 32 else np.uint64
    words = cs.data[: len(cs.data) // width * width].view(dt)
    per = counts + 1
    first_word = np.zeros(nchunks, np.int64)
    np.cumsum(per[:-1], out=first_word[1:])
    k = np.arange(int(per.sum()), dtype=np.int64) - np.repeat(first_word, per)
    local = words[np.repeat(starts // width, per) + k].astype(np.int64)
    head = local[first_word]
    tail = local[first_word + counts]
    ok = (head >= per * width) & (tail <= sizes) & (tail >= head)
    steps = np.diff(local)
    boundary = np.zeros(len(steps), bool)
    boundary[(first_word[1:] - 1)] = True
    if not ok.all() or (steps[~boundary] < 0).any():
        raise CorruptFileError("variable chunk offsets are out of range")
    lens = tail - head
    base = np.zeros(nchunks, np.int64)
    np.cumsum(lens[:-1], out=base[1:])
    shift = np.repeat(base - head, per)
    glob = local + shift
    keep = np.ones(len(glob), bool)
    keep[first_word[1:] - 1] = False  # drop each chunk's closing offset except the last one's
    offsets = glob[keep]
    d = cs.data
    st = (starts + head).tolist()
    en = (starts + tail).tolist()
    parts = [d[a:b] for a, b in zip(st, en, strict=False)]
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return Var(offsets, data)


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
    out = np.zeros((len(counts), 1024), dtype)
    d = cs.data
    for w_np in np.unique(widths):
        width = int(w_np)
        if width == 0:
            continue
        sel = np.flatnonzero(widths == width)
        nbytes = 128 * width
        st = (starts[sel] + w).tolist()
        words = np.concatenate([d[a : a + nbytes] for a in st]).view(dtype)
        out[sel] = bitpack.unpack_blocks(words, width, t).reshape(len(sel), 1024)
    if (counts == 1024).all():
        vals = out.reshape(-1)
    elif (counts[:-1] == 1024).all():
        vals = out.reshape(-1)[: int(counts.sum())]
    else:
        vals = out[np.arange(1024)[None, :] < counts[:, None]]
    return Fixed(t, vals.view(np.uint8), int(counts.sum()))
