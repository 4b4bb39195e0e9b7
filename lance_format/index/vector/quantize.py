"""Product and scalar quantization as pylance 14.0.2 trains and encodes them.

Facts from ``docs/formats/vector-indices.md`` §6.2, §6.3 and §7 (verified on pylance's bytes;
upstream ``rust/lance-index/src/vector/pq/``, ``rust/lance-index/src/vector/sq/``):

* What is quantized: for ``l2`` and ``cosine`` the *residual* of the (normalised, for cosine)
  vector against its partition's centroid, for ``dot`` the raw vector (:func:`residuals`).
  SQ never uses residuals: the raw vector (normalised for cosine).
* PQ: ``num_sub_vectors`` codebooks of ``2**num_bits`` codewords, each trained by l2 k-means on
  its slice of the training residuals; a code is the nearest codeword by squared L2 on the
  slice, for every metric.
* SQ (8 bits): ``bounds`` are the minimum and maximum over every training value;
  ``code = floor((x - start) / (end - start) * 255)`` clipped to ``[0, 255]``, in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.errors import InvalidInputError
from lance_format.index.vector.kmeans import (
    F32,
    SEED,
    Metric,
    assign_batched,
    normalize,
    train_kmeans_batched,
)

U8 = npt.NDArray[np.uint8]
#: Training rows per codeword pylance samples for PQ and SQ (``lance.pq.sample_rate``,
#: ``lance.sq.sample_rate``).
PQ_SAMPLE_RATE = 256
SQ_SAMPLE_RATE = 256


@dataclass(frozen=True)
class PqCodebook:
    """``codebook[s, c]`` is codeword ``c`` of sub-vector ``s`` (``[m, 2**num_bits, dim/m]``)."""

    codebook: F32
    num_bits: int

    @property
    def num_sub_vectors(self) -> int:
        """``m``."""
        return int(self.codebook.shape[0])

    @property
    def dim(self) -> int:
        """Full vector dimension."""
        return int(self.codebook.shape[0] * self.codebook.shape[2])

    def tensor_array(self) -> F32:
        """The codebook as pylance stores it: shape ``[2**bits, dim]``, data sub-vector-major.

        pylance's Tensor says ``[2**bits, dim]`` but its data is every sub-vector's codewords
        in turn (§6.2), which is this array's memory order read as ``[m, 2**bits, dim/m]``.
        """
        k = 1 << self.num_bits
        return np.ascontiguousarray(self.codebook).reshape(k, self.dim)

    @classmethod
    def from_tensor(cls, arr: npt.NDArray[np.generic], num_sub_vectors: int, num_bits: int) -> PqCodebook:
        """Read pylance's ``[2**bits, dim]`` tensor (sub-vector-major data) back."""
        k = 1 << num_bits
        flat = np.asarray(arr, np.float32).reshape(-1)
        return cls(flat.reshape(num_sub_vectors, k, flat.size // (k * num_sub_vectors)), num_bits)


@dataclass(frozen=True)
class SqBounds:
    """The SQ value range (``storage_metadata.bounds``) and bits per value."""

    start: float
    end: float
    num_bits: int = 8


def residuals(vectors: F32, partitions: npt.NDArray[np.integer], centroids: F32, metric: Metric) -> F32:
    """What PQ encodes: ``x - centroid`` for l2/cosine (``vectors`` already normalised for
    cosine), the vectors themselves for dot."""
    if metric == "dot":
        return vectors
    out: F32 = vectors - centroids[partitions]
    return out


def train_pq(data: F32, num_sub_vectors: int, *, num_bits: int = 8, max_iters: int = 50,
             seed: int = SEED) -> PqCodebook:
    """Train one l2 k-means codebook per sub-vector slice of ``data`` (the residuals).

    ``seed`` seeds the codebooks' starts (fixed by default, so every runner trains the same
    codebooks; other seeds give the spread of draws that pylance's unseeded starts have).

    Raises:
        InvalidInputError: ``dim`` not divisible by ``num_sub_vectors``, bad ``num_bits``, or
            fewer training rows than codewords.
    """
    n, dim = data.shape
    if num_sub_vectors < 1 or dim % num_sub_vectors:
        raise InvalidInputError(f"PQ: dimension ({dim}) must be divisible by num_sub_vectors ({num_sub_vectors})")
    if num_bits not in (4, 8):
        raise InvalidInputError(f"PQ: num_bits must be 4 or 8, got {num_bits}")
    k = 1 << num_bits
    if n < k:
        raise InvalidInputError(f"PQ: training needs at least {k} vectors, got {n}")
    # every sub-vector's k-means runs at once: one batched matmul per Lloyd step for all of them
    books, _ = train_kmeans_batched(sub_vectors(data, num_sub_vectors), k, max_iters=max_iters, seed=seed)
    return PqCodebook(books, num_bits)


def sub_vectors(data: F32, num_sub_vectors: int) -> F32:
    """``[m, n, dim/m]``: sub-vector ``s`` of every row is ``out[s]`` (a contiguous copy)."""
    n, dim = data.shape
    out: F32 = np.ascontiguousarray(
        np.asarray(data, np.float32).reshape(n, num_sub_vectors, dim // num_sub_vectors).transpose(1, 0, 2))
    return out


def encode_pq(data: F32, pq: PqCodebook) -> U8:
    """``[n, m]`` codes: the nearest codeword (squared L2) of every sub-vector."""
    m, sd = pq.num_sub_vectors, pq.codebook.shape[2]
    view = np.asarray(data, np.float32).reshape(data.shape[0], m, sd).transpose(1, 0, 2)  # no copy
    labels, _ = assign_batched(view, np.asarray(pq.codebook, np.float32), distances=False)
    return np.ascontiguousarray(labels.T, np.uint8)


def pack_codes(codes: U8, num_bits: int) -> U8:
    """The stored bytes of ``[n, m]`` codes: 4-bit codes two per byte, low nibble first."""
    if num_bits == 8:
        return codes
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def unpack_codes(packed: U8, num_bits: int) -> U8:
    """Inverse of :func:`pack_codes`."""
    if num_bits == 8:
        return packed
    out = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    out[:, 0::2] = packed & 0x0F
    out[:, 1::2] = packed >> 4
    return out


def transpose_partitions(codes: U8, lengths: npt.NDArray[np.integer]) -> U8:
    """pylance's ``transposed`` PQ layout: each partition's ``n × m`` bytes stored column-major.

    The result has the input's shape; row ``i`` of a partition no longer is vector ``i``'s code.
    """
    out = np.empty_like(codes)
    lo = 0
    for n in np.asarray(lengths, np.int64).tolist():  # one slice per partition
        if n:
            out[lo:lo + n] = np.ascontiguousarray(codes[lo:lo + n].T).reshape(n, codes.shape[1])
        lo += n
    return out


def untranspose_partitions(stored: U8, lengths: npt.NDArray[np.integer]) -> U8:
    """Inverse of :func:`transpose_partitions`."""
    out = np.empty_like(stored)
    m = stored.shape[1]
    lo = 0
    for n in np.asarray(lengths, np.int64).tolist():
        if n:
            out[lo:lo + n] = stored[lo:lo + n].reshape(m, n).T
        lo += n
    return out


def train_sq(data: F32, num_bits: int = 8) -> SqBounds:
    """Bounds of the training values (min and max of every element), widened to float64."""
    if data.size == 0:
        return SqBounds(0.0, 0.0, num_bits)
    return SqBounds(float(np.min(data)), float(np.max(data)), num_bits)


def encode_sq(data: F32, bounds: SqBounds) -> U8:
    """``[n, dim]`` 8-bit codes (row-major)."""
    span = bounds.end - bounds.start
    if span <= 0:
        return np.zeros(data.shape, np.uint8)
    scaled = np.floor((data.astype(np.float64) - bounds.start) / span * 255.0)
    return np.clip(scaled, 0, 255).astype(np.uint8)


def prepare(vectors: npt.NDArray[np.generic], metric: Metric) -> F32:
    """The vectors IVF and the quantizers see: float32, normalised for cosine."""
    x: F32 = np.ascontiguousarray(vectors, np.float32)
    return normalize(x) if metric == "cosine" else x
