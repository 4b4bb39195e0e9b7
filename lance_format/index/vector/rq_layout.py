"""RaBitQ storage as the search scores it: sign codes in row order, extended codes, factors.

``auxiliary.idx`` of an IVF_RQ segment keeps, per row, the sign bits interleaved per 32-row
block of its partition (``_rabit_codes``), the blocked extended codes (``__blocked_ex_codes``)
and float factors (upstream ``rust/lance-index/src/vector/bq/storage.rs``). Scoring
(:func:`lance_format.index.vector.rabitq.estimate`) wants them as :class:`Decoded` arrays. A
segment read for searching (``read_segment(lazy=True)``) allocates those arrays unfilled and
:class:`~lance_format.index.vector.partition_codes.PartitionCodes` decodes each partition's rows
into them when a query first probes it, as for PQ and SQ codes; an eagerly read segment decodes
every row at once (:func:`decode_rows`).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import matrix, numbers
from lance_format.errors import CorruptFileError
from lance_format.index.vector.rabitq_codes import EX_BLOCK, ex_values_of

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
#: Rows of one interleaved block of sign codes, and the block order of its first 16 rows
#: (``PERM0`` of upstream ``rust/lance-linalg/src/simd/dist_table.rs``).
BATCH = 32
PERM0 = np.array([0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15])
CODES = "_rabit_codes"
EX_CODES = "__blocked_ex_codes"
FACTORS = ("__add_factors", "__scale_factors", "__error_factors")
EX_FACTORS = ("__add_factors_ex", "__scale_factors_ex")


@dataclass(frozen=True)
class Decoded:
    """A segment's codes ready for scoring: sign codes, extended codes and the factors the
    estimate uses (the extended ones when there are extended codes).

    ``codes`` ``[dim / 16, n]`` (``uint16``, one row per 16 dimensions, column-major so that a
    query's lookups for one column of the probed rows read one contiguous run): sign-code byte
    ``2g`` of a row in the low byte of ``codes[g]``, byte ``2g + 1`` in the high byte (0 past the
    last byte when ``dim / 8`` is odd); bit ``i`` of byte ``b`` is dimension ``8b + i``.

    ``ex`` ``[n, len(ex_dims)]`` (``uint8``): each extended code as a number, column ``j`` holding
    dimension ``ex_dims[j]`` (at 4 extended bits the stored blocked order, low nibbles first, so
    decoding is two vectorised passes; a padding dimension of the last 64-dimension block is
    ``dim`` and weighs 0); ``None`` for one bit. A query scores them with one product per probed
    partition instead of one lookup per dimension pair.
    """

    codes: npt.NDArray[np.uint16]
    ex: U8 | None
    add: F32
    scale: F32
    ex_dims: npt.NDArray[np.intp] | None = None


def ex_dims(dim: int, ex_bits: int) -> npt.NDArray[np.intp]:
    """The dimension of each column of :attr:`Decoded.ex` (``dim`` for padding).

    At 4 extended bits the stored blocked bytes hold two dimensions each (``rabitq_codes.pack_blocked``:
    byte ``8k + j`` of a 64-dimension block holds dimension ``16k + j`` in its low nibble and
    ``16k + 8 + j`` in its high one), so the columns are every byte's low nibble, then every
    byte's high nibble; at other widths the dimensions in order.
    """
    if ex_bits == 4:
        blocks = -(-dim // EX_BLOCK)
        base = (np.arange(blocks) * EX_BLOCK)[:, None, None] + (np.arange(4) * 16)[None, :, None] \
            + np.arange(8)[None, None, :]
        lo = base.reshape(-1)
        out: npt.NDArray[np.intp] = np.minimum(np.concatenate([lo, lo + 8]), dim).astype(np.intp)
        return out
    return np.arange(dim, dtype=np.intp)


def unpack_partition(stored: U8) -> U8:
    """One partition's sign codes in row order (inverse of ``rabitq.pack_partition``)."""
    n, width = stored.shape
    full = n // BATCH * BATCH
    flat = stored.reshape(-1)
    blk = flat[:full * width].reshape(-1, width, BATCH)
    a, b = blk[:, :, :16].transpose(0, 2, 1), blk[:, :, 16:].transpose(0, 2, 1)
    out = np.empty((n, width), np.uint8)
    body = out[:full].reshape(-1, BATCH, width)
    body[:, PERM0, :] = (a & 15) | ((b & 15) << 4)
    body[:, PERM0 + 16, :] = (a >> 4) | (b & 0xF0)
    out[full:] = flat[full * width:].reshape(width, n - full).T
    return out


def columns_of(dim: int, ex_bits: int) -> list[str]:
    """The ``auxiliary.idx`` columns scoring reads (after ``_rowid``)."""
    return [CODES, *((EX_CODES, *EX_FACTORS[:2]) if ex_bits else FACTORS[:2])]


def empty(n: int, dim: int, ex_bits: int) -> Decoded:
    """Unfilled arrays for ``n`` rows (untouched pages cost no memory until a partition is decoded)."""
    dims = ex_dims(dim, ex_bits) if ex_bits else None
    return Decoded(_pages((-(-dim // 16), n), np.uint16),
                   None if dims is None else _pages((n, dims.size), np.uint8),
                   _pages((n,), np.float32), _pages((n,), np.float32), dims)


def _pages(shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A zero-filled array on an anonymous memory map: its pages are mapped as a query first writes
    them, in 4 KB pages. numpy's own large arrays ask for 2 MB pages, and faulting those in
    (zeroing 2 MB for each partition's first rows in it) cost ~2.5x the CPU of decoding the
    partition into 4 KB pages (1M x 128 IVF_RQ, queries probing 10 of 256 partitions)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if size == 0:
        return np.zeros(shape, dtype)
    # private: a forked worker filling partitions must not write into its parent's pages
    out: npt.NDArray[Any] = np.frombuffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE), dtype).reshape(shape)
    return out


def _f32(col: pa.ChunkedArray | pa.Array) -> F32:
    out: F32 = numbers(col).astype(np.float32, copy=False)
    return out


def _words(rows: U8) -> npt.NDArray[np.uint16]:
    """``[n, dim / 16]``: a partition's sign-code bytes (row order) two to a little-endian uint16."""
    n, width = rows.shape
    if width % 2:
        rows = np.concatenate([rows, np.zeros((n, 1), np.uint8)], axis=1)
    out: npt.NDArray[np.uint16] = np.ascontiguousarray(rows).view("<u2").astype(np.uint16, copy=False)
    return out


def fill(dec: Decoded, table: pa.Table, spans: list[tuple[int, int, int]], dim: int, ex_bits: int,
         packed: bool, where: str) -> None:
    """Decode rows of ``table`` (:func:`columns_of`) into ``dec``: each span ``(first row in the
    table, first row in the segment, rows)`` is one partition (sign codes interleave per partition).

    Raises:
        CorruptFileError: null code rows.
    """
    codes = matrix(table.column(CODES))
    ex = matrix(table.column(EX_CODES)) if ex_bits else None
    if codes is None or (ex_bits and ex is None):
        raise CorruptFileError(f"{where}: null RaBitQ code rows")
    add_name, scale_name = (EX_FACTORS if ex_bits else FACTORS)[:2]
    add, scale = _f32(table.column(add_name)), _f32(table.column(scale_name))
    for off, at, n in spans:
        part = codes[off:off + n].astype(np.uint8, copy=False)
        dec.codes[:, at:at + n] = _words(unpack_partition(part) if packed else part).T
        if ex is not None and dec.ex is not None:
            rows = ex[off:off + n].astype(np.uint8, copy=False)
            out = dec.ex[at:at + n]
            if ex_bits == 4:  # a blocked byte holds two dimensions' codes (ex_dims)
                half = rows.shape[1]
                np.bitwise_and(rows, 15, out=out[:, :half])
                np.right_shift(rows, 4, out=out[:, half:])
            else:
                out[:] = ex_values_of(np.ascontiguousarray(rows), dim, ex_bits)
        dec.add[at:at + n] = add[off:off + n]
        dec.scale[at:at + n] = scale[off:off + n]


def decode_rows(table: pa.Table, lengths: npt.NDArray[Any], dim: int, ex_bits: int, packed: bool,
                where: str) -> Decoded:
    """Every row of a storage table (:func:`fill` over each partition)."""
    dec = empty(table.num_rows, dim, ex_bits)
    starts = np.concatenate([[0], np.cumsum(lengths.astype(np.int64))[:-1]]).astype(np.int64)
    spans = [(int(s), int(s), int(n)) for s, n in zip(starts.tolist(), lengths.tolist(), strict=True) if n]
    fill(dec, table, spans, dim, ex_bits, packed, where)
    return dec


def describe(info: dict[str, Any]) -> tuple[int, int, bool]:
    """``(dimension, extended bits, packed)`` of a ``storage_metadata`` object."""
    return int(info["code_dim"]), int(info["num_bits"]) - 1, bool(info.get("packed", False))
