"""``nearest=`` on multivector columns (``list<fixed_size_list<T, d>>``): late-interaction scores.

A row holds several vectors and the query is ``m`` vectors (a ``[m, d]`` array; a single ``[d]``
vector is ``m = 1``). As pylance 14.0.2 answers (checked on its ``_distance``):

* **Exact** (flat search, refine, unindexed fragments; ``rust/lance-linalg/src/distance.rs``
  ``multivec_distance``): per query vector the best similarity ``1 - d`` over the row's vectors,
  summed over the query vectors; ``_distance`` is ``m`` minus that sum, i.e. the sum of each query
  vector's smallest distance. Any metric works flat (``l2`` too). Null rows and empty lists have
  no distance (dropped); a null vector inside a row counts as zeros.
* **Through an index** (``rust/lance/src/dataset/scanner.rs`` ``multivec_ann`` and
  ``rust/lance/src/io/exec/knn.rs`` ``MultivectorScoringExec``, an XTR-style estimate): the index
  holds one entry per vector. Each query vector searches it for ``k * 10`` entries; a row keeps its
  best entry per query vector, and a query vector that did not find a row lends it its worst
  similarity found. ``_distance`` is ``m`` minus the summed similarities, and the ``k`` (times any
  refine factor) best rows are returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.index.vector.distance import F32, Metric, distances
from lance_format.index.vector.search import top_k

U64 = npt.NDArray[np.uint64]
#: Entries each query vector fetches per requested row (pylance's ``LANCE_XTR_OVERFETCH`` default).
OVERFETCH = 10


def is_multivector(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a multivector column type (a list of fixed-size-list vectors)."""
    return bool((pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_fixed_size_list(typ.value_type))


def parse_query(q: Any, column: str, dim: int) -> npt.NDArray[Any]:
    """The query vectors as a ``[m, dim]`` array (a ``[dim]`` vector is one query vector).

    Raises:
        InvalidInputError: no query vectors, more than two dimensions, or vectors of another size.
    """
    if isinstance(q, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_fixed_size_list(q.type) or pa.types.is_list(q.type):
            q = q.to_pylist()
        else:
            q = q.to_numpy(zero_copy_only=False)
    try:
        qa = np.asarray(q)
    except ValueError as e:  # ragged nested lists
        raise InvalidInputError(f"nearest= on multivector column {column!r}: query vectors of different "
                                f"sizes ({e})") from e
    if qa.ndim == 1:
        qa = qa.reshape(1, -1)
    if qa.ndim != 2 or qa.dtype == object:
        raise InvalidInputError(f"nearest= on multivector column {column!r}: the query must be one vector or a "
                                f"[m, {dim}] array of vectors, got shape {qa.shape}")
    if qa.shape[0] == 0:
        raise InvalidInputError(f"nearest= on multivector column {column!r}: the query has no vectors")
    if qa.shape[1] != dim:
        raise InvalidInputError(f"query vector size {qa.shape[1]} does not match index column size {dim} "
                                f"({column!r})")
    return qa


def _flat_vectors(col: pa.Array, dim: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """All vectors of the rows back to back (null vectors as zeros), each row's vector count, and
    which rows have no distance (null or empty)."""
    lengths = np.asarray(pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False), np.int64)
    missing = lengths == 0
    if col.null_count:
        missing |= np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
    fsl = col.flatten()  # the values of non-null rows only, offsets applied
    values = fsl.values.slice(fsl.offset * dim, len(fsl) * dim)
    if values.null_count:
        values = pc.fill_null(values, 0)
    vecs: npt.NDArray[Any] = np.asarray(values.to_numpy(zero_copy_only=False)).reshape(len(fsl), dim)
    if fsl.null_count:  # the bytes under a null vector are not guaranteed to be zeros
        vecs = vecs.copy()
        vecs[np.asarray(fsl.is_null().to_numpy(zero_copy_only=False), bool)] = 0
    return vecs, lengths, missing


def row_distances(metric: Metric, col: pa.Array | pa.ChunkedArray, queries: npt.NDArray[Any]) -> F32:
    """Exact late-interaction ``_distance`` of each row of a multivector column (NaN: none).

    Computed as pylance does, in float32: ``m - Σ_i max_j (1 - d(q_i, x_j))``.
    """
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    dim = arr.type.value_type.list_size
    vecs, lengths, missing = _flat_vectors(arr, dim)
    out = np.full(len(arr), np.nan, np.float32)
    if vecs.shape[0] == 0:
        return out
    # [vectors, m] similarities, one column per query vector (m is small; each column is vectorised)
    sims = np.stack([np.float32(1) - distances(metric, vecs, qi) for qi in queries], axis=1)
    rows = ~missing
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[rows]
    best = np.maximum.reduceat(sims, starts, axis=0)  # NaN (e.g. a zero vector on cosine) wins, as upstream
    out[rows] = np.float32(queries.shape[0]) - best.sum(axis=1, dtype=np.float32)
    return out


def xtr_scores(per_query: Sequence[tuple[U64, F32]], k: int) -> tuple[U64, F32]:
    """Rows and estimated distances from one index search per query vector.

    Args:
        per_query: For each query vector, its best index entries as (row id, distance), sorted
            by (distance, row id); a row may appear several times (one entry per stored vector).
        k: Rows to return (the user's k times any refine factor).

    Returns:
        Row ids and distances, the ``k`` best sorted by (distance, row id).
    """
    found: list[tuple[U64, F32, np.float32]] = []
    for ids, dist in per_query:
        worst = np.float32(1) - dist[-1] if dist.size else np.float32(0)
        # entries arrive best first: a row's first entry is its best for this query vector
        uniq, first = np.unique(ids, return_index=True)
        found.append((uniq, (np.float32(1) - dist[first]).astype(np.float32), worst))
    rows: U64 = np.unique(np.concatenate([f[0] for f in found])) if found else np.empty(0, np.uint64)
    total = np.zeros(rows.size, np.float32)
    for uniq, sims, worst in found:
        part = np.full(rows.size, worst, np.float32)
        part[np.searchsorted(rows, uniq)] = sims
        total += part
    dist_all = (np.float32(len(per_query)) - total).astype(np.float32)
    pick = top_k(dist_all, rows, k)
    return rows[pick], dist_all[pick]


def per_query_k(k: int) -> int:
    """Index entries each query vector fetches for ``k`` rows."""
    return k * OVERFETCH

