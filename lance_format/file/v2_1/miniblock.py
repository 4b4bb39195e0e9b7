"""Writing mini-block pages: chunking values, framing chunks, levels and the repetition index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import InvalidInputError
from lance_format.file.v2_1 import bitpack

FILL = 0xFE
MAX_CHUNK_VALUES = 4096
FLAT_CHUNK_BYTES = 8 * 1024 - 6


#: One value buffer of a chunk: bytes, or a view into a page-wide array (no copy made).
Piece = bytes | memoryview


@dataclass
class ValueChunks:
    """Compressed values split into chunks: ``buffers[c]`` are the value buffers of chunk ``c``.

    ``dense``, when set, is the single value buffer of every chunk laid end to end, each
    ``dense_chunk_bytes`` long (the last one takes the rest); the framing then copies it in
    whole-array steps and the per-chunk ``buffers`` (views) are only made if someone asks.
    """

    counts: list[int]
    pieces: list[list[Piece]]
    encoding: pb.CompressiveEncoding
    dense: np.ndarray | None = None
    dense_chunk_bytes: int = 0

    @property
    def buffers(self) -> list[list[Piece]]:
        """The value buffers of every chunk."""
        if self.dense is not None and not self.pieces:
            view = self.dense.data
            size, last = self.dense_chunk_bytes, len(self.counts) - 1
            self.pieces = [[view[i * size : (i + 1) * size if i < last else len(view)]] for i in range(last + 1)]
        return self.pieces

    @property
    def num_buffers(self) -> int:
        """Value buffers per chunk."""
        if self.dense is not None:
            return 1
        return len(self.pieces[0]) if self.pieces else 1


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
        parts: list[Piece] = [b"".join(header)]
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
    """:func:`serialize` for chunks without levels: headers built at once, then one join.

    Every chunk is its header (already padded to 8 bytes) then each value buffer followed by
    0..7 fill bytes; the join copies each byte once.  Returns ``None`` when chunks differ in
    buffer count.
    """
    counts = values.counts
    nchunks = len(counts)
    if values.dense is not None and nchunks:
        fast = _serialize_dense(values, values.dense, large)
        if fast is not None:
            return fast
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
    head_bytes = headers.tobytes()
    fills = [bytes([FILL]) * k for k in range(8)]
    fill_of = (padded - lens).reshape(-1).tolist()
    parts: list[Piece] = []
    for ci in range(nchunks):
        parts.append(head_bytes[ci * head_p : (ci + 1) * head_p])
        for j in range(ci * nb, (ci + 1) * nb):
            parts.append(flat[j])
            parts.append(fills[fill_of[j]])
    out = pa.py_buffer(b"".join(parts))  # wraps the joined bytes, no copy
    logs = np.maximum(np.frexp(np.asarray(counts, np.float64))[1].astype(np.int64) - 1, 0)  # log2
    logs[-1] = 0
    meta = ((words - 1) << 4) | logs
    return meta.astype(np.uint32 if large else np.uint16).tobytes(), out


def _serialize_dense(values: ValueChunks, dense: np.ndarray, large: bool) -> tuple[bytes, pa.Buffer] | None:
    """Frame single-buffer chunks of equal size (the last may be shorter) stored end to end.

    Each chunk is ``[level count 0][value size][fill to 8][values][fill to 8]``: every chunk but
    the last is one row of a 2-D array, filled in three whole-array assignments.  Returns
    ``None`` when the chunks are not laid out that way.
    """
    counts = values.counts
    nchunks = len(counts)
    src = dense.view(np.uint8).reshape(-1)
    size = values.dense_chunk_bytes if nchunks > 1 else len(src)
    last = len(src) - size * (nchunks - 1)
    if not 0 <= last <= size:
        return None
    vw = 4 if large else 2
    if max(size, last) >= 1 << (8 * vw):
        raise InvalidInputError("a mini-block value buffer is too large for its size field")
    head = 2 + vw
    head_p = head + _pad8(head)
    row = head_p + size + _pad8(size)
    last_row = head_p + last + _pad8(last)
    if not large and max(row, last_row) > 8 * 4096:
        raise InvalidInputError("a 2.1 mini-block chunk would exceed 32 KiB")
    nfull = nchunks - 1
    # from Arrow's memory pool, which reuses the pages of freed buffers (fresh numpy memory
    # would fault in page by page)
    buf = pa.allocate_buffer(nfull * row + last_row)
    out = np.frombuffer(buf, np.uint8)
    for k, (first, rows, width, nbytes) in enumerate(((0, nfull, row, size), (nfull * row, 1, last_row, last))):
        grid = out[first : first + rows * width].reshape(rows, width)
        grid[:, :2] = 0
        grid[:, 2:head] = np.frombuffer(nbytes.to_bytes(vw, "little"), np.uint8)
        grid[:, head:head_p] = FILL
        base = 0 if k == 0 else nfull * size
        grid[:, head_p : head_p + nbytes] = src[base : base + rows * nbytes].reshape(rows, nbytes)
        grid[:, head_p + nbytes :] = FILL
    words = np.full(nchunks, row // 8, np.int64)
    words[-1] = last_row // 8
    logs = np.maximum(np.frexp(np.asarray(counts, np.float64))[1].astype(np.int64) - 1, 0)  # log2
    logs[-1] = 0
    meta = ((words - 1) << 4) | logs
    return meta.astype(np.uint32 if large else np.uint16).tobytes(), buf
