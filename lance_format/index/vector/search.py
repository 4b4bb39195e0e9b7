"""Approximate nearest-neighbour search inside one IVF segment.

Partitions are ranked by the distance from the query to their centroids and probed in that
order; each probed partition's vectors are scored from their storage, in the units pylance
reports before any refine (``docs/formats/vector-indices.md`` §7.2, §8):

* FLAT: the exact distance (cosine vectors are stored normalized, so ``1 - q̂·x``);
* PQ: asymmetric distance with one lookup table per partition (``rust/lance-index/src/vector/pq/
  distance.rs``): squared l2 between the residual query and each codeword, summed over the
  codes; dot sums ``1 - q_s·c`` and subtracts ``m - 1``; cosine is l2 on the normalized query;
* SQ: for l2 and cosine the query is quantized with the segment's bounds and compared code to
  code, scaled back by ``(end - start)² / 255²`` (``rust/lance-index/src/vector/sq/storage.rs``);
  dot is ``1 - q·x̂`` on the dequantized vectors.

HNSW kinds (``IVF_HNSW_*``) are scored the same way: every vector of a probed partition is
scored instead of walking the graph from its entry point. That is exhaustive within the probed
partitions, so recall is equal to or better than pylance's graph walk for the same ``nprobes``;
``ef`` therefore has no effect here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.errors import NotSupportedError
from lance_format.index.vector import rabitq
from lance_format.index.vector.distance import F32, Metric, centroid_distances, distances, normalize
from lance_format.index.vector.layout import FlatStorage, IvfSegment, PQStorage, RQStorage, SQStorage
from lance_format.index.vector.probes import initial_probes

U64 = npt.NDArray[np.uint64]
BoolMask = npt.NDArray[np.bool_]
#: ``allowed(rows)``: which of the segment's rows (positions into ``row_ids``) may be returned.
Allowed = Callable[[npt.NDArray[np.int64]], BoolMask]
#: ``score(partitions, rows)``: distances of the rows of the probed partitions (one array per partition).
Scorer = Callable[[npt.NDArray[np.int64], list[npt.NDArray[np.int64]]], F32]


@dataclass(frozen=True)
class Probe:
    """How many partitions to probe: at least ``minimum``, more (up to ``maximum``) while fewer
    than ``k`` candidates were found (pylance's ``minimum_nprobes`` / ``maximum_nprobes``)."""

    minimum: int = 1
    maximum: int | None = None
    #: Probe exactly ``minimum`` first (``nprobes=`` given), else start from pylance's Auto count.
    exact: bool = False
    #: ``search_effort`` (``None``: Auto), see :func:`lance_format.index.vector.probes.initial_probes`.
    effort: float | None = None
    #: The query's k before any refine factor: pylance picks the Auto rule and stops widening by
    #: it (``None``: the k asked of the segment).
    k: int | None = None


def first_round(probe: Probe, metric: Metric, k: int, sorted_dists: F32) -> int:
    """Partitions probed before checking whether enough candidates were found."""
    parts = int(sorted_dists.size)
    if probe.exact:
        top = parts if probe.maximum is None else min(probe.maximum, parts)
        return max(1, min(probe.minimum, top))
    return initial_probes(metric, k, sorted_dists, probe.minimum, probe.maximum, probe.effort)


def rank_partitions(seg: IvfSegment, q: npt.NDArray[np.generic]) -> npt.NDArray[np.int64]:
    """Partitions in probe order (nearest centroid first, ties by partition id)."""
    return _ranked(seg, q)[0]


def _ranked(seg: IvfSegment, q: npt.NDArray[np.generic]) -> tuple[npt.NDArray[np.int64], F32]:
    d = np.nan_to_num(centroid_distances(seg.metric, seg.centroids, q), nan=np.inf)
    order = np.lexsort((np.arange(d.size), d)).astype(np.int64)
    return order, d[order]


@dataclass(frozen=True)
class _Prepared:
    """Arrays derived once per opened segment, so warm queries only gather and add.

    Attributes:
        codes_t: PQ codes with one contiguous row per sub-vector (``[m, n]``): a sub-vector's
            codes of the candidate rows are one gather instead of a strided column.
        sq_norms: ``||code||²`` of each SQ row, exact in float32 (integers below 2**24 for dim <= 128).
    """

    codes_t: npt.NDArray[np.uint8] | None = None
    sq_norms: F32 | None = None
    #: PQ codebook as ``[m, sub_dim, 2**nbits]`` float32 and its codewords' squared norms ``[m, 2**nbits]``.
    codebook_t: F32 | None = None
    codebook_norms: F32 | None = None


_PREPARED: dict[int, _Prepared] = {}


def _prepared(seg: IvfSegment) -> _Prepared:
    key = id(seg)
    hit = _PREPARED.get(key)
    if hit is None:
        st = seg.storage
        if isinstance(st, PQStorage):
            cb = st.codebook.astype(np.float32)
            hit = _Prepared(codes_t=np.ascontiguousarray(st.codes.T),
                            codebook_t=np.ascontiguousarray(cb.transpose(0, 2, 1)),
                            codebook_norms=np.einsum("skd,skd->sk", cb, cb))
        elif isinstance(st, SQStorage) and st.codes.shape[1] <= 128:
            hit = _Prepared(sq_norms=np.einsum("ij,ij->i", st.codes, st.codes, dtype=np.float32))
        else:
            hit = _Prepared()
        _PREPARED[key] = hit
        weakref.finalize(seg, _PREPARED.pop, key, None)  # ids are reused once the segment is gone
    return hit


def _is_range(r: npt.NDArray[np.int64]) -> bool:
    # rows come ascending and distinct (see score_rows), so the end points tell a contiguous run:
    # an O(1) check, where a diff over every row cost ~0.1 ms per probed partition
    return bool(r.size) and int(r[-1]) - int(r[0]) + 1 == r.size


def _score_pq(seg: IvfSegment, st: PQStorage, q: npt.NDArray[np.floating], parts: npt.NDArray[np.int64],
              rows: list[npt.NDArray[np.int64]], flat_rows: npt.NDArray[np.int64]) -> F32:
    m, k, sd = st.codebook.shape
    cb = st.codebook.astype(np.float32, copy=False)
    if flat_rows.size == 0:
        return np.empty(0, np.float32)
    prep = _prepared(seg)
    assert prep.codes_t is not None and prep.codebook_t is not None and prep.codebook_norms is not None
    # [m, n]: each sub-vector's codes contiguous; whole partitions are slices (copied, not gathered)
    codes = np.concatenate(_code_blocks(prep.codes_t, rows, axis=1), axis=1)
    if seg.metric == "dot":  # one table: dot does not use residuals
        tables = (1 - np.einsum("sd,skd->sk", q.reshape(m, sd), cb)).reshape(m, k)
        base = np.zeros(flat_rows.size, np.int32)
    else:
        # One lookup table per probed partition, all built at once: [m, partitions · k] squared l2
        # between each residual sub-query and each codeword, as ||r||² - 2 r·c + ||c||² (one
        # small matmul per sub-vector; within 1e-5 of summing the squared differences).
        resid = (q[None, :] - seg.centroids[parts].astype(np.float32)).reshape(parts.size, m, sd).transpose(1, 0, 2)
        cross = np.matmul(resid, prep.codebook_t)  # [m, partitions, k]
        tables = (np.einsum("spd,spd->sp", resid, resid)[:, :, None] - 2 * cross
                  + prep.codebook_norms[:, None, :]).astype(np.float32).reshape(m, parts.size * k)
        base = np.repeat(np.arange(parts.size, dtype=np.int32) * k, [r.size for r in rows])
    # Summed one sub-vector after the other (as pylance adds the table entries), each a gather
    # over every candidate row; no [n, m] temporary, int32 indices, no bounds checks (in range).
    acc = np.zeros(flat_rows.size, np.float32)
    idx = np.empty(flat_rows.size, np.int32)
    val = np.empty(flat_rows.size, np.float32)
    for s in range(m):  # m sub-vectors (16-96)
        np.add(base, codes[s], out=idx)
        np.take(tables[s], idx, out=val, mode="clip")
        acc += val
    if seg.metric == "dot":
        acc -= np.float32(m - 1)
    return acc


def _code_blocks(codes: npt.NDArray[np.uint8], rows: list[npt.NDArray[np.int64]],
                 axis: int = 0) -> list[npt.NDArray[np.uint8]]:
    """The codes of each probed partition along ``axis`` (rows, or columns of transposed codes):
    whole partitions are views, not a gather of every row."""
    def block(r: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        sel: slice | npt.NDArray[np.int64] = slice(int(r[0]), int(r[0]) + r.size) if _is_range(r) else r
        return codes[sel] if axis == 0 else codes[:, sel]
    return [block(r) for r in rows if r.size]


def _score_sq(seg: IvfSegment, st: SQStorage, q: npt.NDArray[np.floating], rows: list[npt.NDArray[np.int64]],
              flat_rows: npt.NDArray[np.int64]) -> F32:
    span = st.end - st.start
    if flat_rows.size == 0:
        return np.empty(0, np.float32)
    if seg.metric == "dot":
        # 14.0.2 scores dot on the dequantized vectors, ``start + code * span / 255`` (observed on
        # its ``_distance``), not code to code as the l2 path does.
        xh = (st.start + st.codes[flat_rows].astype(np.float64) * (span / 255.0)).astype(np.float32)
        return distances("dot", xh, q)
    if span == 0:
        qc = np.zeros(q.size, np.float32)
    else:  # Rust's saturating `as u8`: NaN -> 0, out of range clamped
        qc = np.clip(np.nan_to_num((q.astype(np.float64) - st.start) * 255.0 / span, nan=0.0), 0, 255)
        qc = qc.astype(np.int64).astype(np.float32)
    # ||c - qc||² = ||c||² - 2 c·qc + ||qc||² in float32 (one BLAS product, no int64 copy): every term
    # and partial sum is an integer below 2 · 255² · dim < 2**24 for dim <= 128, so float32 holds it exactly.
    # The products are einsum, not BLAS: a multi-threaded sgemv is many times slower on a busy machine.
    blocks = _code_blocks(st.codes, rows)
    norms = _prepared(seg).sq_norms
    if norms is not None:
        cross = np.concatenate([np.einsum("ij,j->i", c, qc) for c in blocks])
        raw = norms[flat_rows] - 2 * cross + np.float32(qc @ qc)
    else:  # wider vectors could round: the exact integer path
        qi = qc.astype(np.int64)[None, :]
        diffs = [c.astype(np.int64) - qi for c in blocks]
        raw = np.concatenate([np.einsum("ij,ij->i", d, d) for d in diffs]).astype(np.float32)
    out: F32 = (raw.astype(np.float32) * np.float32(span) ** 2 / np.float32(255.0 ** 2)).astype(np.float32)
    return out


def score_rows(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64],
               rows: list[npt.NDArray[np.int64]]) -> F32:
    """Distances from ``q`` to the segment rows ``rows[i]`` of partitions ``parts[i]``.

    Each ``rows[i]`` is ascending and distinct (positions in the segment); a contiguous run is
    scored from a view of the codes instead of a gather. IVF_RQ rows get pylance's estimated
    distances (:func:`rabitq.estimate`) for l2 and cosine.

    Raises:
        NotSupportedError: IVF_RQ (RaBitQ) storage of a dot index.
    """
    st = seg.storage
    metric: Metric = seg.metric
    flat_rows = np.concatenate(rows) if rows else np.empty(0, np.int64)
    qf: npt.NDArray[np.floating] = np.asarray(q, dtype=np.float32)
    if metric == "cosine":
        qf = normalize(qf[None, :])[0]
    if isinstance(st, FlatStorage):
        if metric == "cosine":  # stored normalized: 1 - cos is 1 - q̂·x
            return distances("dot", st.vectors[flat_rows], qf)
        return distances(metric, st.vectors[flat_rows], q if metric == "hamming" else qf)
    if isinstance(st, PQStorage):
        return _score_pq(seg, st, qf, parts, rows, flat_rows)
    if isinstance(st, SQStorage):
        return _score_sq(seg, st, qf, rows, flat_rows)
    assert isinstance(st, RQStorage)
    if metric == "dot":  # 14.0.2's dot estimates differ from rabitq.estimate's: callers score exactly
        raise NotSupportedError(f"scoring {seg.index_type} (RaBitQ) codes on dot is not supported; "
                                "pass use_index=False")
    return rabitq.estimate(st, np.asarray(q, np.float32), metric, np.asarray(seg.centroids, np.float32), parts,
                           seg.offsets.astype(np.int64), seg.lengths.astype(np.int64))


def top_k(dist: F32, ids: U64, k: int) -> npt.NDArray[np.int64]:
    """Positions of the ``k`` smallest distances, sorted by (distance, id); NaN distances dropped."""
    ok = np.flatnonzero(~np.isnan(dist))
    if ok.size > k:
        # Everything strictly below the k-th value, plus ties at it (ordered by id below).
        kth = np.partition(dist[ok], k - 1)[k - 1]
        ok = ok[dist[ok] <= kth]
    order = np.lexsort((ids[ok], dist[ok]))
    return ok[order[:k]]


def search_segment(seg: IvfSegment, q: npt.NDArray[np.generic], k: int, probe: Probe,
                   allowed: Allowed | None = None,
                   distance_range: tuple[float | None, float | None] = (None, None),
                   score: Scorer | None = None,
                   best_per_row: bool = False) -> tuple[npt.NDArray[np.int64], F32]:
    """The ``k`` best rows of ``seg`` for ``q``: positions into ``seg.row_ids`` and their distances.

    Args:
        seg: The segment.
        q: The query vector (the column's element type).
        k: Candidates wanted.
        probe: Partitions to probe.
        allowed: Which rows may be returned (deleted rows, rows a prefilter rejects are not).
        distance_range: ``[lower, upper)`` bounds on the distance (``None``: unbounded).
        score: Scores the rows of probed partitions instead of the segment's storage (the caller
            may read exact vectors, e.g. for IVF_RQ, whose codes we cannot score).
        best_per_row: Each probed partition gives its ``k`` best entries with one entry per row
            id (the best): what pylance's HNSW sub-index returns on a multivector column, where
            a row has one entry per vector (:func:`_partition_best`).
    """
    order, ranked = _ranked(seg, q)
    offsets = seg.offsets.astype(np.int64)
    lengths = seg.lengths.astype(np.int64)
    top = order.size if probe.maximum is None else min(probe.maximum, order.size)
    enough = k if probe.k is None else min(k, probe.k)
    n = first_round(probe, seg.metric, enough, ranked)
    done = 0
    best_rows = np.empty(0, np.int64)
    best_dist = np.empty(0, np.float32)
    lo, hi = distance_range
    while True:
        parts = order[done:n]
        rows = [np.arange(offsets[p], offsets[p] + lengths[p], dtype=np.int64) for p in parts.tolist()]
        if rows and sum(r.size for r in rows):
            dist = score_rows(seg, q, parts, rows) if score is None else score(parts, rows)
            cand = np.concatenate(rows)
            keep = np.ones(cand.size, bool) if allowed is None else allowed(cand)
            if lo is not None:
                keep &= dist >= lo
            if hi is not None:
                keep &= dist < hi
            if best_per_row:
                sel = _partition_best(cand, dist, keep, [r.size for r in rows], seg.row_ids, k)
                best_rows, best_dist = np.concatenate([best_rows, cand[sel]]), np.concatenate([best_dist, dist[sel]])
            else:
                best_rows = np.concatenate([best_rows, cand[keep]])
                best_dist = np.concatenate([best_dist, dist[keep]])
            pick = top_k(best_dist, seg.row_ids[best_rows], k)
            best_rows, best_dist = best_rows[pick], best_dist[pick]
        done = n
        if best_rows.size >= enough or done >= top:
            return best_rows, best_dist
        n = _widen(order, offsets, lengths, done, top, enough - best_rows.size, k, allowed)


def _partition_best(cand: npt.NDArray[np.int64], dist: F32, keep: BoolMask, sizes: list[int], row_ids: U64,
                    k: int) -> npt.NDArray[np.int64]:
    """Positions into ``cand``: per partition (``sizes`` consecutive candidates each) the ``k`` best
    kept entries, then the best entry of each row id among them (pylance 14.0.2's HNSW results on
    multivector columns, reproduced to 1e-6 on its ``_distance``). One step per probed partition."""
    picks = []
    start = 0
    for n in sizes:
        pos = start + np.flatnonzero(keep[start:start + n])
        start += n
        if pos.size:
            best = pos[top_k(dist[pos], row_ids[cand[pos]], k)]
            _, first = np.unique(row_ids[cand[best]], return_index=True)
            picks.append(best[np.sort(first)])
    return np.concatenate(picks) if picks else np.empty(0, np.int64)


def _widen(order: npt.NDArray[np.int64], offsets: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
           done: int, top: int, short: int, k: int, allowed: Allowed | None) -> int:
    """Where the next round stops: pylance probes further partitions one at a time, in rank order,
    until k candidates were found; the partitions that takes are counted here at once (each
    partition yields at most k rows: those ``allowed``)."""
    rest = order[done:top]
    counts = lengths[rest]
    if allowed is not None:
        rows = [np.arange(offsets[p], offsets[p] + lengths[p], dtype=np.int64) for p in rest.tolist()]
        ok = allowed(np.concatenate(rows) if rows else np.empty(0, np.int64))
        running = np.concatenate([[0], np.cumsum(ok, dtype=np.int64)])
        ends = np.cumsum(counts)
        counts = running[ends] - running[ends - counts]
    found = np.cumsum(np.minimum(counts, k))
    # A distance range can still leave the round short; the caller then widens again.
    need = int(np.searchsorted(found, short, side="left")) + 1
    return min(top, done + need)
