"""One token's posting list held as its undecoded 128-document blocks.

Every block starts with the best BM25 weight among its documents (f32, written with the
partition's statistics); a full block then holds its first doc id (u32), the tail block (the
last, partial one) starts its doc ids at the first varint (``varint_delta_v1``) or u32
(``fixed32_v1``). Those heads give every block's doc-id range and score bound without
decoding it, so a top-k search decodes only the blocks that can still reach the top
(``rust/lance-index/src/scalar/inverted/wand.rs`` skips blocks by the same bounds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import CorruptFileError
from lance_format.index.inverted import encode
from lance_format.index.inverted.postings import BLOCK, decode_posting

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]


@dataclass
class PostingBlocks:
    """A token's posting blocks in one partition, with each block's first doc id and max score.

    Attributes:
        data: The blocks' bytes, back to back; ``starts``: ``n + 1`` offsets into it.
        length: Documents in the list; ``tail_codec``: how the partial last block is coded.
        first_doc: Each block's first doc id; ``max_score``: each block's stored max weight.
    """

    data: npt.NDArray[np.uint8]
    starts: I64
    length: int
    tail_codec: str
    where: str
    first_doc: U32
    max_score: F32
    _all: tuple[U32, U32, I64] | None = None

    @classmethod
    def read(cls, blocks: pa.Array, length: int, tail_codec: str, where: str) -> PostingBlocks:
        """Index the ``_posting`` values of one token (``length`` documents).

        Raises:
            CorruptFileError: the block count or a block's size does not fit ``length``.
        """
        n = len(blocks)
        if n != (length + BLOCK - 1) // BLOCK:
            raise CorruptFileError(f"{where}: {n} posting blocks for {length} documents")
        if not pa.types.is_large_binary(blocks.type):
            blocks = blocks.cast(pa.large_binary())
        bufs = blocks.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64, count=n + 1, offset=blocks.offset * 8).astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        full = length // BLOCK
        sizes = np.diff(offs)
        if n and (int(sizes.min()) < 4 or (full and int(sizes[:full].min()) < 10) or int(offs[-1]) > data.size):
            raise CorruptFileError(f"{where}: damaged posting block: block too short")
        head = offs[:-1, None] + np.arange(4)
        max_score = data[head].copy().view("<f4").reshape(-1) if n else np.zeros(0, np.float32)
        first = np.zeros(n, np.uint32)
        if full:
            first[:full] = data[offs[:full, None] + np.arange(4, 8)].copy().view("<u4").reshape(-1)
        if full < n:  # the tail block: its first doc id is its first value
            at = int(offs[full]) + 4
            if tail_codec == "fixed32_v1":
                first[full] = int.from_bytes(bytes(data[at:at + 4]), "little")
            else:
                value = shift = 0
                while True:
                    if at >= int(offs[full + 1]):
                        raise CorruptFileError(f"{where}: damaged posting block: truncated varint")
                    b = int(data[at])
                    at += 1
                    value |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                first[full] = value
        return cls(data, offs, length, tail_codec, where, first, max_score.astype(np.float32))

    @property
    def num_blocks(self) -> int:
        """Blocks in the list."""
        return int(self.first_doc.size)

    def decode(self, sel: I64) -> tuple[U32, U32, I64]:
        """Doc ids, frequencies and block number of every document of blocks ``sel`` (ascending).

        Raises:
            CorruptFileError: a block is damaged.
        """
        sel = np.asarray(sel, np.int64)
        if self._all is None and 2 * sel.size > self.num_blocks:
            # Most of the list: decode it whole once; later queries (the list stays in the
            # opened segment) slice it.
            self._all = self._decode(np.arange(self.num_blocks, dtype=np.int64))
        if self._all is not None:
            ids, freqs, owner = self._all
            if sel.size == self.num_blocks:
                return ids, freqs, owner
            # Block b holds documents [128 b, 128 b + 128) of the list (the tail fewer).
            keep = (sel[:, None] * BLOCK + np.arange(BLOCK)).reshape(-1)
            keep = keep[keep < ids.size]
            return ids[keep], freqs[keep], owner[keep]
        return self._decode(sel)

    def _decode(self, sel: I64) -> tuple[U32, U32, I64]:
        full = self.length // BLOCK
        fsel = sel[sel < full]
        try:
            ids, freqs = encode.decode_full_at(self.data, self.starts[fsel])
        except (IndexError, ValueError) as exc:
            raise CorruptFileError(f"{self.where}: damaged posting block: {exc}") from exc
        owner = np.repeat(fsel, BLOCK)
        if fsel.size == sel.size:
            return ids, freqs, owner
        a, b = int(self.starts[full]), int(self.starts[full + 1])
        t_ids, t_freqs = decode_posting([self.data[a:b].tobytes()], self.length - full * BLOCK,
                                        self.tail_codec, self.where)
        return (np.concatenate([ids, t_ids]), np.concatenate([freqs, t_freqs]),
                np.concatenate([owner, np.full(t_ids.size, full, np.int64)]))

    def decode_all(self) -> tuple[U32, U32]:
        """Doc ids and frequencies of the whole list."""
        ids, freqs, _ = self.decode(np.arange(self.num_blocks, dtype=np.int64))
        return ids, freqs


def positions_flat(stream: bytes, block_offsets: I64, freqs: U32, where: str = "positions") -> tuple[U32, I64]:
    """The positions of every document of some posting blocks, decoded together.

    ``block_offsets``: where each block's run starts in the token's position stream
    (``_position_block_offset``); ``freqs``: the frequencies of all documents of those blocks, in
    order. A run holds its documents' position deltas (a document's first absolute) in groups of
    128 packed as ``BitPacker4x``, then the rest as LEB128 varints (see ``postings.decode_positions``,
    the one-block-at-a-time reference). All packed groups are unpacked in one batch and all
    varints at once.

    Returns:
        Every position, documents in order, and each document's start in it (``n + 1`` offsets).

    Raises:
        CorruptFileError: the stream is shorter than the frequencies say.
    """
    data = np.frombuffer(stream, np.uint8)
    f = freqs.astype(np.int64)
    nb = int(np.asarray(block_offsets).size)
    offs = np.asarray(block_offsets, np.int64)
    totals = np.bincount(np.arange(f.size) // BLOCK, weights=f, minlength=nb).astype(np.int64)[:nb]
    ngroups, rest = totals // BLOCK, totals % BLOCK
    gstarts: list[int] = []
    tail_at = offs.copy()
    try:
        for b in np.flatnonzero(ngroups).tolist():  # groups follow each other: a few per block
            at = int(offs[b])
            for _ in range(int(ngroups[b])):
                gstarts.append(at)
                at += 1 + 16 * int(data[at])
            tail_at[b] = at
        gs = np.array(gstarts, np.int64)
        if gs.size and int(gs.max()) >= data.size:
            raise IndexError("group past the end")
        packed = encode.unpack_many(data, gs + 1, data[gs].astype(np.int64)) if gs.size else np.zeros((0, BLOCK), np.uint32)
        # Varints: a window of up to 5 bytes a value after each block's groups; the first ``rest``
        # values of each window are the block's.
        win = np.minimum(5 * rest, np.maximum(data.size - tail_at, 0))
        seg = np.repeat(np.arange(nb), win)
        first = np.cumsum(win) - win
        idx = np.repeat(tail_at, win) + (np.arange(int(win.sum())) - np.repeat(first, win))
        byt = data[idx].astype(np.int64)
        term = byt < 0x80
        ends_before = np.cumsum(term) - term
        seg_base = np.r_[0, np.cumsum(term)][first][seg] if seg.size else np.zeros(0, np.int64)
        k_val = ends_before - seg_base  # the value each byte belongs to, within its window
        keep = k_val < rest[seg]
        vid = (np.cumsum(rest) - rest)[seg[keep]] + k_val[keep]
        if np.bincount(seg[keep & term], minlength=nb)[:nb].tolist() != rest.tolist():
            raise IndexError("truncated varints")
        kb = byt[keep]
        run = np.flatnonzero(np.r_[True, vid[1:] != vid[:-1]]) if vid.size else np.zeros(0, np.int64)
        shift = np.arange(vid.size) - np.repeat(run, np.diff(np.r_[run, vid.size]))
        tail = np.bincount(vid, weights=(kb & 0x7F) * (2.0 ** (7 * shift)), minlength=int(rest.sum()))
    except (IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: damaged position stream: {exc}") from exc
    # Deltas in stream order: per block its groups, then its varints.
    deltas = np.zeros(int(totals.sum()), np.int64)
    bstart = np.cumsum(totals) - totals
    gblock = np.repeat(np.arange(nb), ngroups)
    gfirst = np.cumsum(ngroups) - ngroups
    gdest = bstart[gblock] + BLOCK * (np.arange(gblock.size) - gfirst[gblock])
    if gdest.size:
        deltas[(gdest[:, None] + np.arange(BLOCK)).reshape(-1)] = packed.reshape(-1)
    tblock = np.repeat(np.arange(nb), rest)
    tfirst = np.cumsum(rest) - rest
    deltas[bstart[tblock] + BLOCK * ngroups[tblock] + (np.arange(tblock.size) - tfirst[tblock])] = tail.astype(np.int64)
    doc_start = np.r_[0, np.cumsum(f)]
    cum = np.cumsum(deltas)
    before = np.where(doc_start[:-1] > 0, cum[np.maximum(doc_start[:-1] - 1, 0)], 0)
    pos = cum - np.repeat(before, f)
    return pos.astype(np.uint32), doc_start.astype(np.int64)


def _leb128_runs(data: npt.NDArray[np.uint8], starts: I64, ends: I64) -> tuple[npt.NDArray[np.uint64], I64, I64]:
    """Every LEB128 value in the byte ranges ``[starts[i], ends[i])``, all ranges at once.

    Returns:
        The values in order, the range each belongs to, and its rank within its range. A range's
        last value may be cut by the range end (the caller checks the values it uses are whole).
    """
    sizes = np.maximum(ends - starts, 0)
    first = np.cumsum(sizes) - sizes
    owner = np.repeat(np.arange(starts.size), sizes)
    idx = np.repeat(starts, sizes) + (np.arange(int(sizes.sum())) - np.repeat(first, sizes))
    byt = data[idx].astype(np.uint64)
    # A value starts at a range start or after a byte without the continuation bit.
    begin = np.r_[True, byt[:-1] < 0x80] if byt.size else np.zeros(0, dtype=bool)
    begin[first[sizes > 0]] = True
    vstart = np.flatnonzero(begin)
    shift = np.arange(byt.size) - np.repeat(vstart, np.diff(np.r_[vstart, byt.size]))
    if byt.size and int(shift.max()) > 9:
        raise ValueError("varint longer than 10 bytes")
    values = np.add.reduceat((byt & np.uint64(0x7F)) << (np.uint64(7) * shift.astype(np.uint64)), vstart) \
        if vstart.size else np.zeros(0, np.uint64)
    vend = np.r_[vstart[1:], byt.size] - 1
    whole = byt[vend] < 0x80 if vend.size else np.zeros(0, dtype=bool)
    vowner = owner[vstart]
    vfirst = np.searchsorted(vowner, np.arange(starts.size))
    rank = np.arange(vstart.size) - vfirst[vowner]
    values[~whole] = np.uint64(0xFFFFFFFFFFFFFFFF)  # marks a value cut by its range's end
    return values, vowner, rank


def decode_lists(postings: pa.ListArray, lengths: U32, tail_codec: str, where: str) -> tuple[I64, U32, U32]:
    """Every posting of every token of a partition, decoded together (a remap reads them all).

    ``postings``: the ``_posting`` column (one list of blocks per token id); ``lengths``: each
    token's document count. Full blocks of all tokens are unpacked in one batch and all tail
    blocks' varints at once, instead of one token at a time.

    Returns:
        ``(token id, doc id, frequency)`` of every posting, by token id, doc ids ascending.

    Raises:
        CorruptFileError: the block counts or a block's bytes do not fit ``lengths``.
    """
    lens = np.asarray(lengths, np.int64)
    counts = np.asarray(pc.list_value_length(postings).fill_null(0), np.int64)
    if counts.size != lens.size or not np.array_equal(counts, (lens + BLOCK - 1) // BLOCK):
        raise CorruptFileError(f"{where}: posting block counts do not fit the token lengths")
    blocks = postings.flatten()
    if not pa.types.is_large_binary(blocks.type):
        blocks = blocks.cast(pa.large_binary())
    bufs = blocks.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int64, count=len(blocks) + 1, offset=blocks.offset * 8).astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    token = np.repeat(np.arange(lens.size, dtype=np.int64), counts)
    rank = np.arange(token.size) - np.repeat(np.cumsum(counts) - counts, counts)
    full = rank < (lens // BLOCK)[token]
    sizes = np.diff(offs)
    if token.size and (int(offs[-1]) > data.size or int(sizes.min()) < 4 or
                       (full.any() and int(sizes[full].min()) < 10)):
        raise CorruptFileError(f"{where}: damaged posting block: block too short")
    try:
        f_ids, f_freqs = encode.decode_full_at(data, offs[:-1][full])
        t_tok = token[~full]
        left = (lens % BLOCK)[t_tok]
        t_at = offs[:-1][~full] + 4
        if tail_codec == "fixed32_v1":
            if t_at.size and int((t_at + 8 * left - offs[1:][~full]).max()) > 0:
                raise IndexError("tail block shorter than its documents")
            k = np.arange(int(2 * left.sum())) - np.repeat(np.cumsum(2 * left) - 2 * left, 2 * left)
            where_b = np.repeat(t_at, 2 * left) + 4 * k
            vals = data[where_b[:, None] + np.arange(4)].copy().view("<u4").reshape(-1).astype(np.uint64)
            vrank, vown = k, np.repeat(np.arange(t_tok.size), 2 * left)
        else:
            vals, vown, vrank = _leb128_runs(data, t_at, offs[1:][~full])
            use = vrank < 2 * left[vown]
            vals, vown, vrank = vals[use], vown[use], vrank[use]
            if vals.size != int(2 * left.sum()) or (vals.size and int(vals.max()) > 0xFFFFFFFF):
                raise IndexError("truncated varints in a tail block")
        is_doc = vrank < left[vown]
        t_ids = vals[is_doc].astype(np.uint32)
        t_freqs = vals[~is_doc].astype(np.uint32)
        if tail_codec != "fixed32_v1":
            # varint tail doc ids: the first value is absolute, the rest deltas (a running sum per block)
            cs = np.cumsum(t_ids.astype(np.int64))
            t_ids = (cs - np.repeat(np.r_[0, cs][np.cumsum(left) - left], left)).astype(np.uint32)
    except (IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: damaged posting block: {exc}") from exc
    # A token's full blocks come before its tail, each part in token order already: every posting
    # goes to its token's start, plus (for a tail's) the token's full postings, plus its rank.
    n_full = lens // BLOCK * BLOCK
    start = np.cumsum(lens) - lens
    f_tok = np.repeat(token[full], BLOCK)
    t_rep = np.repeat(t_tok, left)
    ids = np.empty(int(lens.sum()), np.uint32)
    freqs = np.empty(ids.size, np.uint32)
    f_at = np.arange(f_tok.size) + (start - (np.cumsum(n_full) - n_full))[f_tok]
    tail_n = lens - n_full
    tail_at = np.arange(t_rep.size) + (start + n_full - (np.cumsum(tail_n) - tail_n))[t_rep]
    ids[f_at], freqs[f_at] = f_ids, f_freqs
    ids[tail_at], freqs[tail_at] = t_ids, t_freqs
    return np.repeat(np.arange(lens.size, dtype=np.int64), lens), ids, freqs
