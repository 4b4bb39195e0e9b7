"""Posting lists of an INVERTED partition: 128-document blocks, the tail codec and impacts.

One row of ``part_N_invert.lance`` per token (``rust/lance-index/src/scalar/inverted/encoding.rs``):

* ``_posting``: one binary per block. Every block starts with its max score (f32). A full block
  then holds its first doc id (u32), the doc ids as a sorted ``BitPacker4x`` block (bit width
  byte, then ``16 * width`` bytes of deltas) and the frequencies as a plain ``BitPacker4x``
  block. The last, partial block uses the tail codec ``varint_delta_v1``: LEB128 doc-id deltas
  (the first absolute) followed by LEB128 frequencies.
* ``_max_score``, ``_length``: the token's best BM25 weight and document count.
* ``_impacts``: one entry per block (``level0``) then one per 32 blocks (``level1``), each
  ``varint(last doc id) varint(pair count)`` and the Pareto frontier of ``(frequency, doc
  length)`` pairs, delta coded (see :func:`_impact_entry`;
  ``rust/lance-index/src/scalar/inverted/impact.rs``).

``BitPacker4x`` (the ``bitpacking`` crate) packs 128 integers as four interleaved lanes: value
``i`` goes to lane ``i % 4``, each lane is a little-endian bit stream of 32-bit words, and word
``k`` of the four lanes is stored together (16 bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from lance_format.errors import CorruptFileError

U32 = npt.NDArray[np.uint32]
BLOCK = 128
LEVEL1_BLOCKS = 32


def unpack_block(data: bytes, at: int, width: int) -> tuple[U32, int]:
    """128 integers of ``width`` bits packed by ``BitPacker4x`` at ``data[at:]``; and the end offset."""
    n = width * 16
    if width == 0:
        return np.zeros(BLOCK, dtype=np.uint32), at
    words = np.frombuffer(data, dtype="<u4", count=width * 4, offset=at).reshape(width, 4)
    lanes = np.ascontiguousarray(words.T).view(np.uint8)  # (4, width * 4) bytes per lane
    bits = np.unpackbits(lanes, axis=1, bitorder="little").reshape(4, 32, width)
    weights = (np.uint64(1) << np.arange(width, dtype=np.uint64))
    values = (bits.astype(np.uint64) @ weights).astype(np.uint32)  # (4, 32): lane, row
    return np.ascontiguousarray(values.T).reshape(BLOCK), at + n


def pack_block(values: U32) -> bytes:
    """``BitPacker4x.compress`` of 128 integers: the width byte, then the packed words."""
    v = np.asarray(values, dtype=np.uint32)
    width = int(v.max()).bit_length() if v.size else 0
    if width == 0:
        return b"\x00"
    lanes = v.reshape(32, 4).T.astype(np.uint64)  # (4, 32)
    bits = ((lanes[:, :, None] >> np.arange(width, dtype=np.uint64)) & 1).astype(np.uint8)
    packed = np.packbits(bits.reshape(4, 32 * width), axis=1, bitorder="little")  # (4, width*4)
    words = np.ascontiguousarray(packed).view("<u4")  # (4, width)
    return bytes((width,)) + np.ascontiguousarray(words.T).tobytes()


def _varints(data: bytes, at: int, count: int) -> tuple[list[int], int]:
    out = []
    for _ in range(count):
        value = shift = 0
        while True:
            b = data[at]
            at += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        out.append(value)
    return out, at


def varint(value: int) -> bytes:
    """LEB128 of a non-negative integer."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_posting(blocks: Sequence[bytes], length: int, tail_codec: str = "varint_delta_v1",
                   where: str = "posting list") -> tuple[U32, U32]:
    """Doc ids (sorted) and frequencies of one token's posting list.

    Raises:
        CorruptFileError: the blocks do not hold ``length`` documents.
    """
    ids: list[U32] = []
    freqs: list[U32] = []
    left = length
    try:
        for block in blocks:
            if left >= BLOCK:
                first, = struct.unpack_from("<I", block, 4)
                deltas, at = unpack_block(block, 9, block[8])
                deltas[0] = 0
                ids.append((np.cumsum(deltas, dtype=np.uint64) + first).astype(np.uint32))
                f, at = unpack_block(block, at + 1, block[at])
                freqs.append(f)
                left -= BLOCK
            else:
                if tail_codec == "fixed32_v1":
                    vals = np.frombuffer(block, dtype="<u4", count=2 * left, offset=4)
                    ids.append(vals[:left].astype(np.uint32))
                    freqs.append(vals[left:].astype(np.uint32))
                else:
                    d, at = _varints(block, 4, left)
                    f2, at = _varints(block, at, left)
                    ids.append(np.cumsum(np.array(d, dtype=np.uint64)).astype(np.uint32))
                    freqs.append(np.array(f2, dtype=np.uint32))
                left = 0
    except (IndexError, ValueError, struct.error) as exc:
        raise CorruptFileError(f"{where}: damaged posting block: {exc}") from exc
    if left:
        raise CorruptFileError(f"{where}: {length} documents expected, {length - left} found")
    if not ids:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint32)
    return np.concatenate(ids), np.concatenate(freqs)


