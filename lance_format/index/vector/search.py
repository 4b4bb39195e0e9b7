"""Approximate nearest-neighbour search inside one IVF segment.

Partitions are ranked by the distance from the query to their centroids and probed in that
order; each probed partition's rows are scored from the segment's storage
(:mod:`lance_format.index.vector.scoring`, pylance's units). The nearest partition is scored
first; once k rows are known, their k-th distance bounds the other partitions' scoring, which
then skips rows that cannot come closer (same results, bit for bit).

HNSW kinds (``IVF_HNSW_*``) whose segment carries its graphs (``IvfSegment.walk``) are searched
as pylance searches them: each probed partition's graph is walked from its entry point with a
beam of width ``ef`` (:mod:`lance_format.index.vector.hnsw_walk`), scoring the nodes the walk
reaches (SQ storage) or every vector of the probed partitions first (PQ, FLAT), so the answers
are pylance's, graph misses included. Without the graphs, the probed partitions are scored
exhaustively (recall at least the walk's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.errors import InvalidInputError
from lance_format.index.vector.distance import F32, Metric, centroid_distances
from lance_format.index.vector.hnsw_walk import Score, walk
from lance_format.index.vector.layout import IvfSegment, PQStorage, SQStorage
from lance_format.index.vector.probes import initial_probes
from lance_format.index.vector.scoring import (
    pq_tables,
    prunable,
    score_pq_spans,
    score_rows,
    score_sq_spans,
    sq_row_scorer,
)

U64 = npt.NDArray[np.uint64]
BoolMask = npt.NDArray[np.bool_]
#: ``allowed(rows)``: which of the segment's rows (positions into ``row_ids``) may be returned.
Allowed = Callable[[npt.NDArray[np.int64]], BoolMask]
#: ``score(partitions, rows)``: distances of the rows of the probed partitions (one array per partition).
Scorer = Callable[[npt.NDArray[np.int64], list[npt.NDArray[np.int64]]], F32]
#: ``prepare(partitions)``: called once the row ids of ``partitions`` are read, before ``allowed``
#: is asked about their rows (the caller may derive per-partition state from the row ids then).
Prepare = Callable[[npt.NDArray[np.int64]], None]


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


def top_k(dist: F32, ids: U64, k: int) -> npt.NDArray[np.int64]:
    """Positions of the ``k`` smallest distances, sorted by (distance, id); NaN distances dropped."""
    ok = _within_k(dist, k)
    order = np.lexsort((ids[ok], dist[ok]))
    return ok[order[:k]]


def _within_k(dist: F32, k: int) -> npt.NDArray[np.int64]:
    """Positions of the distances not above the ``k``-th smallest (ties at it included), NaN dropped."""
    if dist.size > k and not np.isnan(dist.sum()):  # no NaN (one makes the sum NaN): no mask, no gather
        kth = np.partition(dist, k - 1)[k - 1]
        return np.flatnonzero(dist <= kth)
    ok = np.flatnonzero(~np.isnan(dist))
    if ok.size > k:
        # Everything strictly below the k-th value, plus ties at it (ordered by id by the caller).
        kth = np.partition(dist[ok], k - 1)[k - 1]
        ok = ok[dist[ok] <= kth]
    return ok


def search_segment(seg: IvfSegment, q: npt.NDArray[np.generic], k: int, probe: Probe,
                   allowed: Allowed | None = None,
                   distance_range: tuple[float | None, float | None] = (None, None),
                   score: Scorer | None = None,
                   best_per_row: bool = False,
                   prepare: Prepare | None = None,
                   ef: int | None = None,
                   allowed_mask: BoolMask | None = None) -> tuple[npt.NDArray[np.int64], F32]:
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
        prepare: Told which partitions' row ids were just made valid on a lazily read segment:
            the probed ones (with their codes) before they are scored, the ones a widening
            round counts (row ids only) before ``allowed`` sees their rows.
        ef: The beam width of a graph walk (``None``: pylance's ``1.5 k``).
        allowed_mask: ``allowed`` as a mask over the segment's rows (valid for prepared
            partitions), which a graph walk then reads in place.

    Raises:
        InvalidInputError: ``ef`` below ``k`` on a segment searched by walking its graphs.
    """
    if seg.walk is not None and score is None:
        return _search_walk(seg, q, k, probe, allowed, distance_range, best_per_row, prepare, ef, allowed_mask)
    order, offsets, lengths, top, enough, n = _probing(seg, q, k, probe)
    done = 0
    best_rows = np.empty(0, np.int64)
    best_dist = np.empty(0, np.float32)
    pruning = score is None and not best_per_row and prunable(seg)
    starts, ends = offsets.tolist(), (offsets + lengths).tolist()  # Python ints: a fast np.arange
    pq = pruning and isinstance(seg.storage, PQStorage) and seg.metric != "dot"
    sq = pruning and isinstance(seg.storage, SQStorage)  # prunable: not dot
    while True:
        parts = order[done:n]
        seg.load(parts)  # a lazily read segment reads the round's partitions together: each is scored
        # the round's tables at once, as without pruning (same rounding); chunks take their columns
        tables = pq_tables(seg, q, parts) if pq and parts.size > 1 else None
        width = tables.shape[1] // parts.size if tables is not None else 0
        at = 0
        while at < parts.size:
            # Once k rows are known, the k-th distance bounds the rest: score_rows may then skip
            # rows that cannot come closer. Until then partitions go one at a time (nearest first).
            bound = float(best_dist[k - 1]) if pruning and best_rows.size >= k else None
            step = 1 if pruning and bound is None else parts.size - at
            chunk = parts[at:at + step]
            sub = None if tables is None else tables[:, at * width:(at + step) * width]
            at += step
            sizes = [ends[p] - starts[p] for p in chunk.tolist()]
            if not sum(sizes):
                continue
            if prepare is not None:
                prepare(chunk)
            kept = _kept_rows(seg, q, chunk, bound, sub) if (pq or sq) and bound is not None else None
            if kept is not None:
                best_rows, best_dist = _merge(seg, best_rows, best_dist, kept[0], sizes, kept[1], k, allowed,
                                              distance_range, best_per_row, False)
                continue
            rows = [np.arange(starts[p], ends[p], dtype=np.int64) for p in chunk.tolist()]
            dist = score_rows(seg, q, chunk, rows, bound, sub) if score is None else score(chunk, rows)
            best_rows, best_dist = _merge(seg, best_rows, best_dist, np.concatenate(rows), sizes, dist, k, allowed,
                                          distance_range, best_per_row, bound is not None)
        done = n
        if best_rows.size >= enough or done >= top:
            return best_rows, best_dist
        if allowed is not None and done < top:  # _widen counts the allowed rows of the rest
            seg.load_ids(order[done:top])
            if prepare is not None:
                prepare(order[done:top])
        n = _widen(order, offsets, lengths, done, top, enough - best_rows.size, k, allowed)


