"""RaBitQ (``IVF_RQ``) quantization: the fast rotation, sign codes, extended codes and factors.

What pylance 14.0.2 stores per indexed vector (verified value for value on its files; upstream
``rust/lance-index/src/vector/bq/{builder,transform,rotation,ex_dot,storage}.rs``):

* the residual ``r = x - c`` to the partition's centroid (``x`` normalized for cosine; the unit
  centroid for dot), rotated by a *fast rotation*: four rounds of "flip the signs the round's
  bytes select (LSB first), Walsh–Hadamard transform, scale by ``1/sqrt(dim)``"; a dimension
  that is not a power of two transforms the head and the tail alternately, mixes the halves
  (Kac walk) every round and is scaled by 1/4 at the end;
* ``_rabit_codes``: one bit per rotated dimension (set when the value's sign bit is clear),
  LSB first. With ``packed: true`` every partition's codes are interleaved in blocks of 32 rows
  for the SIMD scanner (:func:`pack_partition`; the rows after the last full block transposed);
* ``__add_factors`` / ``__scale_factors`` / ``__error_factors``: the corrections that turn the
  code's inner product with the rotated query into a distance estimate (:func:`_factors`);
* for ``num_bits > 1``, ``__blocked_ex_codes``: ``num_bits - 1`` more bits per dimension, the
  magnitude grid point that best aligns with the residual (upstream's exact search of the
  rescale factor, :func:`~lance_format.index.vector.rabitq_codes.ex_values`), bit-interleaved in
  64-dimension blocks (:mod:`~lance_format.index.vector.rabitq_codes`), with their own
  ``__add_factors_ex`` / ``__scale_factors_ex``.

Inside a build a vector's quantized form travels as one uint8 *payload row* (codes, the
factors' float32 bytes, extended codes, their factors), so the generic sort-by-partition and
remap steps of :mod:`lance_format.index.vector.build` treat it like PQ codes.
"""

from __future__ import annotations

import functools
import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index.vector.blas import one_blas_thread
from lance_format.index.vector.distance import F32, Metric
from lance_format.index.vector.layout import RQStorage
from lance_format.index.vector.rabitq_codes import EX_BLOCK, ex_values, pack_blocked
from lance_format.index.vector.rq_layout import (
    BATCH,
    EX_CODES,
    EX_FACTORS,
    FACTORS,
    PERM0,
    Decoded,
    decode_rows,
)
from lance_format.index.vector.rq_layout import unpack_partition as unpack_partition

U8 = npt.NDArray[np.uint8]
ROUNDS = 4
#: pylance's default and accepted bits per dimension (1 sign bit + up to 8 extended bits).
DEFAULT_NUM_BITS = 5
MAX_NUM_BITS = 9
_ERROR_EPS = np.float32(1.9)
_FACTORS = FACTORS
_EX_FACTORS = EX_FACTORS


