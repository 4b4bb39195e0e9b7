"""Vector distances in pylance's units (the ``_distance`` column), vectorised with numpy.

``rust/lance-linalg/src/distance/``: ``l2`` is the *squared* Euclidean distance, ``cosine``
is ``1 - cos(x, q)``, ``dot`` is ``1 - x·q`` and ``hamming`` counts differing bits of
``uint8`` vectors (``docs/formats/vector-indices.md`` §7.2). Computation is in float32 for
float16/float32 columns and float64 for float64 columns, like upstream's per-type kernels.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from lance_format.errors import InvalidInputError

Metric = Literal["l2", "cosine", "dot", "hamming"]
F32 = npt.NDArray[np.float32]
_ALIASES = {"l2": "l2", "euclidean": "l2", "cosine": "cosine", "dot": "dot", "hamming": "hamming"}
#: Bits set in each byte value (hamming).
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(axis=1).astype(np.uint8)


def metric_name(metric: str) -> Metric:
    """Normalize a metric name as pylance does (case-insensitive, ``euclidean`` = ``l2``).

    Raises:
        InvalidInputError: an unknown metric.
    """
    name = _ALIASES.get(str(metric).lower())
    if name is None:
        raise InvalidInputError(f"unknown distance metric {metric!r} (expected l2, cosine, dot or hamming)")
    return name  # type: ignore[return-value]


def _work_dtype(a: npt.NDArray[np.generic]) -> type[np.floating]:
    return np.float64 if a.dtype == np.float64 else np.float32


def normalize(x: npt.NDArray[np.generic]) -> npt.NDArray[np.floating]:
    """Rows of ``x`` scaled to unit L2 norm (zero rows stay zero)."""
    x = np.asarray(x, dtype=_work_dtype(x))
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(norm > 0, x / np.where(norm > 0, norm, 1), 0)
    return out.astype(x.dtype, copy=False)


def distances(metric: Metric, vectors: npt.NDArray[np.generic], q: npt.NDArray[np.generic]) -> F32:
    """Distance from ``q`` (``[dim]``) to each row of ``vectors`` (``[n, dim]``), as float32.

    NaN vectors give NaN, which callers drop as pylance drops null distances.
    """
    if metric == "hamming":
        x = np.asarray(vectors, dtype=np.uint8)
        qq = np.asarray(q, dtype=np.uint8)
        bits: F32 = _POPCOUNT[np.bitwise_xor(x, qq[None, :])].sum(axis=1, dtype=np.uint32).astype(np.float32)
        return bits
    dt = _work_dtype(np.asarray(vectors))
    x = np.asarray(vectors, dtype=dt)
    qq = np.asarray(q, dtype=dt)
    if x.shape[0] == 0:
        return np.empty(0, np.float32)
    if metric == "l2":
        diff = x - qq[None, :]
        out = np.einsum("ij,ij->i", diff, diff)
    elif metric == "dot":
        out = 1 - x @ qq
    else:  # cosine
        xn = np.linalg.norm(x, axis=1)
        qn = np.linalg.norm(qq)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = 1 - (x @ qq) / (xn * qn)
    return np.asarray(out, dtype=np.float32)


def centroid_distances(metric: Metric, centroids: npt.NDArray[np.generic], q: npt.NDArray[np.generic]) -> F32:
    """How far each IVF centroid is from the query, for choosing partitions to probe.

    Cosine indices are trained on normalized vectors and treated as l2, so the query is
    normalized and compared by squared l2 (``rust/lance-index/src/vector/kmeans.rs``
    ``compute_partition``); dot uses ``1 - q·c``; hamming counts bits.
    """
    if metric == "cosine":
        return distances("l2", centroids, normalize(np.asarray(q)[None, :])[0])
    return distances(metric, centroids, q)
