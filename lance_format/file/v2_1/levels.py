"""Repetition / definition levels of many mini-block chunks, decoded together.

Every chunk of a mini-block page carries its own rep and def level buffers, block-compressed
(``MiniBlockLayout.rep_compression`` / ``def_compression``). A page holds hundreds of chunks, so
decoding them one by one costs a dozen numpy calls per chunk; the common encodings (raw ``u16``,
out-of-line bit-packing, RLE) are decoded here for all chunks with a fixed number of calls. Other
encodings, and chunks whose sizes do not follow the usual framing, take the per-chunk path
(``compression.decode_block``), which also reports what is wrong with them.
"""

from __future__ import annotations

import numpy as np

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import gather_ranges, range_index

_BLOCK = 1024
#: Up to this many chunk tails, levels are cut out of the unpacked blocks by slicing.
_FEW_CUTS = 16
#: Up to this many bytes (ranges x longest range), :func:`small_gather` uses one fancy index.
_SMALL_GATHER_BYTES = 16384


def chunk_levels(
    enc: pb.CompressiveEncoding,
    data: np.ndarray,
    starts: np.ndarray | None,
    sizes: np.ndarray | None,
    num_levels: np.ndarray,
) -> np.ndarray:
    """The levels of every chunk, back to back (a fresh, writable ``uint16`` array).

    Args:
        enc: The page's level encoding.
        data: The bytes the chunks were read into.
        starts: Where each chunk's level buffer begins in ``data``.
        sizes: Each level buffer's size in bytes (as its chunk header states).
        num_levels: Levels in each chunk.

    Raises:
        CorruptFileError: a level buffer is too small for its levels.
    """
    assert starts is not None and sizes is not None
    kind = enc.WhichOneof("compression")
    if kind == "flat" and enc.flat.bits_per_value == 16 and not enc.flat.HasField("data"):
        parts = [data[int(s) : int(s) + 2 * int(n)] for s, n in zip(starts, num_levels, strict=False)]
        for p, n in zip(parts, num_levels, strict=False):
            if len(p) != 2 * n:
                raise CorruptFileError("level buffer is truncated")
        return np.ascontiguousarray(np.concatenate(parts)).view(np.uint16)
    fast = None
    if kind == "out_of_line_bitpacking":
        fast = _ool_levels(enc, data, starts, sizes, num_levels)
    elif kind == "rle":
        fast = _rle_levels(enc.rle, data, starts, sizes, num_levels)
    if fast is not None:
        return fast
    out = []
    for s, z, n in zip(starts, sizes, num_levels, strict=False):
        block = comp.decode_block(enc, data[int(s) : int(s + z)], int(n))
        out.append(comp.levels_from_block(block, int(n)))
    return np.concatenate(out) if out else np.zeros(0, np.uint16)


