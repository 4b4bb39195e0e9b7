"""XXH64 (seed 0) of many values at once, as upstream's bloom filters hash them.

``rust/lance-index/src/scalar/bloomfilter/sbbf.rs`` hashes a value's bytes with XXH64 (seed 0):
little-endian bytes for numbers, dates and times (``as_bytes.rs``), UTF-8 for strings. Here
the hash runs vectorised over a column: fixed-width values in place over cache-sized chunks,
variable-length ones a length at a time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

U64 = npt.NDArray[np.uint64]

_P1, _P2, _P3, _P4, _P5 = (np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F),
                           np.uint64(0x165667B19E3779F9), np.uint64(0x85EBCA77C2B2AE63),
                           np.uint64(0x27D4EB2F165667C5))


def _rotl(x: U64, r: int) -> U64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: U64, lane: U64) -> U64:
    return _rotl(acc + lane * _P2, 31) * _P1


def _merge(h: U64, v: U64) -> U64:
    return (h ^ _round(np.zeros_like(v), v)) * _P1 + _P4


def _xxh64_same_length(rows: npt.NDArray[np.uint8]) -> U64:
    """XXH64 of each row of a ``(n, length)`` byte matrix."""
    n, length = rows.shape

    def lanes(a: int, w: int) -> U64:
        out: U64 = np.ascontiguousarray(rows[:, a:a + w]).view(f"<u{w}").reshape(n)
        return out

    pos = 0
    with np.errstate(over="ignore"):
        if length >= 32:
            seed = np.zeros(n, np.uint64)
            v1, v2, v3, v4 = seed + _P1 + _P2, seed + _P2, seed.copy(), seed - _P1
            while pos + 32 <= length:
                v1 = _round(v1, lanes(pos, 8))
                v2 = _round(v2, lanes(pos + 8, 8))
                v3 = _round(v3, lanes(pos + 16, 8))
                v4 = _round(v4, lanes(pos + 24, 8))
                pos += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = _merge(h, v)
        else:
            h = np.full(n, _P5, np.uint64)
        h = h + np.uint64(length)
        while pos + 8 <= length:
            h = _rotl(h ^ _round(np.zeros(n, np.uint64), lanes(pos, 8)), 27) * _P1 + _P4
            pos += 8
        if pos + 4 <= length:
            h = _rotl(h ^ (lanes(pos, 4).astype(np.uint64) * _P1), 23) * _P2 + _P3
            pos += 4
        while pos < length:
            h = _rotl(h ^ (rows[:, pos].astype(np.uint64) * _P5), 11) * _P1
            pos += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h


#: Up to this many fixed-width values, :func:`hashes` runs on Python ints (:func:`xxh64_few`).
_FEW = 8

#: Values hashed per step of :func:`_xxh64_fixed`: its two work arrays (512 KiB) stay in the CPU's cache.
_HASH_CHUNK = 1 << 15


def _rotl_into(x: U64, r: int, tmp: U64) -> None:
    np.right_shift(x, 64 - r, out=tmp)
    np.left_shift(x, r, out=x)
    np.bitwise_or(x, tmp, out=x)


def _xxh64_fixed(raw: npt.NDArray[np.generic], width: int) -> U64:
    """XXH64 (seed 0) of each value's ``width`` little-endian bytes (1, 2, 4 or 8), as :func:`_xxh64_same_length`.

    Each step runs in place over a cache-sized chunk: the whole-column expression allocated a
    new array per operation, and writing those (not the arithmetic) took most of a build's hash.
    """
    lanes = np.ascontiguousarray(raw).view(f"<u{width}")
    n = lanes.size
    out = np.empty(n, np.uint64)
    tmp = np.empty(min(n, _HASH_CHUNK), np.uint64)
    first = _P5 + np.uint64(width)
    with np.errstate(over="ignore"):
        for a in range(0, n, _HASH_CHUNK):  # one step per chunk of values
            b = min(n, a + _HASH_CHUNK)
            h, t = out[a:b], tmp[:b - a]
            if width == 8:
                np.multiply(lanes[a:b], _P2, out=h)
                _rotl_into(h, 31, t)
                h *= _P1
                h ^= first
                _rotl_into(h, 27, t)
                h *= _P1
                h += _P4
            elif width == 4:
                np.copyto(h, lanes[a:b], casting="unsafe")
                h *= _P1
                h ^= first
                _rotl_into(h, 23, t)
                h *= _P2
                h += _P3
            else:
                h[:] = first
                for i in range(width):  # one step per byte (at most two)
                    np.copyto(t, (lanes[a:b] >> (8 * i)) & 0xFF, casting="unsafe")
                    t *= _P5
                    h ^= t
                    _rotl_into(h, 11, t)
                    h *= _P1
            np.right_shift(h, 33, out=t)
            h ^= t
            h *= _P2
            np.right_shift(h, 29, out=t)
            h ^= t
            h *= _P3
            np.right_shift(h, 32, out=t)
            h ^= t
    return out


_M64 = (1 << 64) - 1
_I1, _I2, _I3, _I4, _I5 = (int(p) for p in (_P1, _P2, _P3, _P4, _P5))


def _irotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def xxh64_few(lanes: list[int], width: int) -> list[int]:
    """:func:`_xxh64_fixed` of a few values (unsigned ``width``-byte lanes) in Python ints.

    A query probes one value or a few: the vectorised hash costs ~20 numpy calls (~100 µs)
    whatever the count, the same steps on Python ints a few microseconds.
    """
    out = []
    for lane in lanes:
        h = (_I5 + width) & _M64
        if width == 8:
            h ^= (_irotl((lane * _I2) & _M64, 31) * _I1) & _M64
            h = (_irotl(h, 27) * _I1 + _I4) & _M64
        elif width == 4:
            h ^= (lane * _I1) & _M64
            h = (_irotl(h, 23) * _I2 + _I3) & _M64
        else:
            for i in range(width):
                h ^= (((lane >> (8 * i)) & 0xFF) * _I5) & _M64
                h = (_irotl(h, 11) * _I1) & _M64
        h ^= h >> 33
        h = (h * _I2) & _M64
        h ^= h >> 29
        h = (h * _I3) & _M64
        h ^= h >> 32
        out.append(h)
    return out


def xxh64(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> U64:
    """XXH64 (seed 0) of ``data[starts[i]:starts[i]+lengths[i]]`` for every ``i``.

    Inputs are hashed a length at a time, each as one byte matrix, so the work is vectorised
    over rows (texts of a column have few distinct lengths).
    """
    out = np.empty(starts.size, np.uint64)
    if starts.size == 0:
        return out
    order = np.argsort(lengths, kind="stable")
    sl = lengths[order]
    cuts = np.concatenate(([0], np.flatnonzero(sl[1:] != sl[:-1]) + 1, [sl.size]))
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):  # one step per distinct length
        which = order[a:b]
        length = int(sl[a])
        idx = starts[which][:, None] + np.arange(length, dtype=np.int64)[None, :]
        out[which] = _xxh64_same_length(data[idx] if length else np.empty((b - a, 0), np.uint8))
    return out


def hashes(values: pa.Array) -> U64:
    """XXH64 of each non-null value's bytes, as upstream's ``AsBytes`` lays them out (nulls dropped)."""
    if values.null_count:
        values = values.filter(pc.is_valid(values))
    typ = values.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ):
        values = values.cast(pa.large_binary())
    if pa.types.is_large_binary(values.type):
        bufs = values.buffers()
        offsets = np.frombuffer(bufs[1], np.int64, len(values) + 1, values.offset * 8)
        data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
        return xxh64(data, offsets[:-1], offsets[1:] - offsets[:-1])
    width = typ.bit_width // 8
    storage = values.view(pa.int64() if width == 8 else pa.int32() if width == 4 else
                          pa.int16() if width == 2 else pa.int8()) if not pa.types.is_integer(typ) else values
    raw = np.ascontiguousarray(storage.to_numpy(zero_copy_only=False)).astype(f"<i{width}", copy=False)
    if raw.size <= _FEW:
        return np.array(xxh64_few(raw.view(f"<u{width}").tolist(), width), np.uint64)
    # Every value has the same length: its bytes are already the lanes the hash reads, so no
    # per-byte gather (the gather cost ~10x the hash itself).
    return _xxh64_fixed(raw, width)
