"""Vectorised encoders for a whole partition: every token's posting blocks, impacts and positions at once.

The byte layouts are those of :mod:`lance_format.index.inverted.postings` (which encodes one
posting list at a time and stays the reference); here numpy works on all blocks of all tokens
together: ``BitPacker4x`` blocks are packed in batches of equal bit width, LEB128 varints for
whole arrays, Pareto frontiers of every block with one sort. Python only slices the finished
byte buffer into the per-block values Arrow stores.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.index.inverted.postings import BLOCK, LEVEL1_BLOCKS

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
_BATCH = 8192


def bit_widths(values: npt.NDArray[np.integer]) -> I64:
    """``int.bit_length`` of every value (values below 2**53)."""
    return np.frexp(values.astype(np.float64))[1].astype(np.int64)


def pack_many(rows: U32) -> tuple[U8, I64]:
    """``BitPacker4x.compress`` of every row of an ``(n, 128)`` matrix, width byte first.

    Lane ``l`` of a block holds values ``l, l + 4, ...`` as a little-endian bit stream of ``w``
    32-bit words (word ``t`` of the four lanes stored together). Value ``j`` of a lane starts at
    bit ``j * w``: it is shifted into a 64-bit accumulator of the word holding that bit, and what
    passes bit 32 is carried into the next word (32 shifts per width, each over all its blocks).

    Returns:
        The packed rows concatenated, and their ``n + 1`` byte offsets.
    """
    n = rows.shape[0]
    widths = bit_widths(rows.max(axis=1)) if n else np.zeros(0, np.int64)
    sizes = 1 + 16 * widths
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buf = np.zeros(int(offsets[-1]), dtype=np.uint8)
    buf[offsets[:-1]] = widths.astype(np.uint8)
    low = np.uint64(0xFFFFFFFF)
    for w in np.unique(widths).tolist():
        if w == 0:
            continue
        sel_all = np.flatnonzero(widths == w)
        bit = np.arange(32, dtype=np.int64) * w
        word, shift = (bit >> 5).tolist(), (bit & 31).astype(np.uint64)
        for s in range(0, sel_all.size, _BATCH):
            sel = sel_all[s:s + _BATCH]
            k = sel.size
            lanes = rows[sel].reshape(k, 32, 4).astype(np.uint64)  # (block, value of lane, lane)
            acc = np.zeros((k, w, 4), np.uint64)
            for j in range(32):
                acc[:, word[j], :] |= lanes[:, j, :] << shift[j]
            words = acc & low
            words[:, 1:, :] |= acc[:, :-1, :] >> np.uint64(32)  # the carries
            packed = words.astype("<u4").view(np.uint8).reshape(k, 16 * w)  # word t of lanes 0..3
            dest = offsets[sel][:, None] + 1 + np.arange(16 * w)
            buf[dest] = packed
    return buf, offsets


def varints(values: npt.NDArray[np.integer]) -> tuple[U8, I64]:
    """LEB128 of every value, concatenated, and each value's byte count."""
    v = values.astype(np.uint64)
    counts = np.maximum(1, (bit_widths(v) + 6) // 7)
    if v.size == 0:
        return np.zeros(0, np.uint8), counts
    most = int(counts.max())
    k = np.arange(most)
    groups = (v[:, None] >> (np.uint64(7) * k.astype(np.uint64))) & np.uint64(0x7F)
    more = (k[None, :] < (counts - 1)[:, None]).astype(np.uint64) << np.uint64(7)
    mask = k[None, :] < counts[:, None]
    return (groups | more)[mask].astype(np.uint8), counts


def _starts(keys: I64) -> I64:
    """Indices where a sorted key array changes (run starts)."""
    if keys.size == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])


def split(buf: U8, bounds: I64) -> list[bytes]:
    """``buf`` cut at ``bounds`` (``n + 1`` offsets) into ``n`` byte strings."""
    data = buf.tobytes()
    b = bounds.tolist()
    return [data[b[i]:b[i + 1]] for i in range(len(b) - 1)]