def _probing(seg: IvfSegment, q: npt.NDArray[np.generic], k: int, probe: Probe
             ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int, int, int]:
    """Partitions in probe order, their offsets and lengths, how many may be probed, the rows
    that are enough, and the partitions of the first round."""
    order, ranked = _ranked(seg, q)
    top = order.size if probe.maximum is None else min(probe.maximum, order.size)
    enough = k if probe.k is None else min(k, probe.k)
    first = first_round(probe, seg.metric, enough, ranked)
    return order, seg.offsets.astype(np.int64), seg.lengths.astype(np.int64), top, enough, first


def _search_walk(seg: IvfSegment, q: npt.NDArray[np.generic], k: int, probe: Probe, allowed: Allowed | None,
                 distance_range: tuple[float | None, float | None], best_per_row: bool, prepare: Prepare | None,
                 ef: int | None, mask: BoolMask | None) -> tuple[npt.NDArray[np.int64], F32]:
    """:func:`search_segment` by pylance's graph walk in each probed partition."""
    graph = seg.walk
    assert graph is not None
    width = k + k // 2 if ef is None else ef  # HnswQueryParams: ef defaults to 1.5 k (k with refine)
    if width < k:
        raise InvalidInputError(f"nearest: ef ({width}) must be at least k ({k}) for {seg.index_type}")
    order, offsets, lengths, top, enough, n = _probing(seg, q, k, probe)
    done = 0
    best_rows = np.empty(0, np.int64)
    best_dist = np.empty(0, np.float32)
    dist: F32 | None = None  # whole partitions' distances, where rows cannot be scored alone
    ok = mask if mask is not None or allowed is None else np.zeros(graph.rows, bool)
    while True:
        chunk = order[done:n]
        chunk = chunk[lengths[chunk] > 0]
        if chunk.size:
            seg.load(chunk)
            graph.load(chunk)
            if prepare is not None:
                prepare(chunk)
            score: Score | None = sq_row_scorer(seg, q, chunk)  # SQ: only the rows the walk reaches are scored
            if score is None or (ok is not None and mask is None):
                rows = [np.arange(offsets[p], offsets[p] + lengths[p], dtype=np.int64) for p in chunk.tolist()]
                flat = np.concatenate(rows)
                if ok is not None and mask is None:
                    assert allowed is not None
                    ok[flat] = allowed(flat)
                if score is None:
                    dist = np.empty(graph.rows, np.float32) if dist is None else dist
                    dist[flat] = score_rows(seg, q, chunk, rows)
                    score = _lookup(dist)
            found = walk(graph, chunk, score, k, width, ok, distance_range)
            cand = np.concatenate(found.rows)
            best_rows, best_dist = _merge(seg, best_rows, best_dist, cand, [r.size for r in found.rows],
                                          np.concatenate(found.dists), k, allowed, distance_range, best_per_row,
                                          False)
        done = n
        if best_rows.size >= enough or done >= top:
            return best_rows, best_dist
        if allowed is not None and done < top:
            seg.load_ids(order[done:top])
            if prepare is not None:
                prepare(order[done:top])
        n = _widen(order, offsets, lengths, done, top, enough - best_rows.size, k, allowed)


