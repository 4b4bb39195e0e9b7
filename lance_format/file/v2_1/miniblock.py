"""Writing mini-block pages: chunking values, framing chunks, levels and the repetition index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import InvalidInputError
from lance_format.file.v2_1 import bitpack

FILL = 0xFE
MAX_CHUNK_VALUES = 4096
FLAT_CHUNK_BYTES = 8 * 1024 - 6


@dataclass
class ValueChunks:
    """Compressed values split into chunks: ``buffers[c]`` are the value buffers of chunk ``c``."""

    counts: list[int]
    buffers: list[list[bytes]]
    encoding: pb.CompressiveEncoding


def pow2_chunk(values_per_chunk_max: int) -> int:
    """Largest power of two not above the bound (at least 1)."""
    k = 1
    while k * 2 <= values_per_chunk_max:
        k *= 2
    return k


def split_counts(n: int, k: int) -> list[int]:
    """``n`` values in chunks of ``k`` (last chunk holds the rest)."""
    full, rest = divmod(n, k)
    counts = [k] * full
    if rest:
        counts.append(rest)
    return counts or [0]


def _pad8(n: int) -> int:
    return (8 - n % 8) % 8


def _ool_pack_levels(levels: np.ndarray, width: int) -> bytes:
    """Out-of-line bit-packing of u16 levels: whole 1024-blocks packed, tail packed or raw."""
    n = len(levels)
    whole = n // 1024
    tail = n % 1024
    per_block = 1024 * width // 16
    parts = []
    if whole:
        parts.append(bitpack.pack_blocks(levels[: whole * 1024], width, 16).tobytes())
    if tail:
        if tail <= per_block:
            parts.append(levels[whole * 1024 :].astype(np.uint16).tobytes())
        else:
            pad = np.zeros(1024, np.uint16)
            pad[:tail] = levels[whole * 1024 :]
            parts.append(bitpack.pack_blocks(pad, width, 16).tobytes())
    return b"".join(parts)


def level_encoding(max_level: int) -> tuple[pb.CompressiveEncoding, int]:
    """Out-of-line bit-packing description for levels up to ``max_level``."""
    width = max(1, int(max_level).bit_length())
    enc = pb.CompressiveEncoding()
    enc.out_of_line_bitpacking.uncompressed_bits_per_value = 16
    enc.out_of_line_bitpacking.values.flat.bits_per_value = width
    return enc, width


def rep_index(rep: np.ndarray, level_bounds: list[tuple[int, int]], max_rep: int) -> np.ndarray:
    """Per chunk ``[rows finished in the chunk, items left over after the last finished row]``."""
    out = np.zeros((len(level_bounds), 2), np.uint64)
    last = len(level_bounds) - 1
    for ci, (a, b) in enumerate(level_bounds):
        r = rep[a:b]
        rows = int((r[1:] == max_rep).sum())
        if ci < last:
            hits = np.flatnonzero(r == max_rep)
            left = (len(r) - int(hits[-1])) if len(hits) else len(r)
        else:
            left = 0
        if ci and len(r) and r[0] == max_rep and out[ci - 1, 1] != 0:
            out[ci - 1, 0] += 1
            out[ci - 1, 1] = 0
        if ci == last:
            rows += 1
        out[ci] = (rows, left)
    return out.reshape(-1)


def serialize(
    values: ValueChunks,
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    visible: np.ndarray | None,
    large: bool,
    max_rep: int,
) -> tuple[bytes, Any, pb.CompressiveEncoding | None, pb.CompressiveEncoding | None, bytes | None]:
    """Frame the chunks: returns (metadata buffer, data buffer, rep enc, def enc, repetition index)."""
    if rep is None and defs is None:
        fast = _serialize_flat(values, large)
        if fast is not None:
            return fast[0], fast[1], None, None, None
    return _serialize_general(values, rep, defs, visible, large, max_rep)


def _serialize_general(
    values: ValueChunks,
    rep: np.ndarray | None,
    defs: np.ndarray | None,
    visible: np.ndarray | None,
    large: bool,
    max_rep: int,
) -> tuple[bytes, bytes, pb.CompressiveEncoding | None, pb.CompressiveEncoding | None, bytes | None]:
    """:func:`serialize` one chunk at a time (any levels)."""
    counts = values.counts
    nchunks = len(counts)
    n_levels = len(rep) if rep is not None else len(defs) if defs is not None else sum(counts)
    # level range of each chunk: invisible levels after a chunk's last value go to the next chunk
    starts_v = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    if visible is None:
        vis_pos = None
        bounds = []
        for s, c in zip(starts_v, counts, strict=False):
            bounds.append((int(s), int(s + c)))
        if bounds:
            bounds[-1] = (bounds[-1][0], n_levels)
    else:
        vis_pos = np.flatnonzero(visible)
        bounds = []
        for i, s in enumerate(starts_v):
            a = 0 if i == 0 else int(vis_pos[s - 1]) + 1
            bounds.append((a, 0))
        bounds = [(a, bounds[i + 1][0] if i + 1 < nchunks else n_levels) for i, (a, _) in enumerate(bounds)]
    rep_enc = def_enc = None
    rep_w = def_w = 0
    if rep is not None:
        rep_enc, rep_w = level_encoding(int(rep.max()) if len(rep) else 1)
    if defs is not None:
        def_enc, def_w = level_encoding(int(defs.max()) if len(defs) else 1)
    vw = 4 if large else 2
    meta = np.zeros(nchunks, np.uint32 if large else np.uint16)
    out: list[bytes] = []
    for ci in range(nchunks):
        a, b = bounds[ci]
        nl = b - a if (rep is not None or defs is not None) else 0
        if nl > 0xFFFF:
            raise InvalidInputError("a mini-block chunk would hold more than 65535 rep/def levels")
        rep_b = _ool_pack_levels(rep[a:b], rep_w) if rep is not None else None
        def_b = _ool_pack_levels(defs[a:b], def_w) if defs is not None else None
        header = [nl.to_bytes(2, "little")]
        if rep_b is not None:
            header.append(len(rep_b).to_bytes(2, "little"))
        if def_b is not None:
            header.append(len(def_b).to_bytes(2, "little"))
        for vb in values.buffers[ci]:
            if len(vb) >= 1 << (8 * vw):
                raise InvalidInputError("a mini-block value buffer is too large for its size field")
            header.append(len(vb).to_bytes(vw, "little"))
        parts = [b"".join(header)]
        size = len(parts[0])
        for piece in (
            ([rep_b] if rep_b is not None else [])
            + ([def_b] if def_b is not None else [])
            + list(values.buffers[ci])
        ):
            pad = _pad8(size)
            parts.append(bytes([FILL]) * pad)
            parts.append(piece)
            size += pad + len(piece)
        pad = _pad8(size)
        parts.append(bytes([FILL]) * pad)
        size += pad
        words = size // 8
        if not large and words > 4096:
            raise InvalidInputError("a 2.1 mini-block chunk would exceed 32 KiB")
        log = 0 if ci == nchunks - 1 else int(counts[ci]).bit_length() - 1
        meta[ci] = ((words - 1) << 4) | log
        out.append(b"".join(parts))
    rep_idx = rep_index(rep, bounds, max_rep).tobytes() if rep is not None else None
    return meta.tobytes(), b"".join(out), rep_enc, def_enc, rep_idx


def _serialize_flat(values: ValueChunks, large: bool) -> tuple[bytes, pa.Buffer] | None:
    """:func:`serialize` for chunks without levels, framed by one Arrow ``take``.

    The pieces (every value buffer, every chunk header already padded to 8 bytes, and fill runs
    of 0..7 bytes) become the values of one binary array; taking them in output order writes the
    whole data buffer in a single C++ pass.  Returns ``None`` when chunks differ in buffer count.
    """
    counts = values.counts
    nchunks = len(counts)
    nb = len(values.buffers[0]) if nchunks else 0
    if nchunks == 0 or nb == 0 or any(len(b) != nb for b in values.buffers):
        return None
    flat = [piece for bufs in values.buffers for piece in bufs]
    lens = np.fromiter(map(len, flat), np.int64, len(flat)).reshape(nchunks, nb)
    vw = 4 if large else 2
    if int(lens.max()) >= 1 << (8 * vw):
        raise InvalidInputError("a mini-block value buffer is too large for its size field")
    head = 2 + nb * vw  # u16 level count (0: no levels), then each value buffer's size
    head_p = head + _pad8(head)
    padded = (lens + 7) // 8 * 8
    words = (head_p + padded.sum(axis=1)) // 8
    if not large and int(words.max()) > 4096:
        raise InvalidInputError("a 2.1 mini-block chunk would exceed 32 KiB")
    headers = np.full((nchunks, head_p), FILL, np.uint8)
    headers[:, :2] = 0
    headers[:, 2:head] = lens.astype(np.uint32 if large else np.uint16).view(np.uint8).reshape(nchunks, -1)
    fills = bytes([FILL]) * 28  # runs of 0, 1, ..., 7 fill bytes
    fill_lens = np.arange(8, dtype=np.int64)
    piece_lens = np.concatenate([lens.reshape(-1), np.full(nchunks, head_p, np.int64), fill_lens])
    offsets = np.zeros(len(piece_lens) + 1, np.int64)
    np.cumsum(piece_lens, out=offsets[1:])
    nbufs = nchunks * nb
    order = np.empty((nchunks, 1 + 2 * nb), np.int64)
    order[:, 0] = nbufs + np.arange(nchunks)
    order[:, 1::2] = np.arange(nbufs).reshape(nchunks, nb)
    order[:, 2::2] = nbufs + nchunks + (padded - lens)
    big = int(offsets[-1]) >= 1 << 31 or int(head_p * nchunks + padded.sum()) >= 1 << 31
    typ = pa.large_binary() if big else pa.binary()
    pieces = pa.Array.from_buffers(
        typ,
        len(piece_lens),
        [
            None,
            pa.py_buffer(offsets if big else offsets.astype(np.int32)),
            pa.py_buffer(b"".join([*flat, headers.tobytes(), fills])),
        ],
    )
    framed = pc.take(pieces, pa.array(order.reshape(-1)))
    total = int(head_p * nchunks + padded.sum())
    out = framed.buffers()[2].slice(0, total) if total else pa.py_buffer(b"")
    logs = np.maximum(np.frexp(np.asarray(counts, np.float64))[1].astype(np.int64) - 1, 0)  # log2
    logs[-1] = 0
    meta = ((words - 1) << 4) | logs
    return meta.astype(np.uint32 if large else np.uint16).tobytes(), out