def encode_posting(ids: U32, freqs: U32, block_scores: Sequence[float]) -> list[bytes]:
    """The ``_posting`` blocks of sorted doc ids with their frequencies (varint tail codec)."""
    out: list[bytes] = []
    n = len(ids)
    full = n - n % BLOCK
    for b, start in enumerate(range(0, full, BLOCK)):
        chunk = ids[start:start + BLOCK].astype(np.int64)
        deltas = np.diff(chunk, prepend=chunk[0]).astype(np.uint32)
        out.append(struct.pack("<fI", block_scores[b], int(chunk[0])) + pack_block(deltas)
                   + pack_block(freqs[start:start + BLOCK]))
    if full < n:
        chunk = ids[full:].astype(np.int64)
        deltas = np.diff(chunk, prepend=0)
        body = b"".join(varint(int(d)) for d in deltas) + b"".join(varint(int(f)) for f in freqs[full:])
        out.append(struct.pack("<f", block_scores[-1]) + body)
    return out


def frontier(freqs: U32, lens: U32) -> list[tuple[int, int]]:
    """The ``(frequency, doc length)`` pairs no other pair beats on both counts, by frequency."""
    order = np.lexsort((lens, freqs))
    f, ln = freqs[order], lens[order]
    first = np.r_[True, f[1:] != f[:-1]]  # smallest length per frequency
    f, ln = f[first], ln[first]
    keep = []
    best = None
    for i in range(len(f) - 1, -1, -1):
        if best is None or ln[i] < best:
            keep.append((int(f[i]), int(ln[i])))
            best = ln[i]
    keep.reverse()
    return keep


def _impact_entry(last_doc: int, pairs: list[tuple[int, int]]) -> bytes:
    # Observed on pylance 14.0.2: each pair, from (0, 0), is one code
    # ``(freq step - 1) << 1 | (len step != 1)`` followed by ``varint(len step)`` only when that
    # low bit is set (on a frontier both steps are at least 1).
    out = [varint(last_doc), varint(len(pairs))]
    prev_f = prev_l = 0
    for f, ln in pairs:
        df, dl = f - prev_f, ln - prev_l
        out.append(varint(((df - 1) << 1) | (dl != 1)))
        if dl != 1:
            out.append(varint(dl))
        prev_f, prev_l = f, ln
    return b"".join(out)


def encode_impacts(ids: U32, freqs: U32, lens: U32) -> list[bytes]:
    """The ``_impacts`` entries of a posting list (``lens``: each document's token count)."""
    level0 = []
    level1 = []
    n = len(ids)
    for gstart in range(0, n, BLOCK * LEVEL1_BLOCKS):
        gend = min(n, gstart + BLOCK * LEVEL1_BLOCKS)
        for start in range(gstart, gend, BLOCK):
            end = min(gend, start + BLOCK)
            level0.append(_impact_entry(int(ids[end - 1]), frontier(freqs[start:end], lens[start:end])))
        level1.append(_impact_entry(int(ids[gend - 1]), frontier(freqs[gstart:gend], lens[gstart:gend])))
    return level0 + level1


def decode_positions(stream: bytes, block_offsets: Sequence[int] | npt.NDArray[np.int64], freqs: U32,
                     where: str = "positions") -> list[U32]:
    """Each document's token positions from a ``shared_stream_v2`` / ``packed_delta_v1`` stream.

    Every posting block has its own run of the stream (``_position_block_offset``): the
    per-document position deltas (the first of a document absolute) of its documents, in
    groups of 128 packed as ``BitPacker4x`` blocks, the last partial group as LEB128 varints.

    Raises:
        CorruptFileError: the stream is shorter than the frequencies say.
    """
    out: list[U32] = []
    flat: list[U32] = []
    ends: list[npt.NDArray[np.int64]] = []
    try:
        for b, start in enumerate(block_offsets):
            f = freqs[b * BLOCK:(b + 1) * BLOCK]
            total = int(f.sum())
            parts = []
            at = int(start)
            for _ in range(total // BLOCK):
                vals, at = unpack_block(stream, at + 1, stream[at])
                parts.append(vals)
            rest, at = _varints(stream, at, total % BLOCK)
            parts.append(np.array(rest, dtype=np.uint32))
            deltas = np.concatenate(parts).astype(np.int64)
            bounds = np.cumsum(f, dtype=np.int64)
            starts = bounds - f
            cum = np.cumsum(deltas)
            base = np.repeat(np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0) * (starts > 0), f)
            flat.append((cum - base).astype(np.uint32))
            ends.append(bounds)
    except (IndexError, ValueError) as exc:
        raise CorruptFileError(f"{where}: damaged position stream: {exc}") from exc
    if not flat:
        return out
    # One slice per document of the whole stream (np.split costs far more per piece).
    allpos = np.concatenate(flat)
    shift = np.cumsum([0] + [int(e[-1]) if e.size else 0 for e in ends[:-1]])
    stops = np.concatenate([e + s for e, s in zip(ends, shift, strict=True)]).tolist()
    starts = [0] + stops[:-1]
    return [allpos[a:b] for a, b in zip(starts, stops, strict=True)]


def encode_positions(positions: Sequence[U32]) -> tuple[bytes, list[int]]:
    """The ``_compressed_position`` stream and ``_position_block_offset`` of one posting list."""
    stream = bytearray()
    offsets = []
    for start in range(0, len(positions), BLOCK):
        offsets.append(len(stream))
        deltas = [np.diff(p.astype(np.int64), prepend=0) for p in positions[start:start + BLOCK]]
        flat = np.concatenate(deltas).astype(np.uint32) if deltas else np.zeros(0, np.uint32)
        full = len(flat) - len(flat) % BLOCK
        for g in range(0, full, BLOCK):
            stream += pack_block(flat[g:g + BLOCK])
        stream += b"".join(varint(int(v)) for v in flat[full:])
    return bytes(stream), offsets