@dataclass(frozen=True)
class RabitqModel:
    """The quantizer shared by every task of a segment: rotation signs and bit width."""

    signs: U8
    dim: int
    num_bits: int = DEFAULT_NUM_BITS

    @property
    def ex_bits(self) -> int:
        """Extended bits per dimension (``num_bits - 1``)."""
        return self.num_bits - 1

    @property
    def code_bytes(self) -> int:
        """Bytes of a row's sign code."""
        return (self.dim + 7) // 8

    @property
    def ex_bytes(self) -> int:
        """Bytes of a row's blocked extended code (``0`` for one bit)."""
        return -(-self.dim // EX_BLOCK) * EX_BLOCK * self.ex_bits // 8

    @property
    def width(self) -> int:
        """Bytes of a payload row."""
        return self.code_bytes + 12 + (self.ex_bytes + 8 if self.ex_bits else 0)

    def metadata(self) -> dict[str, Any]:
        """``storage_metadata`` of ``auxiliary.idx``, in pylance's key order."""
        return {"rotate_mat_position": None, "fast_rotation_signs": [int(b) for b in self.signs],
                "rotation_type": "fast", "code_dim": self.dim, "num_bits": self.num_bits, "packed": True,
                "query_estimator": "raw_query"}


def new_model(dim: int, num_bits: int, seed: int = 42) -> RabitqModel:
    """A quantizer with seeded random rotation signs (the same data gives the same segment).

    Raises:
        InvalidInputError: a dimension not divisible by 8 or ``num_bits`` outside 1..9.
    """
    if dim % 8:
        raise InvalidInputError(f"IVF_RQ: vector dimension must be divisible by 8, got {dim}")
    if not 1 <= num_bits <= MAX_NUM_BITS:
        raise InvalidInputError(f"IVF_RQ: num_bits must be between 1 and {MAX_NUM_BITS}, got {num_bits}")
    signs = np.random.default_rng(seed).integers(0, 256, ROUNDS * ((dim + 7) // 8), dtype=np.uint8)
    return RabitqModel(signs, dim, num_bits)


def build_rq_model(dimension: int, num_bits: int = DEFAULT_NUM_BITS) -> str:
    """A fresh rotation as pylance's ``lance.lance.indices.build_rq_model`` JSON: pass the same string
    as ``rabitq_model`` to every ``create_index_uncommitted`` of a distributed IVF_RQ build.

    Raises:
        InvalidInputError: a dimension not divisible by 8 or ``num_bits`` outside 1..9.
    """
    model = new_model(dimension, num_bits, seed=int(np.random.default_rng().integers(1 << 62)))
    return json.dumps({**model.metadata(), "packed": False}, separators=(",", ":"))


def given_model(text: str, dim: int, num_bits: int) -> RabitqModel:
    """The rotation of a ``rabitq_model`` JSON string, checked against the build (pylance's checks).

    Raises:
        InvalidInputError: not such a JSON object, another bit width or dimension, a matrix rotation.
    """
    try:
        md = json.loads(text)
        model = RabitqModel(np.asarray(md["fast_rotation_signs"], np.uint8), int(md["code_dim"]),
                            int(md["num_bits"]))
    except (TypeError, ValueError, KeyError) as exc:
        raise InvalidInputError(f"IVF_RQ: rabitq_model is not a fast-rotation model JSON: {exc}") from exc
    if model.num_bits != num_bits:
        raise InvalidInputError(f"IVF_RQ: rabitq_model num_bits={model.num_bits} does not match requested "
                                f"num_bits={num_bits}")
    if model.dim != dim:
        raise InvalidInputError(f"IVF_RQ: rabitq_model dimension={model.dim} does not match vector dimension={dim}")
    if model.signs.size != ROUNDS * ((dim + 7) // 8):
        raise InvalidInputError(f"IVF_RQ: rabitq_model fast_rotation_signs length={model.signs.size} does not "
                                f"match expected length={ROUNDS * ((dim + 7) // 8)} for dimension={dim}")
    return model


def model_of(st: RQStorage) -> RabitqModel:
    """The quantizer of an existing segment (ours or pylance's).

    Raises:
        NotSupportedError: a matrix rotation (pylance 14.0.2 writes only the fast one).
    """
    md = st.metadata
    if md.get("rotation_type", "fast") != "fast" or md.get("fast_rotation_signs") is None:
        raise NotSupportedError("IVF_RQ segments with a matrix rotation are not supported")
    return RabitqModel(np.asarray(md["fast_rotation_signs"], np.uint8), int(md["code_dim"]), int(md["num_bits"]))


# -- rotation -------------------------------------------------------------------------------------

def _fwht(t: F32) -> F32:
    """Walsh–Hadamard butterflies over the first axis (a power of two) of transposed rows, unscaled.

    Working on the transpose makes every stage's ``a ± b`` one long contiguous pass (stages
    that pair neighbouring dimensions are slow as strided views of untransposed rows); each
    stage writes into a second buffer. The float operations are upstream's, so are the bits.
    """
    dim = t.shape[0]
    src, dst = t, np.empty_like(t)
    h = 1
    while h < dim:
        v, w = src.reshape(dim // (2 * h), 2, -1), dst.reshape(dim // (2 * h), 2, -1)
        np.add(v[:, 0], v[:, 1], out=w[:, 0])
        np.subtract(v[:, 0], v[:, 1], out=w[:, 1])
        src, dst = dst, src
        h *= 2
    return src


def rotate(x: npt.NDArray[np.generic], signs: U8) -> F32:
    """Rows of ``x`` under pylance's fast rotation with these sign bytes (float32).

    Computed on the transposed rows (one row per dimension), so sign flips, butterflies and
    the halves' mixing are contiguous passes over the vectors.
    """
    t: F32 = np.array(np.asarray(x).T, dtype=np.float32, order="C")
    dim, n = t.shape
    per_round = (dim + 7) // 8
    trunc = 1 << (dim.bit_length() - 1)
    scale = np.float32(1.0 / np.sqrt(np.float32(trunc)))
    half = dim // 2
    for r in range(ROUNDS):
        flip = np.unpackbits(signs[r * per_round:(r + 1) * per_round], bitorder="little")[:dim].astype(bool)
        t[flip] = -t[flip]  # exact, as multiplying by -1
        if trunc == dim:
            t = _fwht(t)
            t *= scale
            continue
        part = slice(0, trunc) if r % 2 == 0 else slice(dim - trunc, dim)
        block = _fwht(np.ascontiguousarray(t[part]))
        t[part] = block * scale
        a = t[:half].copy()
        t[:half] += t[half:2 * half]
        t[half:2 * half] = a - t[half:2 * half]
    if trunc != dim:
        t *= np.float32(0.25)
    out: F32 = np.ascontiguousarray(t.T)
    return out


@functools.lru_cache(maxsize=16)
def _rotation_matrix(signs: bytes, dim: int) -> npt.NDArray[np.float64]:
    """``[dim, dim]``: the rotation as a matrix (row ``i``: the image of unit vector ``i``)."""
    m = rotate(np.eye(dim, dtype=np.float32), np.frombuffer(signs, np.uint8)).astype(np.float64)
    m.flags.writeable = False
    return m


def rotate_rows(x: npt.NDArray[np.generic], signs: U8) -> F32:
    """:func:`rotate` of many rows as one matrix product (for encoding).

    The rotation is linear, so ``x @ M`` with ``M`` the rotated identity is the same map; one
    BLAS product (in float64) is ~2x faster than the butterflies' 30-odd passes over the rows. Its
    sums round differently (values within ~1e-7 of the butterflies'; a sign code flips only for a
    component within that of zero, ~1 in a million); one BLAS thread, as the encode tasks run side
    by side.
    """
    x32 = np.asarray(x, np.float32)
    m = _rotation_matrix(np.ascontiguousarray(signs, np.uint8).tobytes(), x32.shape[1])
    out: F32 = np.empty(x32.shape, np.float32)
    with one_blas_thread():
        # float64 sums rounded to float32 give each row the same values however many rows a
        # task holds (a float32 product's last bit follows the kernel BLAS picks for the
        # matrix's shape), so a build cut into tasks writes what one task writes; chunks keep
        # the float64 copy in cache
        for lo in range(0, len(x32), _ROTATE_CHUNK):
            out[lo:lo + _ROTATE_CHUNK] = np.matmul(x32[lo:lo + _ROTATE_CHUNK].astype(np.float64), m)
    return out


_ROTATE_CHUNK = 4096


# -- encoding -------------------------------------------------------------------------------------

def _ratio(num: F32, den: F32) -> F32:
    out: F32 = np.divide(num, den, out=np.zeros_like(num), where=den != 0).astype(np.float32)
    return out


def _factors(metric: Metric, norm_sq: F32, res_dot: F32, cent_dot: F32, res_cent: F32) -> tuple[F32, F32]:
    """``(add, scale)`` of one code (``transform.rs`` ``compute_row_factors``); cosine is l2 of
    normalized vectors."""
    corr = _ratio(norm_sq * cent_dot, res_dot)
    if metric == "dot":
        return (np.float32(1.0) - res_cent + corr).astype(np.float32), _ratio(-norm_sq, res_dot)
    return (norm_sq + np.float32(2.0) * corr).astype(np.float32), _ratio(np.float32(-2.0) * norm_sq, res_dot)


def _error(metric: Metric, norm_sq: F32, res_dot: F32, dim: int) -> F32:
    with np.errstate(divide="ignore", invalid="ignore"):
        align = norm_sq * np.float32(dim * 0.25) / (res_dot * res_dot)
        ang = np.sqrt(np.maximum(align - 1, 0) / np.float32(max(dim - 1, 1)))
        err = np.sqrt(norm_sq) * _ERROR_EPS * ang * np.float32(1.0 if metric == "dot" else 2.0)
    bad = (dim <= 1) | (norm_sq <= 0) | (res_dot == 0) | ~np.isfinite(err)
    out: F32 = np.where(bad, 0, err).astype(np.float32)
    return out


def _f32_bytes(v: F32) -> U8:
    out: U8 = np.ascontiguousarray(v, "<f4").view(np.uint8).reshape(-1, 4)
    return out


def encode(prepared: F32, parts: npt.NDArray[np.integer], centroids: F32, metric: Metric,
           model: RabitqModel) -> U8:
    """Payload rows of vectors (normalized for cosine) assigned to ``parts``.

    Raises:
        InvalidInputError: vectors of another dimension than the model's.
    """
    n, dim = prepared.shape
    if dim != model.dim:
        raise InvalidInputError(f"IVF_RQ: vectors have dimension {dim}, the quantizer {model.dim}")
    res = np.asarray(prepared - centroids[parts], np.float32)  # float32 already: no copy
    norm_sq = np.einsum("ij,ij->i", res, res).astype(np.float32)
    rot = rotate_rows(res, model.signs)
    rc = rotate_rows(centroids, model.signs)[parts]
    neg = np.signbit(rot)
    pos = ~neg
    half = np.float32(0.5) - neg  # ±0.5 by the sign bit (one pass)
    res_dot = np.einsum("ij,ij->i", rot, half).astype(np.float32)
    cent_dot = np.einsum("ij,ij->i", rc, half).astype(np.float32)
    res_cent = np.einsum("ij,ij->i", rot, rc).astype(np.float32)
    add, scale = _factors(metric, norm_sq, res_dot, cent_dot, res_cent)
    cols = [np.packbits(pos, axis=1, bitorder="little"), _f32_bytes(add), _f32_bytes(scale),
            _f32_bytes(_error(metric, norm_sq, res_dot, dim))]
    if model.ex_bits:
        vals = ex_values(rot, model.ex_bits)
        # (sign << ex_bits) + ex - (2^ex_bits - 0.5): halves and small integers, exact in float32
        full = half - neg * np.float32((1 << model.ex_bits) - 1)  # 0.5 or 0.5 - 2^ex_bits
        full += vals
        ex_res = np.einsum("ij,ij->i", rot, full).astype(np.float32)
        ex_cent = np.einsum("ij,ij->i", rc, full).astype(np.float32)
        ex_add, ex_scale = _factors(metric, norm_sq, ex_res, ex_cent, res_cent)
        cols += [pack_blocked(vals, model.ex_bits), _f32_bytes(ex_add), _f32_bytes(ex_scale)]
    return np.ascontiguousarray(np.concatenate(cols, axis=1), np.uint8) if n else np.zeros((0, model.width), np.uint8)


# -- the stored columns ---------------------------------------------------------------------------

def pack_partition(codes: U8) -> U8:
    """One partition's sign codes interleaved for the scanner (row count and width unchanged)."""
    n, width = codes.shape
    full = n // BATCH * BATCH
    c = codes[:full].reshape(-1, BATCH, width)
    lo, hi = c[:, PERM0, :], c[:, PERM0 + 16, :]
    first = ((lo & 15) | ((hi & 15) << 4)).transpose(0, 2, 1)
    second = ((lo >> 4) | (hi & 0xF0)).transpose(0, 2, 1)
    blocks = np.concatenate([first, second], axis=2).reshape(-1)
    tail = codes[full:].T.reshape(-1)
    out: U8 = np.concatenate([blocks, tail]).astype(np.uint8).reshape(n, width)
    return out


def _by_partition(codes: U8, lengths: npt.NDArray[np.integer], fn: Any) -> U8:
    out = np.empty_like(codes)
    start = 0
    for n in lengths.tolist():
        if n:
            out[start:start + n] = fn(codes[start:start + n])
        start += int(n)
    return out


def storage(payload: U8, lengths: npt.NDArray[np.integer], model: RabitqModel) -> RQStorage:
    """The ``auxiliary.idx`` columns after ``_rowid`` of payload rows sorted by partition."""
    cb, n = model.code_bytes, payload.shape[0]

    def fsl(values: U8) -> pa.FixedSizeListArray:
        return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(values).reshape(-1), pa.uint8()),
                                                 values.shape[1])

    def f32(col: int) -> pa.Array:
        return pa.array(np.ascontiguousarray(payload[:, col:col + 4]).view("<f4").reshape(n), pa.float32())

    arrays = [fsl(_by_partition(payload[:, :cb], lengths, pack_partition)), f32(cb), f32(cb + 4), f32(cb + 8)]
    fields = [pa.field("_rabit_codes", pa.list_(pa.uint8(), cb)), *(pa.field(f, pa.float32()) for f in _FACTORS)]
    if model.ex_bits:
        at = cb + 12
        arrays += [fsl(payload[:, at:at + model.ex_bytes]), f32(at + model.ex_bytes), f32(at + model.ex_bytes + 4)]
        fields += [pa.field("__blocked_ex_codes", pa.list_(pa.uint8(), model.ex_bytes)),
                   *(pa.field(f, pa.float32()) for f in _EX_FACTORS)]
    return RQStorage(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), model.metadata())


def payload_of(st: RQStorage, lengths: npt.NDArray[np.integer]) -> U8:
    """Payload rows of a stored segment (codes unpacked, factors and extended codes as stored).

    Raises:
        NotSupportedError: the legacy ``__ex_codes`` layout.
    """
    model = model_of(st)
    t = st.table()
    n = t.num_rows

    def fsl(name: str) -> U8:
        col = t.column(name).combine_chunks()
        out: U8 = col.flatten().to_numpy(zero_copy_only=False).astype(np.uint8).reshape(n, col.type.list_size)
        return out

    def f32(name: str) -> U8:
        return _f32_bytes(t.column(name).to_numpy().astype(np.float32))

    codes = fsl("_rabit_codes")
    if st.metadata.get("packed", False):
        codes = _by_partition(codes, lengths, unpack_partition)
    cols = [codes, *(f32(f) for f in _FACTORS)]
    if model.ex_bits:
        if "__blocked_ex_codes" not in t.column_names:
            raise NotSupportedError("IVF_RQ segments with the legacy __ex_codes column cannot be rewritten")
        cols += [fsl(EX_CODES), *(f32(f) for f in _EX_FACTORS)]
    return np.ascontiguousarray(np.concatenate(cols, axis=1), np.uint8) if n else np.zeros((0, model.width), np.uint8)


# -- estimated distances (search) -----------------------------------------------------------------

#: Probed rows from which a query's sign codes are looked up per 16 dimensions (one table of 65536
#: entries per ``uint16`` column, built per query) instead of per byte (256 entries, two lookups per
#: column and a split of each code): building the wide tables costs about what looking up this
#: many rows the narrow way costs (~10k rows measured on 128 dimensions).
WIDE_ROWS = 8192
#: Rows of extended codes converted to float32 at once for their product with the query (512 KB at
#: 128 dimensions; 512 to 2048 rows measured alike).
EX_ROWS = 1024
_BYTE = np.arange(256)


def _decoded(st: RQStorage, lengths: npt.NDArray[np.integer]) -> Decoded:
    """The storage's scoring arrays: a lazily read segment's (filled per partition as queries
    probe them, ``rq_layout.py``), else every row decoded once and kept with the storage.

    Raises:
        NotSupportedError: the legacy ``__ex_codes`` layout.
    """
    if st.decoded is not None:
        return st.decoded
    hit = _DECODED.get(id(st))
    if hit is not None and hit[0]() is st:
        return hit[1]
    model = model_of(st)
    if model.ex_bits and EX_CODES not in st.columns.column_names:
        raise NotSupportedError("IVF_RQ segments with the legacy __ex_codes column cannot be searched")
    dec = decode_rows(st.columns, np.asarray(lengths), model.dim, model.ex_bits, bool(st.metadata.get("packed", False)),
                      "IVF_RQ storage")
    key = id(st)
    _DECODED[key] = (weakref.ref(st, lambda _: _DECODED.pop(key, None)), dec)
    return dec


#: Decoded storages by ``id``, dropped with their storage (segments are cached by the search side).
_DECODED: dict[int, tuple[weakref.ref[RQStorage], Decoded]] = {}


def _subset_sums(qr: F32) -> F32:
    """``[dim / 4, 16]``: per group of 4 rotated query values, the sum over each subset (bit i of
    the entry: value i included), each entry built from the one without its lowest bit plus that
    value, in float32: that order of additions is the one whose rounding matched pylance's
    quantized table (a matrix product rounded ``qmin`` one ulp apart on one query in ~60 builds,
    which moved one entry across a rounding boundary and ~7% of the rows by ~1e-3)."""
    groups = qr.reshape(-1, 4).astype(np.float32)
    out = np.zeros((groups.shape[0], 16), np.float32)
    for j in range(1, 16):
        out[:, j] = out[:, j & (j - 1)] + groups[:, (j & -j).bit_length() - 1]
    return out


def _quantized(table: F32) -> tuple[F32, np.float32, np.float32]:
    """``table`` on 0..255 over its range (whole numbers as float32), its minimum and range.

    Rounded as Rust's ``round`` does (half away from zero; the values are >= 0), not numpy's
    half-to-even ``rint``: an entry landing on x.5 goes up in pylance's table."""
    qmin, qmax = np.float32(table.min()), np.float32(table.max())
    span = np.float32(qmax - qmin)
    if not span > 0:
        return np.zeros_like(table), qmin, span
    quant: F32 = np.floor((table - qmin) * (np.float32(255.0) / span) + np.float32(0.5)).astype(np.float32)
    return quant, qmin, span


def _byte_tables(table: F32, words: int) -> F32:
    """``[2 · words, 256]``: per sign-code byte the sum of its two 4-dimension groups' entries of
    ``table`` (``[dim / 4, 16]``), zero rows past the last byte (the high byte of an odd last word)."""
    out = np.zeros((2 * words, 256), np.float32)
    out[:table.shape[0] // 2] = table[0::2][:, _BYTE & 15] + table[1::2][:, _BYTE >> 4]
    return out


def _byte_sums(byte_table: F32, codes: npt.NDArray[np.uint16]) -> F32:
    """Per column of ``codes`` (``[words, rows]``) the sum of its bytes' entries of ``byte_table``."""
    at = np.empty((byte_table.shape[0], codes.shape[1]), np.intp)
    at[0::2] = codes & 255
    at[1::2] = codes >> 8
    at += (np.arange(byte_table.shape[0]) * 256)[:, None]
    out: F32 = np.take(byte_table.reshape(-1), at).sum(axis=0, dtype=np.float32)
    return out


def _sign_sums(quant: F32, codes: npt.NDArray[np.uint16]) -> F32:
    """Per column of ``codes`` the sum of its 4-dimension groups' entries of ``quant`` (``[dim / 4, 16]``,
    whole numbers: the sums are exact in any order, as the SIMD scan's integer sums)."""
    words, rows = codes.shape
    byte = _byte_tables(quant, words)
    if rows < WIDE_ROWS:
        return _byte_sums(byte, codes)
    # whole numbers up to 4 · 255 per word: uint16 tables and sums while they cannot overflow (a
    # smaller table to keep in cache, ~25% faster lookups than float32)
    small = words * 4 * 255 < 1 << 16
    typed = byte.astype(np.uint16) if small else byte
    # a word's entry: its low byte's plus its high byte's ([high, low] flattened is low + 256 · high)
    wide = (typed[1::2][:, :, None] + typed[0::2][:, None, :]).reshape(words, -1)
    out = np.take(wide[0], codes[0])
    part = np.empty_like(out)
    for w in range(1, words):  # column by column: one table of 128-256 KB in cache at a time
        np.take(wide[w], codes[w], out=part, mode="clip")  # codes are in range: no bounds check
        out += part
    sums: F32 = out.astype(np.float32, copy=False)
    return sums


def _ex_dots(ex: npt.NDArray[np.uint8], q: F32, out: F32) -> None:
    """``out[i] = ex[i] · q``: rows converted to float32 a block at a time (in cache) for a BLAS
    product, ~30% less CPU than ``einsum`` on the uint8 rows; blocks start at the partition's
    first row, so a row's value does not depend on what else a query probes."""
    buf = _scratch(min(EX_ROWS, len(ex)), ex.shape[1])
    for lo in range(0, len(ex), EX_ROWS):
        hi = min(lo + EX_ROWS, len(ex))
        b = buf[:hi - lo]
        np.copyto(b, ex[lo:hi], casting="unsafe")
        np.matmul(b, q, out=out[lo:hi])


def _scratch(rows: int, width: int) -> F32:
    """A float32 ``[rows, width]`` block kept per thread: a fresh one per partition was mapped
    and faulted in anew each time (blocks over 128 KB come from ``mmap``), ~1/3 of the products'
    CPU on 100k-row segments."""
    buf: F32 | None = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.shape[1] != width or buf.shape[0] < rows:
        buf = np.empty((max(rows, EX_ROWS), width), np.float32)
        _SCRATCH.buf = buf
    return buf[:rows]


_SCRATCH = threading.local()


def _gather(values: F32, spans: list[tuple[int, int]], total: int) -> F32:
    """``values`` of the rows of ``spans`` (``(first row, rows)`` each), one after the other."""
    if len(spans) == 1:
        return values[spans[0][0]:spans[0][0] + total]
    out: F32 = np.concatenate([values[lo:lo + n] for lo, n in spans])
    return out


def estimate(st: RQStorage, q: npt.NDArray[np.floating], metric: Metric, centroids: F32,
             parts: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> F32:
    """pylance's estimated distances of the rows of partitions ``parts`` (rows in storage order).

    As upstream's raw-query estimator scores them (``rust/lance-index/src/vector/bq/storage.rs``):
    the query is rotated; its inner product with a row's sign bits comes from a lookup table of
    every 4-dimension group's 16 subset sums, quantized to u8 over the table's range for rows in
    whole 32-row blocks of the partition (the SIMD scan: whole-number sums, then scaled back) and
    exact for the rest; the extended codes' inner product is exact
    (``rust/lance-index/src/vector/bq/ex_dot.rs``). ``add + scale · ip`` plus the query's distance
    to the centroid gives the distance (pylance's final ``_distance`` for IVF_RQ without refine).

    The probed partitions are scored together: their sign codes (:class:`~.rq_layout.Decoded`)
    are looked up column by column over all their rows, the rows outside whole blocks rescored
    exactly afterwards; the extended codes are one product with the query per partition.
    """
    model = model_of(st)
    dec = _decoded(st, lengths)
    qf = np.asarray(q, np.float32)
    if metric == "cosine":
        qf = (qf / np.float32(np.linalg.norm(qf) or 1.0)).astype(np.float32)
    # pylance's float32 butterflies (a product with the rotation's matrix rounds differently: on
    # 200 dimensions that moved every distance by ~3e-6 of its size, beyond pylance's tolerance)
    qr = rotate(qf[None, :], model.signs)[0]
    sum_q = np.float32(qr.sum(dtype=np.float32))
    table = _subset_sums(qr)
    quant, qmin, span = _quantized(table)
    spans = [(int(offsets[p]), int(lengths[p])) for p in parts.tolist() if lengths[p]]
    total = sum(n for _, n in spans)
    if not total:
        return np.zeros(0, np.float32)
    if len(spans) == 1:
        codes = dec.codes[:, spans[0][0]:spans[0][0] + total]
    else:
        codes = np.concatenate([dec.codes[:, lo:lo + n] for lo, n in spans], axis=1)
    # whole-number sums scaled back as the SIMD scan's u16 sums are: sum · range + groups · qmin
    d = _sign_sums(quant, codes)
    d *= span / np.float32(255.0)
    d += np.float32(table.shape[0]) * qmin
    ends = np.cumsum([n for _, n in spans])
    tails = [np.arange(end - n % BATCH, end) for (_, n), end in zip(spans, ends.tolist(), strict=True) if n % BATCH]
    if tails:  # rows after a partition's last whole block: the exact table
        tail = np.concatenate(tails)
        d[tail] = _byte_sums(_byte_tables(table, codes.shape[0]), codes[:, tail])
    q_factor = np.empty(total, np.float32)
    ex_dot = np.empty(total, np.float32) if dec.ex is not None else None
    if dec.ex is not None and dec.ex_dims is not None:
        q_pad = np.zeros(model.dim + 1, np.float32)  # the padding dimension (``dim``) weighs 0
        q_pad[:model.dim] = qr
        q_ex = q_pad[dec.ex_dims]
    at = 0
    live = [p for p in parts.tolist() if lengths[p]]
    with one_blas_thread():  # a product per block: threads would only wait on each other
        for p, (lo, n) in zip(live, spans, strict=True):
            c = centroids[p]
            q_factor[at:at + n] = np.float32(-(c @ qf)) if metric == "dot" else np.float32((qf - c) @ (qf - c))
            if ex_dot is not None and dec.ex is not None:
                _ex_dots(dec.ex[lo:lo + n], q_ex, ex_dot[at:at + n])
            at += n
    # d = (2^ex_bits · ip + ex_dot - bias) · scale + add + q_factor (1 bit: (ip - sum_q / 2) · scale ...),
    # evaluated in place in that order
    if ex_dot is not None:
        d *= np.float32(1 << model.ex_bits)
        d += ex_dot
        d -= np.float32((1 << model.ex_bits) - 0.5) * sum_q
    else:
        d -= np.float32(0.5) * sum_q
    d *= _gather(dec.scale, spans, total)
    d += _gather(dec.add, spans, total)
    d += q_factor
    out: F32 = d.astype(np.float32, copy=False)
    return out