def frontier_entries(group: I64, last_doc: I64, freqs: U32, lens: U32,
                     num_groups: int) -> tuple[list[bytes], tuple[I64, I64, I64]]:
    """The impact entry of every group of pairs (``group`` non-decreasing, ``0..num_groups-1``).

    An entry is ``varint(last doc id) varint(pair count)`` and the Pareto frontier of the
    group's ``(frequency, doc length)`` pairs by rising frequency, each pair as
    ``varint((freq step - 1) << 1 | (len step != 1))`` plus ``varint(len step)`` when that bit
    is set (see ``postings._impact_entry``). ``last_doc``: each group's last doc id.

    Returns:
        The entries, and the frontier pairs ``(group, frequency, length)`` (a frontier of a union
        of groups is the frontier of their frontiers).
    """
    g = group.astype(np.int64, copy=False)
    freqs, lens = freqs.astype(np.uint32, copy=False), lens.astype(np.uint32, copy=False)
    fw, lw = int(freqs.max(initial=0)) + 1, int(lens.max(initial=0)) + 1
    cells = num_groups * fw * lw
    if cells <= max(1 << 22, 4 * g.size):
        # Few distinct (frequency, length) pairs (short documents): mark each present
        # (group, frequency, length) cell; reading the marks in order is the sorted unique
        # list, without sorting millions of pairs. (uint32 operands widen to int64 here.)
        present = np.zeros(cells, dtype=bool)
        present[(g * fw + freqs) * lw + lens] = True
        cell = np.flatnonzero(present)
        g, rest = np.divmod(cell, fw * lw)
        f, ln = np.divmod(rest, lw)
    else:
        f, ln = freqs.astype(np.int64), lens.astype(np.int64)
        if cells < 2**62:  # one int64 key sorts faster than three
            o = np.argsort((g * fw + f) * lw + ln)
        else:
            o = np.lexsort((ln, f, g))
        g, f, ln = g[o], f[o], ln[o]
    first = np.r_[True, (g[1:] != g[:-1]) | (f[1:] != f[:-1])] if g.size else np.zeros(0, bool)
    g, f, ln = g[first], f[first], ln[first]  # shortest document per (group, frequency)
    # A pair stays when it is shorter than every pair of higher frequency in its group: walk by
    # group, frequency falling; earlier groups get larger keys so a running minimum never crosses.
    o = np.argsort(g * fw + (fw - 1 - f)) if num_groups * fw < 2**62 else np.lexsort((-f, g))
    big = int(ln.max(initial=0)) + 1
    key = (num_groups - g[o]) * big + ln[o]
    run = np.minimum.accumulate(key)
    prev = np.r_[np.iinfo(np.int64).max, run[:-1]]
    keep = np.zeros(g.size, dtype=bool)
    keep[o[key < prev]] = True
    g, f, ln = g[keep], f[keep], ln[keep]  # by group, frequency rising
    count = np.bincount(g, minlength=num_groups)
    gs = np.r_[0, np.cumsum(count)[:-1]]
    is_first = np.zeros(g.size, dtype=bool)
    is_first[gs[count > 0]] = True
    df = f - np.where(is_first, 0, np.r_[0, f[:-1]])
    dl = ln - np.where(is_first, 0, np.r_[0, ln[:-1]])
    code = ((df - 1) << 1) | (dl != 1)
    # Values in entry order: per group its header (last doc, count), then per pair code [, dl].
    n_pair_vals = 1 + (dl != 1).astype(np.int64)
    vals_per_group = 2 + np.bincount(g, weights=n_pair_vals, minlength=num_groups).astype(np.int64)
    total = int(vals_per_group.sum())
    out = np.zeros(total, dtype=np.int64)
    gstart = np.r_[0, np.cumsum(vals_per_group)[:-1]]
    out[gstart] = last_doc
    out[gstart + 1] = count
    rank_vals = np.cumsum(n_pair_vals) - n_pair_vals  # values before each pair, over all groups
    before = rank_vals - rank_vals[gs[g]] if g.size else rank_vals
    at = gstart[g] + 2 + before
    out[at] = code
    two = dl != 1
    out[at[two] + 1] = dl[two]
    data, nbytes = varints(out)
    group_of_val = np.repeat(np.arange(num_groups), vals_per_group)
    bytes_per_group = np.bincount(group_of_val, weights=nbytes, minlength=num_groups).astype(np.int64)
    return split(data, np.r_[0, np.cumsum(bytes_per_group)]), (g, f, ln)