def _lookup(dist: F32) -> Score:
    def score(rows: npt.NDArray[np.integer[Any]]) -> F32:
        out: F32 = dist[rows]
        return out
    return score


def _kept_rows(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64], bound: float,
               tables: F32 | None) -> tuple[npt.NDArray[np.int64], F32] | None:
    """Rows of the whole partitions ``parts`` that may come within ``bound``, and their distances,
    scored from slices of the codes (no row lists, nothing back for the rows dropped); ``None``
    when the storage's pruning does not apply, then every row is scored by ``score_rows``."""
    if isinstance(seg.storage, PQStorage):
        return score_pq_spans(seg, q, parts, bound, tables)
    return score_sq_spans(seg, q, parts, bound)


def _merge(seg: IvfSegment, best_rows: npt.NDArray[np.int64], best_dist: F32, cand: npt.NDArray[np.int64],
           sizes: list[int], dist: F32, k: int, allowed: Allowed | None,
           distance_range: tuple[float | None, float | None], best_per_row: bool,
           pruned: bool) -> tuple[npt.NDArray[np.int64], F32]:
    """The ``k`` best of the rows so far and the newly scored rows ``cand`` (``sizes``: how many
    per partition; those allowed and in range)."""
    if pruned:  # rows dropped by score_rows are NaN: look at the survivors only
        live = np.flatnonzero(~np.isnan(dist))
        cand, dist = cand[live], dist[live]
    keep = np.ones(cand.size, bool) if allowed is None else allowed(cand)
    lo, hi = distance_range
    if lo is not None:
        keep &= dist >= lo
    if hi is not None:
        keep &= dist < hi
    if best_per_row:
        sel = _partition_best(cand, dist, keep, sizes, seg.row_ids, k)
        best_rows, best_dist = np.concatenate([best_rows, cand[sel]]), np.concatenate([best_dist, dist[sel]])
    else:
        best_rows = np.concatenate([best_rows, cand[keep]])
        best_dist = np.concatenate([best_dist, dist[keep]])
    ok = _within_k(best_dist, k)  # top_k, with the row ids of those rows only (not of every candidate)
    pick = ok[np.lexsort((seg.row_ids[best_rows[ok]], best_dist[ok]))[:k]]
    return best_rows[pick], best_dist[pick]


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