def small_gather(data: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``blocks.gather_ranges`` for the short ranges of level buffers (a few bytes to a block per
    chunk): one fancy index, where the general gather's fixed cost (~40 us) would dominate.

    Callers checked that the ranges lie in ``data``.
    """
    n = len(starts)
    longest = int(lens.max()) if n else 0
    if n * longest > _SMALL_GATHER_BYTES:
        return gather_ranges(data, starts, lens)
    cols = np.arange(longest, dtype=np.int64)
    idx = starts[:, None] + cols[None, :]
    if bool((lens == longest).all()):
        out: np.ndarray = data[idx].reshape(-1)
        return out
    return data[idx[cols[None, :] < lens[:, None]]]


def _le_u64(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The little-endian ``u64`` at each of ``starts`` (callers checked the bounds), as int64."""
    cols = starts[:, None] + np.arange(8, dtype=np.int64)[None, :]
    return np.ascontiguousarray(data[cols]).view("<u8").reshape(-1).astype(np.int64)


def _ool_levels(
    enc: pb.CompressiveEncoding,
    data: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    num_levels: np.ndarray,
) -> np.ndarray | None:
    """Out-of-line bit-packed ``u16`` levels of every chunk, unpacked in one batch.

    Each chunk holds ``num_levels // 1024`` packed blocks, then its last ``num_levels % 1024``
    levels either packed as one more (padded) block or raw, whichever the writer found smaller:
    the buffer holds exactly ``whole blocks + tail`` words when the tail is raw (as upstream's
    ``unpack_out_of_line`` in ``rust/lance-encoding/src/encodings/physical/bitpacking.rs`` infers
    it). Returns None for other layouts (other widths, buffers too small), left to the per-chunk path.
    """
    ool = enc.out_of_line_bitpacking
    if ool.uncompressed_bits_per_value != 16 or ool.values.WhichOneof("compression") != "flat":
        return None
    width = int(ool.values.flat.bits_per_value)
    if width == 0:  # every level is 0 (lance writes this for pages without any null / empty list)
        return np.zeros(int(num_levels.sum()), np.uint16)
    if not 0 < width <= 16:
        raise CorruptFileError(f"level bit width {width} out of range")
    per_block = 128 * width  # bytes of one packed 1024-level block
    whole = num_levels >> 10
    tail = num_levels & (_BLOCK - 1)
    with_tail = np.flatnonzero(tail)
    if not len(with_tail):  # whole blocks only (most chunks of a list page hold 1024 levels)
        if (whole * per_block > sizes).any():
            return None
        return bitpack.unpack_blocks(small_gather(data, starts, whole * per_block).view(np.uint16), width, 16)
    raw = np.zeros(len(tail), bool)
    t = tail[with_tail]
    raw[with_tail] = sizes[with_tail] // 2 == whole[with_tail] * (per_block // 2) + t
    packed = whole + ((tail > 0) & ~raw)  # packed blocks per chunk
    if (packed * per_block > sizes).any():
        return None
    # one 1024-level slot per block and per tail (packed or raw); a tail's slot is padded
    last_slot = np.cumsum(whole + (tail > 0)) - 1
    nslots = int(last_slot[-1]) + 1
    words_in = small_gather(data, starts, packed * per_block).view(np.uint16)
    if raw.any():
        # packed blocks unpacked into their slots, then each raw tail copied into its own slot
        grid = np.empty((nslots, _BLOCK), np.uint16)
        is_packed = np.ones(nslots, bool)
        is_packed[last_slot[raw]] = False
        if len(words_in):
            grid[is_packed] = bitpack.unpack_blocks(words_in, width, 16).reshape(-1, _BLOCK)
        keep = np.flatnonzero(raw)
        lens = tail[keep]
        tails = small_gather(data, starts[keep] + whole[keep] * per_block, 2 * lens).view(np.uint16)
        grid.reshape(-1)[range_index(last_slot[keep] * _BLOCK, lens, _offsets(lens))] = tails
        flat = grid.reshape(-1)
    else:
        flat = bitpack.unpack_blocks(words_in, width, 16)
    # drop each tail slot's padding: few tails are cut out by slicing, many by one mask
    ends = last_slot[with_tail] * _BLOCK + t
    if len(with_tail) <= _FEW_CUTS:
        begins = np.r_[0, (last_slot[with_tail] + 1) * _BLOCK].tolist()
        pieces = [flat[a:b] for a, b in zip(begins, ends.tolist(), strict=False)]
        rest = flat[begins[-1]:]
        if len(rest):
            pieces.append(rest)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
    slot_keep = np.full(nslots, _BLOCK, np.int64)
    slot_keep[last_slot[with_tail]] = t
    out: np.ndarray = flat.reshape(-1, _BLOCK)[np.arange(_BLOCK)[None, :] < slot_keep[:, None]]
    return out


def _offsets(lens: np.ndarray) -> np.ndarray:
    """Starts of back-to-back runs of ``lens`` with the total at the end (``range_index``'s form)."""
    out = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=out[1:])
    return out


def _rle_levels(
    rle: pb.Rle, data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, num_levels: np.ndarray
) -> np.ndarray | None:
    """RLE ``u16`` levels of every chunk, expanded in one ``np.repeat``.

    A chunk's buffer is a ``u64`` byte size of its run values, the values (``u16``), then one
    ``u8`` length per run (``_rle_block`` in ``compression.py``). Returns None where a chunk does
    not frame exactly so or its runs do not cover exactly its levels (the per-chunk path then
    truncates overshooting runs or reports the chunk).
    """
    if comp.kind_of(rle.values) != "flat" or comp.kind_of(rle.run_lengths) != "flat":
        return None
    if rle.values.flat.bits_per_value != 16 or rle.run_lengths.flat.bits_per_value != 8:
        return None
    if not len(starts) or (sizes < 8).any() or int((starts + sizes).max()) > len(data):
        return None
    vbytes = _le_u64(data, starts)
    runs = vbytes // 2
    if (vbytes % 2).any() or (sizes != 8 + 3 * runs).any() or (runs == 0).any():
        return None
    vals = small_gather(data, starts + 8, vbytes).view(np.uint16)
    lens = small_gather(data, starts + 8 + vbytes, runs).astype(np.int64)
    # every chunk's runs must add up to its own level count, not just the total
    ends = np.cumsum(lens)
    last_run = np.cumsum(runs) - 1
    per_chunk = np.diff(ends[last_run], prepend=0)
    if (per_chunk != num_levels).any():
        return None
    return np.repeat(vals, lens)


__all__ = ["chunk_levels"]
