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


#: Extended bits up to which two dimensions' codes share a byte of :attr:`Decoded.pairs`.
PAIR_BITS = 4


@dataclass(frozen=True)
class Decoded:
    """A segment's codes ready for scoring: sign codes in row order ``[n, dim / 8]`` (bit ``i`` of
    byte ``b``: dimension ``8b + i``), the extended codes and the factors the estimate uses (the
    extended ones when there are extended codes).

    The extended codes are ``pairs`` (two dimensions' codes per byte, ``pair_dims[i]`` the
    dimensions in the low ``ex_bits`` of byte ``i`` and above them: a query scores them with one
    lookup table per pair, as the sign codes) up to :data:`PAIR_BITS` extended bits, else ``ex``
    ``[n, dim]``; both ``None`` for one bit.

    ``codes`` and ``pairs`` hold each byte plus its position times the values a byte can take
    (256 for a sign byte, ``2^(2·ex_bits)`` for a pair), in ``uint16`` (``uint32`` for very wide
    vectors): the index into the query's concatenated tables, so a query's lookups need no index
    arithmetic (a third less CPU; the same memory as bytes and 8-bit codes).
    """

    codes: U8
    ex: U8 | None
    add: F32
    scale: F32
    pairs: U8 | None = None
    pair_dims: npt.NDArray[np.intp] | None = None


def pair_dims(dim: int, ex_bits: int) -> npt.NDArray[np.intp]:
    """``[pairs, 2]``: the dimensions whose codes share each byte of :attr:`Decoded.pairs`.

    At 4 extended bits those are the stored blocked bytes as they are (``rabitq_codes.pack_blocked``:
    byte ``8k + j`` of a 64-dimension block holds dimension ``16k + j`` and ``16k + 8 + j``; the
    padding dimensions of the last block, at ``dim`` and above, hold 0), so decoding copies them;
    at fewer bits, dimensions ``2i`` and ``2i + 1``.
    """
    if ex_bits == 4:
        blocks = -(-dim // EX_BLOCK)
        base = (np.arange(blocks) * EX_BLOCK)[:, None, None] + (np.arange(4) * 16)[None, :, None] \
            + np.arange(8)[None, None, :]
        lo = base.reshape(-1)
        out: npt.NDArray[np.intp] = np.stack([lo, lo + 8], axis=1).astype(np.intp)
        return out
    even = np.arange(0, dim, 2)
    return np.stack([even, even + 1], axis=1).astype(np.intp)


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
    paired = 0 < ex_bits <= PAIR_BITS
    dims = pair_dims(dim, ex_bits) if paired else None
    pairs = None if dims is None else np.empty((n, dims.shape[0]), _index_type(dims.shape[0] << (2 * ex_bits)))
    return Decoded(np.empty((n, dim // 8), _index_type((dim // 8) << 8)),
                   np.empty((n, dim), np.uint8) if ex_bits and not paired else None,
                   np.empty(n, np.float32), np.empty(n, np.float32), pairs, dims)


def _index_type(size: int) -> type[np.unsignedinteger[Any]]:
    return np.uint16 if size <= 1 << 16 else np.uint32


def _positions(width: int, values: int, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
    """``[width]``: each column's offset into the concatenated tables (``values`` entries each)."""
    out: npt.NDArray[Any] = (np.arange(width, dtype=np.int64) * values).astype(dtype)
    return out


def _f32(col: pa.ChunkedArray | pa.Array) -> F32:
    out: F32 = numbers(col).astype(np.float32, copy=False)
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
    byte_at = _positions(dec.codes.shape[1], 256, dec.codes.dtype)
    pairs = dec.pairs if dec.pairs is not None else np.empty((0, 0), np.uint16)
    pair_at = _positions(pairs.shape[1], 1 << (2 * ex_bits), pairs.dtype)
    for off, at, n in spans:
        part = codes[off:off + n].astype(np.uint8, copy=False)
        np.add(unpack_partition(part) if packed else part, byte_at, out=dec.codes[at:at + n])
        if ex is not None and ex_bits == 4 and dec.pairs is not None:
            np.add(ex[off:off + n], pair_at, out=dec.pairs[at:at + n])  # a byte per dimension pair already
        elif ex is not None:
            values = ex_values_of(np.ascontiguousarray(ex[off:off + n], np.uint8), dim, ex_bits)
            if dec.pairs is not None:
                np.add(values[:, 0::2] | (values[:, 1::2] << ex_bits), pair_at, out=dec.pairs[at:at + n])
            elif dec.ex is not None:
                dec.ex[at:at + n] = values
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