def encode_partition(tok: I64, bounds: I64, doc: U32, freq: U32, lens: U32, scores: npt.NDArray[np.float32],
                     positions: U32 | None) -> tuple[list[list[bytes]], list[float], list[list[bytes]],
                                                     list[bytes], list[I64]]:
    """Every token's ``_posting`` blocks, ``_max_score``, ``_impacts`` and, with positions, streams.

    Args:
        tok, doc, freq: The (token, document) pairs sorted by token, then document.
        bounds: ``num_tokens + 1`` offsets of each token's pairs.
        lens: Each pair's document length; ``scores``: each pair's BM25 weight.
        positions: Every pair's positions (ascending), concatenated in pair order.

    Returns:
        Per token: posting blocks, max score, impact entries, position stream and the
        stream's block offsets (the last two empty without positions).
    """
    ntok = bounds.size - 1
    npairs = tok.size
    lengths = np.diff(bounds)
    nblocks = (lengths + BLOCK - 1) // BLOCK
    block_base = np.r_[0, np.cumsum(nblocks)]
    rank = np.arange(npairs, dtype=np.int64) - bounds[tok]
    blk = block_base[tok] + rank // BLOCK  # global block id of every pair
    total_blocks = int(block_base[-1])
    bstart = _starts(blk)
    block_scores = np.maximum.reduceat(scores, bstart) if npairs else np.zeros(0, np.float32)
    block_len = np.diff(np.r_[bstart, npairs])
    block_last = doc[np.r_[bstart[1:], npairs] - 1].astype(np.int64) if npairs else np.zeros(0, np.int64)
    full = block_len == BLOCK
    # Full blocks: f32 max score, u32 first doc, packed doc deltas (the first 0), packed freqs.
    fb = np.flatnonzero(full)
    idx = bstart[fb][:, None] + np.arange(BLOCK)
    dmat = doc[idx].astype(np.uint32, copy=False)
    deltas = np.zeros_like(dmat)  # doc ids rise within a token: uint32 differences do not wrap
    np.subtract(dmat[:, 1:], dmat[:, :-1], out=deltas[:, 1:])
    pd, pd_off = pack_many(deltas)
    pf, pf_off = pack_many(freq[idx].astype(np.uint32))
    # Tail blocks: f32 max score, varint doc deltas (the first absolute), varint freqs.
    tb = np.flatnonzero(~full)
    in_tail = ~full[blk]
    t_doc = doc[in_tail].astype(np.int64)
    t_first = np.r_[True, blk[in_tail][1:] != blk[in_tail][:-1]] if t_doc.size else np.zeros(0, bool)
    t_delta = t_doc - np.where(t_first, 0, np.r_[0, t_doc[:-1]])
    vd, vd_n = varints(t_delta)
    vf, vf_n = varints(freq[in_tail])
    tail_len = block_len[tb]
    td_off = np.r_[0, np.cumsum(np.add.reduceat(vd_n, np.r_[0, np.cumsum(tail_len)[:-1]]) if tb.size else [])]
    tf_off = np.r_[0, np.cumsum(np.add.reduceat(vf_n, np.r_[0, np.cumsum(tail_len)[:-1]]) if tb.size else [])]
    score_bytes = block_scores.astype("<f4").tobytes()
    first_doc = doc[bstart[fb]].astype("<u4").tobytes() if fb.size else b""
    pdb, pfb, vdb, vfb = pd.tobytes(), pf.tobytes(), vd.tobytes(), vf.tobytes()
    blocks: list[bytes] = [b""] * total_blocks
    pdo, pfo = pd_off.tolist(), pf_off.tolist()
    for i, b in enumerate(fb.tolist()):
        blocks[b] = (score_bytes[4 * b:4 * b + 4] + first_doc[4 * i:4 * i + 4] + pdb[pdo[i]:pdo[i + 1]]
                     + pfb[pfo[i]:pfo[i + 1]])
    tdo, tfo = td_off.astype(np.int64).tolist(), tf_off.astype(np.int64).tolist()
    for i, b in enumerate(tb.tolist()):
        blocks[b] = score_bytes[4 * b:4 * b + 4] + vdb[tdo[i]:tdo[i + 1]] + vfb[tfo[i]:tfo[i + 1]]
    max_scores = (np.maximum.reduceat(block_scores, block_base[:-1][nblocks > 0]).tolist()
                  if total_blocks else [])
    # Impacts: one entry per block, then one per 32 blocks of a token.
    level0, (fg, ff, fl) = frontier_entries(blk, block_last, freq, lens, total_blocks)
    grp_base = np.r_[0, np.cumsum((nblocks + LEVEL1_BLOCKS - 1) // LEVEL1_BLOCKS)]
    grp = grp_base[tok] + rank // (BLOCK * LEVEL1_BLOCKS)
    gstart = _starts(grp)
    grp_last = doc[np.r_[gstart[1:], npairs] - 1].astype(np.int64) if npairs else np.zeros(0, np.int64)
    # Level 1 from the blocks' frontiers: far fewer pairs than the postings.
    block_grp = grp[bstart]
    level1, _ = frontier_entries(block_grp[fg], grp_last, ff.astype(np.uint32), fl.astype(np.uint32),
                                 int(grp_base[-1]))
    bb, gb = block_base.tolist(), grp_base.tolist()
    postings = [blocks[bb[t]:bb[t + 1]] for t in range(ntok)]
    impacts = [level0[bb[t]:bb[t + 1]] + level1[gb[t]:gb[t + 1]] for t in range(ntok)]
    streams: list[bytes] = []
    offsets: list[I64] = []
    if positions is not None:
        streams, offsets = _positions(positions, freq, blk, block_base, total_blocks)
    return postings, max_scores, impacts, streams, offsets


def _positions(positions: U32, freq: U32, blk: I64, block_base: I64,
               total_blocks: int) -> tuple[list[bytes], list[I64]]:
    """Each token's position stream and its blocks' offsets (``shared_stream_v2``, ``packed_delta_v1``).

    A block's run holds its documents' position deltas (a document's first absolute) in
    groups of 128 packed as ``BitPacker4x``, the last partial group as varints.
    """
    f = freq.astype(np.int64)
    pair_start = np.r_[0, np.cumsum(f)[:-1]]
    pos = positions.astype(np.int64)
    first = np.zeros(pos.size, dtype=bool)
    first[pair_start[f > 0]] = True
    deltas = pos - np.where(first, 0, np.r_[0, pos[:-1]])
    eblk = np.repeat(blk, f)  # block of every position
    per_block = np.bincount(eblk, minlength=total_blocks)
    eb_start = np.r_[0, np.cumsum(per_block)[:-1]]
    e = np.arange(pos.size, dtype=np.int64) - eb_start[eblk]  # rank inside its block's run
    in_group = (e // BLOCK) < (per_block[eblk] // BLOCK)
    packed, poff = pack_many(deltas[in_group].astype(np.uint32).reshape(-1, BLOCK))
    vdata, vn = varints(deltas[~in_group])
    # Byte size of each position's unit, in stream order: a full group at its first position,
    # a varint at its own; a stream is the units of its blocks in order.
    unit = np.zeros(pos.size, dtype=np.int64)
    gi = np.flatnonzero(in_group)
    group_first = gi[::BLOCK]
    unit[group_first] = np.diff(poff)
    unit[~in_group] = vn
    at = np.r_[0, np.cumsum(unit)]
    buf = np.zeros(int(at[-1]), dtype=np.uint8)
    if group_first.size:
        sizes = np.diff(poff)
        src = np.repeat(poff[:-1], sizes) + (np.arange(int(sizes.sum())) - np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes))
        dst = np.repeat(at[group_first], sizes) + (np.arange(int(sizes.sum())) - np.repeat(np.r_[0, np.cumsum(sizes)[:-1]], sizes))
        buf[dst] = packed[src]
    vpos = np.flatnonzero(~in_group)
    if vpos.size:
        within = np.arange(int(vn.sum())) - np.repeat(np.r_[0, np.cumsum(vn)[:-1]], vn)
        buf[np.repeat(at[vpos], vn) + within] = vdata
    block_at = at[eb_start]  # stream offset of every block's run
    tok_at = np.r_[block_at[block_base[:-1]], at[-1]] if total_blocks else np.zeros(1, np.int64)
    data = buf.tobytes()
    ta, bb = tok_at.tolist(), block_base.tolist()
    ntok = len(bb) - 1
    streams = [data[ta[t]:ta[t + 1]] for t in range(ntok)]
    offsets = [block_at[bb[t]:bb[t + 1]] - ta[t] for t in range(ntok)]
    return streams, offsets


def unpack_many(data: U8, at: I64, widths: I64) -> U32:
    """``BitPacker4x.decompress`` of blocks packed at byte offsets ``at`` (after their width byte).

    Lane ``l`` of a block is a little-endian bit stream of ``w`` 32-bit words (word ``k`` of
    the four lanes stored together); its value ``j`` is bits ``[j * w, j * w + w)``: the word
    holding its first bit shifted down, with the next word's low bits when it crosses into it
    (32 shifts per width, each over all its blocks' lanes).
    """
    out = np.zeros((at.size, BLOCK), dtype=np.uint32)
    for w in np.unique(widths).tolist():
        if w == 0:
            continue
        sel = np.flatnonzero(widths == w)
        raw = data[at[sel][:, None] + np.arange(16 * w)]  # (k, 16w): word j of lanes 0..3
        words = np.ascontiguousarray(raw).view("<u4").reshape(sel.size, w, 4).astype(np.uint32)
        vals = np.empty((sel.size, 32, 4), np.uint32)  # (block, value of lane, lane)
        mask = np.uint32((1 << w) - 1)
        for j in range(32):
            q, r = divmod(j * w, 32)
            v = words[:, q, :] >> np.uint32(r)
            if r + w > 32:
                v |= words[:, q + 1, :] << np.uint32(32 - r)
            vals[:, j, :] = v & mask
        out[sel] = vals.reshape(sel.size, BLOCK)
    return out


def decode_full_blocks(blocks: pa.Array) -> tuple[U32, U32]:
    """Doc ids and frequencies of full 128-document posting blocks (one binary value each)."""
    if len(blocks) == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    if not pa.types.is_large_binary(blocks.type):
        blocks = blocks.cast(pa.large_binary())
    bufs = blocks.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64, count=len(blocks) + 1, offset=blocks.offset * 8)
    return decode_full_at(np.frombuffer(bufs[2], dtype=np.uint8), offs[:-1].astype(np.int64))


def decode_full_at(data: U8, start: I64) -> tuple[U32, U32]:
    """Doc ids and frequencies of the full posting blocks that begin at byte offsets ``start`` of ``data``."""
    if start.size == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    first = data[start[:, None] + np.arange(4, 8)].copy().view("<u4").reshape(-1).astype(np.int64)
    w1 = data[start + 8].astype(np.int64)
    deltas = unpack_many(data, start + 9, w1)
    at2 = start + 9 + 16 * w1
    freqs = unpack_many(data, at2 + 1, data[at2].astype(np.int64))
    deltas[:, 0] = 0
    ids = (np.cumsum(deltas, axis=1, dtype=np.int64) + first[:, None]).astype(np.uint32)
    return ids.reshape(-1), freqs.reshape(-1)
