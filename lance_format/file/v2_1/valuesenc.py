"""Value compression for written mini-block pages (flat, inline bit-packing, variable, FSL)."""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.arrays import distinct
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.miniblock import (
    FLAT_CHUNK_BYTES,
    MAX_CHUNK_VALUES,
    Piece,
    ValueChunks,
    pow2_chunk,
    split_counts,
)

VAR_CHUNK_BYTES = 4 * 1024


def fixed_bytes(arr: pa.Array, bits: int) -> np.ndarray:
    """The raw value bytes of a fixed-width array (nulls keep whatever the buffer holds)."""
    n = len(arr)
    buf = arr.buffers()[1]
    if bits == 1:
        if buf is None:
            return np.zeros((n + 7) // 8, np.uint8)
        raw = np.frombuffer(buf, np.uint8)
        bools = np.unpackbits(raw, bitorder="little", count=arr.offset + n)[arr.offset :]
        return np.packbits(bools, bitorder="little")
    width = bits // 8
    if buf is None:
        return np.zeros(n * width, np.uint8)
    raw = np.frombuffer(buf, np.uint8)
    return raw[arr.offset * width : (arr.offset + n) * width]


def flat_chunks(data: np.ndarray, bits: int, n: int, cap: int = MAX_CHUNK_VALUES) -> ValueChunks:
    """Uncompressed values, a power-of-two number per chunk (like lance's ValueEncoder)."""
    if bits % 8 == 0:
        per_val = bits // 8
        k = pow2_chunk(min(cap, max(1, FLAT_CHUNK_BYTES // max(per_val, 1))))
    else:
        k = pow2_chunk(min(cap, max(8, FLAT_CHUNK_BYTES * 8 // bits)))
    counts = split_counts(n, k)
    if bits % 8 and k % 8:  # sub-byte values in chunks that do not end on byte boundaries
        bools = np.unpackbits(data, bitorder="little", count=n * bits)
        bufs_b: list[list[Piece]] = []
        pos_b = 0
        for c in counts:
            bufs_b.append(
                [np.packbits(bools[pos_b * bits : (pos_b + c) * bits], bitorder="little").tobytes()]
            )
            pos_b += c
        enc_b = pb.CompressiveEncoding()
        enc_b.flat.bits_per_value = bits
        return ValueChunks(counts, bufs_b, enc_b)
    dense = np.ascontiguousarray(data[: (n * bits + 7) // 8])
    enc = pb.CompressiveEncoding()
    enc.flat.bits_per_value = bits
    return ValueChunks(counts, [], enc, dense, k * bits // 8)


def inline_bitpack_chunks(values: np.ndarray, t: int) -> ValueChunks | None:
    """1024 values per chunk, each chunk ``[width word][FastLanes-packed words]``.

    Returns None when packing would not save at least 10%.
    """
    dtype = bitpack.uint_dtype(t)
    v = values.view(dtype) if values.dtype != dtype else values
    n = len(v)
    if n == 0:
        return None
    widths = bitpack.bit_widths(v, t)
    packed_size = int((widths * 1024 // 8).sum()) + len(widths) * (t // 8)
    if packed_size >= 0.9 * n * (t // 8):
        return None
    nblocks = len(widths)
    full = n // 1024
    blocks = v[: full * 1024].reshape(full, 1024)  # a view: only a partial last block is copied
    out: list[bytes | None] = [None] * nblocks
    if full < nblocks:
        tail = np.zeros(1024, dtype)
        tail[: n - full * 1024] = v[full * 1024 :]
        w_tail = int(widths[-1])
        out[-1] = np.array([w_tail], dtype).tobytes() + bitpack.pack_blocks(tail, w_tail, t).tobytes()
    for w in distinct(widths[:full]):
        sel = np.flatnonzero(widths[:full] == w)
        src = blocks if len(sel) == full else blocks[sel]
        packed = bitpack.pack_blocks(src.reshape(-1), int(w), t).reshape(len(sel), -1)
        head = np.array([w], dtype).tobytes()
        for j, i in enumerate(sel.tolist()):
            out[i] = head + packed[j].tobytes()
    counts = split_counts(n, 1024)
    enc = pb.CompressiveEncoding()
    enc.inline_bitpacking.uncompressed_bits_per_value = t
    return ValueChunks(counts, [[b] for b in out if b is not None], enc)


def variable_chunks(
    offsets: np.ndarray, data: np.ndarray, large: bool, cap: int = MAX_CHUNK_VALUES
) -> ValueChunks:
    """Each chunk: ``n + 1`` offsets (from the chunk start) then the bytes, padded to 4/8 with 72."""
    counts, raw = _variable_raw(offsets, data, large, cap)
    return ValueChunks(counts, [[b] for b in raw], _variable_encoding(large))


#: Chunks compressed before :func:`compressed_variable_chunks` judges whether compression pays.
PROBE_CHUNKS = 16


def compressed_variable_chunks(
    offsets: np.ndarray,
    data: np.ndarray,
    large: bool,
    cap: int,
    scheme: str,
    level: int | None,
    *,
    max_ratio: float = 1.0,
) -> ValueChunks:
    """``general_wrap(variable_chunks(...))`` compressing each chunk as it is built.

    Only one uncompressed chunk exists at a time (a page's worth less memory per encode thread);
    when compression does not pay, the plain chunks are built again, as :func:`general_wrap`
    would have returned them.

    Args:
        offsets: The ``n + 1`` value offsets.
        data: The value bytes the offsets point into.
        large: 64-bit offsets.
        cap: Largest number of values per chunk.
        scheme: ``"zstd"`` or ``"lz4"``.
        level: Compression level (None: the codec's default).
        max_ratio: Compressed / plain bytes above which the plain chunks are written instead.
            Below 1.0 the first :data:`PROBE_CHUNKS` chunks decide early, so a page that will
            not compress well enough costs only a few chunks' compression.
    """
    counts, raw = _variable_raw(offsets, data, large, cap)
    original = 0
    compressed = 0
    packed: list[list[Piece]] = []
    for chunk in raw:
        original += len(chunk)
        piece = compress_buffer(scheme, chunk, level)
        compressed += len(piece)
        packed.append([piece])
        if max_ratio < 1.0 and len(packed) == PROBE_CHUNKS and compressed > max_ratio * original:
            return variable_chunks(offsets, data, large, cap)
    if original < 4096 or compressed >= original or compressed > max_ratio * original:
        return variable_chunks(offsets, data, large, cap)
    return ValueChunks(counts, packed, _general_encoding(scheme, level, _variable_encoding(large)))


def _variable_encoding(large: bool) -> pb.CompressiveEncoding:
    enc = pb.CompressiveEncoding()
    enc.variable.offsets.flat.bits_per_value = 64 if large else 32
    return enc


def _variable_raw(
    offsets: np.ndarray, data: np.ndarray, large: bool, cap: int
) -> tuple[list[int], Iterator[bytes]]:
    """Chunk counts and a generator of the uncompressed chunks of :func:`variable_chunks`."""
    n = len(offsets) - 1
    width = 8 if large else 4
    sizes = np.diff(offsets)
    k = pow2_chunk(cap)
    while k > 1:
        # worst chunk of k values must stay below the target
        ends = np.minimum(np.arange(0, n, k) + k, n)
        chunk_bytes = offsets[ends] - offsets[np.arange(0, n, k)] if n else np.zeros(0)
        if not len(chunk_bytes) or int(chunk_bytes.max()) + (k + 1) * width <= VAR_CHUNK_BYTES * 2:
            break
        k //= 2
    del sizes
    counts = split_counts(n, k)
    c_arr = np.asarray(counts, np.int64)
    m = len(counts)
    pos = np.zeros(m, np.int64)
    np.cumsum(c_arr[:-1], out=pos[1:])
    # every chunk's offsets at once: chunk i holds offsets[pos_i .. pos_i + c_i], rebased to the
    # chunk's first byte and shifted past its own offsets block
    reps = c_arr + 1
    idx = np.arange(n + m, dtype=np.int64) - np.repeat(np.arange(m, dtype=np.int64), reps)
    shift = np.repeat(reps * width - offsets[pos], reps)
    local = (offsets[idx] + shift).astype(np.uint64 if large else np.uint32).tobytes()
    ends = np.cumsum(reps) * width
    lstart = (ends - reps * width).tolist()
    dstart = offsets[pos].tolist()
    dend = offsets[pos + c_arr].tolist()
    pads = ((-(reps * width + offsets[pos + c_arr] - offsets[pos])) % width).tolist()
    body = np.ascontiguousarray(data).data  # a memoryview: slicing it copies nothing
    fills = [b"\x48" * j for j in range(width)]
    chunks = (
        b"".join((local[ls:le], body[ds:de], fills[p]))
        for ls, le, ds, de, p in zip(lstart, ends.tolist(), dstart, dend, pads, strict=True)
    )
    return counts, chunks


def fsl_chunks(
    items: np.ndarray,
    item_bits: int,
    dim: int,
    validity: np.ndarray | None,
    n: int,
    cap: int = MAX_CHUNK_VALUES,
) -> ValueChunks:
    """Fixed-size lists: optional item-validity bitmap buffer, then the flat items, per chunk."""
    row_bits = item_bits * dim + (dim if validity is not None else 0)
    k = pow2_chunk(min(cap, max(1, FLAT_CHUNK_BYTES * 8 // max(row_bits, 1))))
    if item_bits % 8 and k * dim % 8:
        k = max(k, 8)
    counts = split_counts(n, k)
    if validity is None and (dim * item_bits) % 8 == 0:
        dense = np.ascontiguousarray(items[: n * dim * item_bits // 8])
        enc_d = pb.CompressiveEncoding()
        enc_d.fixed_size_list.items_per_value = dim
        enc_d.fixed_size_list.has_validity = False
        enc_d.fixed_size_list.values.flat.bits_per_value = item_bits
        return ValueChunks(counts, [], enc_d, dense, k * dim * item_bits // 8)
    bufs: list[list[Piece]] = []
    pos = 0
    for c in counts:
        chunk: list[Piece] = []
        if validity is not None:
            chunk.append(np.packbits(validity[pos * dim : (pos + c) * dim], bitorder="little").tobytes())
        a = pos * dim * item_bits // 8
        b = ((pos + c) * dim * item_bits + 7) // 8
        chunk.append(items[a:b].tobytes())
        bufs.append(chunk)
        pos += c
    enc = pb.CompressiveEncoding()
    enc.fixed_size_list.items_per_value = dim
    enc.fixed_size_list.has_validity = validity is not None
    enc.fixed_size_list.values.flat.bits_per_value = item_bits
    return ValueChunks(counts, bufs, enc)


def rle_chunks(values: np.ndarray, bits: int, cap: int = MAX_CHUNK_VALUES) -> ValueChunks:
    """Run-length encoding: per chunk a buffer of run values and a buffer of u8 run lengths.

    Chunks hold 2048 values (the last one the rest); runs longer than 255 are split.
    """
    dtype = bitpack.uint_dtype(bits)
    v = values.view(dtype) if values.dtype != dtype else values
    n = len(v)
    counts = split_counts(n, pow2_chunk(min(2048, cap)))
    bufs: list[list[Piece]] = []
    pos = 0
    for c in counts:
        part = v[pos : pos + c]
        change = np.flatnonzero(part[1:] != part[:-1]) + 1
        starts = np.concatenate([[0], change])
        lens = np.diff(np.concatenate([starts, [c]]))
        reps = (lens + 254) // 255
        run_vals = np.repeat(part[starts], reps)
        run_lens = np.full(int(reps.sum()), 255, np.int64)
        last = np.cumsum(reps) - 1
        run_lens[last] = lens - (reps - 1) * 255
        bufs.append([run_vals.tobytes(), run_lens.astype(np.uint8).tobytes()])
        pos += c
    enc = pb.CompressiveEncoding()
    enc.rle.values.flat.bits_per_value = bits
    enc.rle.run_lengths.flat.bits_per_value = 8
    return ValueChunks(counts, bufs, enc)


def run_count(values: np.ndarray) -> int:
    """Number of runs of equal adjacent values."""
    if len(values) == 0:
        return 0
    return int((values[1:] != values[:-1]).sum()) + 1


def bss_chunks(values: np.ndarray, bits: int, cap: int = MAX_CHUNK_VALUES) -> ValueChunks:
    """Byte-stream split: per chunk (1024 f32 / 512 f64 values) byte ``j`` of every value, then ``j + 1``."""
    width = bits // 8
    k = pow2_chunk(min(1024 if bits == 32 else 512, cap))
    n = len(values) // width if values.dtype == np.uint8 else len(values)
    raw = values.view(np.uint8).reshape(n, width)
    counts = split_counts(n, k)
    bufs: list[list[Piece]] = []
    pos = 0
    for c in counts:
        bufs.append([np.ascontiguousarray(raw[pos : pos + c].T).tobytes()])
        pos += c
    enc = pb.CompressiveEncoding()
    enc.byte_stream_split.values.flat.bits_per_value = bits
    return ValueChunks(counts, bufs, enc)


# Stateless codec handles by (algorithm, level): a few hundred bytes each, and the key domain is
# the handful of algorithms times the valid levels; functools' bounded LRU is all this needs.
@functools.lru_cache(maxsize=64)
def _codec(name: str, level: int | None) -> pa.Codec:
    return pa.Codec(name, compression_level=level) if level is not None else pa.Codec(name)


def _optional_zstandard() -> Any:
    try:
        return importlib.import_module("zstandard")
    except ImportError:
        return None


# Arrow's zstd codec sets up a fresh compression context on every call, which costs about as
# much as compressing a 4 KiB mini-block chunk; the ``zstandard`` package (when installed) keeps
# one context per thread and level.  Both write standard zstd frames.
_ZSTANDARD = _optional_zstandard()
_LOCAL = threading.local()


def _zstd_compress(data: Piece, level: int) -> bytes:
    if _ZSTANDARD is None:
        return bytes(_codec("zstd", level).compress(data, asbytes=True))
    contexts: dict[int, Any] = _LOCAL.__dict__.setdefault("zstd", {})
    ctx = contexts.get(level)
    if ctx is None:  # contexts are not thread-safe: one per thread (and level)
        ctx = contexts[level] = _ZSTANDARD.ZstdCompressor(level=level)
    return bytes(ctx.compress(data))


def compress_buffer(scheme: str, data: Piece, level: int | None) -> bytes:
    """lance's buffer compression: LZ4 block with u32 size prefix, or zstd with u64 size prefix."""
    if scheme == "lz4":
        return len(data).to_bytes(4, "little") + bytes(_codec("lz4_raw", None).compress(data, asbytes=True))
    lvl = level if level is not None else 3
    return len(data).to_bytes(8, "little") + _zstd_compress(data, lvl)


def general_wrap(chunks: ValueChunks, scheme: str, level: int | None) -> ValueChunks:
    """Compress the first buffer of every chunk (lance's GeneralMiniBlockCompressor)."""
    original = sum(len(b[0]) for b in chunks.buffers)
    if original < 4096:
        return chunks
    new: list[list[Piece]] = []
    for b in chunks.buffers:
        new.append([compress_buffer(scheme, b[0], level), *b[1:]])
    if sum(len(b[0]) for b in new) >= original:
        return chunks
    return ValueChunks(chunks.counts, new, _general_encoding(scheme, level, chunks.encoding))


def _general_encoding(scheme: str, level: int | None, inner: pb.CompressiveEncoding) -> pb.CompressiveEncoding:
    enc = pb.CompressiveEncoding()
    enc.general.compression.scheme = (
        pb.COMPRESSION_ALGORITHM_LZ4 if scheme == "lz4" else pb.COMPRESSION_ALGORITHM_ZSTD
    )
    if level is not None:
        enc.general.compression.level = level
    enc.general.values.CopyFrom(inner)
    return enc
