"""Scoring the rows of probed IVF partitions from a segment's storage, as pylance does.

Distances are in the units pylance reports before any refine (``docs/formats/vector-indices.md``
§7.2, §8):

* FLAT: the exact distance (cosine vectors are stored normalized, so ``1 - q̂·x``);
* PQ: asymmetric distance with one lookup table per partition (``rust/lance-index/src/vector/pq/
  distance.rs``): squared l2 between the residual query and each codeword, summed over the
  codes; dot sums ``1 - q_s·c`` and subtracts ``m - 1``; cosine is l2 on the normalized query;
* SQ: for l2 and cosine the query is quantized with the segment's bounds and compared code to
  code, scaled back by ``(end - start)² / 255²`` (``rust/lance-index/src/vector/sq/storage.rs``);
  dot is ``1 - q·x̂`` on the dequantized vectors;
* RQ: pylance's RaBitQ estimates (:mod:`lance_format.index.vector.rabitq`).

**Pruning.** Given a bound (the k-th distance found so far), PQ rows stop after a few sub-vectors
and SQ rows after their first :data:`SQ_HEAD` dimensions when that partial sum, plus the least the
rest can add, is already beyond it; they come back as NaN. Rows kept are summed exactly as
without a bound, so their distances are bit-identical and the search returns the same rows.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.errors import NotSupportedError
from lance_format.index.vector import rabitq
from lance_format.index.vector.distance import F32, Metric, distances, normalize
from lance_format.index.vector.layout import FlatStorage, IvfSegment, PQStorage, RQStorage, SQStorage


@dataclass(frozen=True)
class _Prepared:
    """Arrays derived once per opened segment, so warm queries only gather and add.

    Attributes:
        codes_t: PQ codes with one contiguous row per sub-vector (``[m, n]``): a sub-vector's
            codes of the candidate rows are one gather instead of a strided column.
        sq_norms: ``||code||²`` of each SQ row, exact in float32 (integers below 2**24 for dim <= 128);
            filled per partition (``sq_ready``).
    """

    codes_t: npt.NDArray[np.uint8] | None = None
    sq_norms: F32 | None = None
    #: PQ codebook as ``[m, sub_dim, 2**nbits]`` float32 and its codewords' squared norms ``[m, 2**nbits]``.
    codebook_t: F32 | None = None
    codebook_norms: F32 | None = None
    #: The first SQ_HEAD codes of each SQ row, contiguous (a quarter of the codes' bytes): the first
    #: pass reads only these, where a strided view would pull every row's whole cache lines.
    sq_head: npt.NDArray[np.uint8] | None = None
    #: ``||code[:SQ_HEAD]||²`` of each SQ row: a lower bound of its distance from the first dimensions.
    sq_head_norms: F32 | None = None
    #: Per partition, whether its rows of the three SQ arrays above are filled: they are filled when
    #: a query first probes it (a first query on 1M x 128 codes probes a few percent of the rows).
    sq_ready: npt.NDArray[np.bool_] | None = None
    #: Per partition, whether its columns of ``codes_t`` are filled (when a query first probes it).
    pq_ready: npt.NDArray[np.bool_] | None = None


_PREPARED: dict[int, _Prepared] = {}
#: Dimensions of the first SQ pass when rows can be pruned (:func:`_score_sq`).
SQ_HEAD = 32


def _prepared(seg: IvfSegment) -> _Prepared:
    key = id(seg)
    hit = _PREPARED.get(key)
    if hit is None:
        st = seg.storage
        if isinstance(st, PQStorage):
            cb = st.codebook.astype(np.float32)
            # filled per partition (_pq_ready): a lazily read segment has only the probed ones
            hit = _Prepared(codes_t=np.empty(st.codes.shape[::-1], np.uint8), pq_ready=np.zeros(seg.lengths.size, bool),
                            codebook_t=np.ascontiguousarray(cb.transpose(0, 2, 1)),
                            codebook_norms=np.einsum("skd,skd->sk", cb, cb))
        elif isinstance(st, SQStorage) and st.codes.shape[1] <= 128:
            n = st.codes.shape[0]
            head = st.codes.shape[1] >= 2 * SQ_HEAD
            hit = _Prepared(sq_norms=np.empty(n, np.float32), sq_head=np.empty((n, SQ_HEAD), np.uint8) if head else None,
                            sq_head_norms=np.empty(n, np.float32) if head else None,
                            sq_ready=np.zeros(seg.lengths.size, bool))
        else:
            hit = _Prepared()
        _PREPARED[key] = hit
        weakref.finalize(seg, _PREPARED.pop, key, None)  # ids are reused once the segment is gone
    return hit


def _sq_ready(seg: IvfSegment, st: SQStorage, prep: _Prepared, parts: npt.NDArray[np.int64]) -> None:
    """Fill the prepared SQ arrays for the partitions ``parts`` not filled yet (the same values
    as computed for the whole segment: each row's sums are exact integers)."""
    assert prep.sq_ready is not None and prep.sq_norms is not None
    todo = parts[~prep.sq_ready[parts]]
    for p in todo.tolist():
        lo = int(seg.offsets[p])
        hi = lo + int(seg.lengths[p])
        codes = st.codes[lo:hi]
        prep.sq_norms[lo:hi] = np.einsum("ij,ij->i", codes, codes, dtype=np.float32)
        if prep.sq_head is not None and prep.sq_head_norms is not None:
            head = prep.sq_head[lo:hi]
            head[:] = codes[:, :SQ_HEAD]
            prep.sq_head_norms[lo:hi] = np.einsum("ij,ij->i", head, head, dtype=np.float32)
        prep.sq_ready[p] = True  # after the values: a concurrent query at worst fills it again


def _pq_ready(seg: IvfSegment, st: PQStorage, prep: _Prepared, parts: npt.NDArray[np.int64]) -> None:
    """Fill the transposed PQ codes of the partitions ``parts`` not filled yet."""
    assert prep.pq_ready is not None and prep.codes_t is not None
    todo = parts[~prep.pq_ready[parts]]
    offsets = seg.offsets if todo.size else None
    for p in todo.tolist():
        assert offsets is not None
        lo = int(offsets[p])
        hi = lo + int(seg.lengths[p])
        prep.codes_t[:, lo:hi] = st.codes[lo:hi].T
        prep.pq_ready[p] = True  # after the values, as in _sq_ready


def _is_range(r: npt.NDArray[np.int64]) -> bool:
    # rows come ascending and distinct (see score_rows), so the end points tell a contiguous run:
    # an O(1) check, where a diff over every row cost ~0.1 ms per probed partition
    return bool(r.size) and int(r[-1]) - int(r[0]) + 1 == r.size


def pq_tables(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64]) -> F32:
    """PQ lookup tables for ``q`` (the raw query) and the partitions ``parts``: ``[m, len(parts) · 2**nbits]``
    (``[m, 2**nbits]`` on dot, which does not use residuals). Computed once per probing round: the
    matmul's rounding depends on how many partitions it covers."""
    st = seg.storage
    assert isinstance(st, PQStorage)
    qf = _query(seg, q)
    m, k, sd = st.codebook.shape
    if seg.metric == "dot":
        dot: F32 = (1 - np.einsum("sd,skd->sk", qf.reshape(m, sd), st.codebook.astype(np.float32, copy=False)))
        return dot.reshape(m, k)
    prep = _prepared(seg)
    assert prep.codebook_t is not None and prep.codebook_norms is not None
    # One lookup table per probed partition, all built at once: [m, partitions · k] squared l2
    # between each residual sub-query and each codeword, as ||r||² - 2 r·c + ||c||² (one
    # small matmul per sub-vector; within 1e-5 of summing the squared differences).
    resid = (qf[None, :] - seg.centroids[parts].astype(np.float32)).reshape(parts.size, m, sd).transpose(1, 0, 2)
    out: F32 = np.matmul(resid, prep.codebook_t)  # [m, partitions, k]: r·c
    out *= -2  # in place, the same float32 operations as ||r||² - 2 r·c + ||c||² written out
    out += np.einsum("spd,spd->sp", resid, resid)[:, :, None]
    out += prep.codebook_norms[:, None, :]
    return out.reshape(m, parts.size * k)


def _query(seg: IvfSegment, q: npt.NDArray[np.generic]) -> npt.NDArray[np.floating]:
    qf: npt.NDArray[np.floating] = np.asarray(q, dtype=np.float32)
    return normalize(qf[None, :])[0] if seg.metric == "cosine" else qf


def _score_pq(seg: IvfSegment, st: PQStorage, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64],
              rows: list[npt.NDArray[np.int64]], flat_rows: npt.NDArray[np.int64], bound: float | None,
              tables: F32 | None) -> F32:
    m, k = st.codebook.shape[:2]
    if flat_rows.size == 0:
        return np.empty(0, np.float32)
    prep = _prepared(seg)
    assert prep.codes_t is not None
    _pq_ready(seg, st, prep, parts)
    if tables is None:
        tables = pq_tables(seg, q, parts)
    width = 0 if seg.metric == "dot" else k  # table columns per partition (dot: one shared table)
    shift = float(m - 1) if seg.metric == "dot" else 0.0
    stops = _pq_stops(m) if bound is not None and math.isfinite(bound) else []
    first = stops[0] if stops else m
    # Summed one sub-vector after the other (as pylance adds the table entries), partition by
    # partition: each step gathers a partition's codes of one sub-vector (a slice of the
    # transposed codes) from that partition's table of 2**nbits entries, small enough to stay in
    # cache; no [n, m] temporary, no bounds checks (codes are in range).
    acc = np.empty(flat_rows.size, np.float32)
    at = 0
    for i, r in enumerate(rows):
        if not r.size:
            continue
        sel: slice | npt.NDArray[np.int64] = slice(int(r[0]), int(r[0]) + r.size) if _is_range(r) else r
        out = acc[at:at + r.size]
        lo = i * width
        np.take(tables[0, lo:lo + k], prep.codes_t[0, sel], out=out, mode="clip")
        for s in range(1, first):
            out += np.take(tables[s, lo:lo + k], prep.codes_t[s, sel], mode="clip")
        at += r.size
    if stops:
        assert bound is not None
        sizes = np.fromiter((r.size for r in rows), np.int64, len(rows))
        pos, acc = _pq_pruned(prep.codes_t, tables, np.cumsum(sizes), width, flat_rows, acc, stops, bound, shift)
        out = np.full(flat_rows.size, np.nan, np.float32)
        out[pos] = acc
        return out
    if shift:
        acc -= np.float32(shift)
    return acc


def _pq_stops(m: int) -> list[int]:
    """Sub-vector counts after which rows are pruned (``m // 8``, ``m // 4``, ``m // 2``), then ``m``."""
    cuts = sorted({c for c in (m // 8, m // 4, m // 2) if 0 < c < m})
    return [*cuts, m] if cuts else []


def _pq_pruned(codes_t: npt.NDArray[np.uint8], tables: F32, ends: npt.NDArray[np.int64], width: int,
               flat_rows: npt.NDArray[np.int64], acc: F32, stops: list[int], bound: float,
               shift: float, spans: bool = False) -> tuple[npt.NDArray[np.int64], F32]:
    """Finish PQ sums of ``stops[0]`` sub-vectors, dropping rows that cannot reach ``bound``:
    the kept rows (positions into ``acc``, or segment rows with ``spans``) and their distances.

    A row's final sum is at least its partial sum plus the smallest table entry of every
    sub-vector still to add (float rounding is monotone, and ``margin`` covers the rounding of
    the additions), so a row whose partial sum already exceeds ``bound`` minus that rest is
    farther than ``bound`` and gets NaN. Rows kept are summed in the same order as without
    pruning, so their distances are bit-identical. ``ends``: where each partition's rows end in
    ``flat_rows``; its table columns start at ``width`` times its index. With ``spans``,
    ``flat_rows`` holds each partition's first segment row instead (its rows are contiguous).
    """
    m = tables.shape[0]
    mins = tables.min(axis=1).astype(np.float64)
    rest = np.concatenate([np.cumsum(mins[::-1])[::-1], [0.0]])  # rest[s]: sum of mins of sub-vectors s..m-1
    mag = float(np.maximum(tables.max(axis=1).astype(np.float64), -mins).sum())  # sum of the largest |entry|
    margin = 4 * (m + 2) * float(np.finfo(np.float32).eps) * (mag + abs(bound) + shift)
    pos = np.flatnonzero(acc <= bound + shift - rest[stops[0]] + margin)
    acc = acc[pos]
    part = np.searchsorted(ends, pos, side="right")  # each kept row's partition (index into ends)
    if spans:  # a partition's rows are contiguous: its first row plus the offset within it
        first = flat_rows - np.concatenate([[0], ends[:-1]])
        r = pos + first[part]
    else:
        r = flat_rows[pos]
    base = (part * width).astype(np.int32)  # the row's table columns
    for done, stop in zip(stops[:-1], stops[1:], strict=True):
        if done != stops[0]:
            keep = np.flatnonzero(acc <= bound + shift - rest[done] + margin)
            pos, acc, base, r = pos[keep], acc[keep], base[keep], r[keep]
        idx = np.empty(pos.size, np.int32)
        val = np.empty(pos.size, np.float32)
        for s in range(done, stop):
            np.add(base, codes_t[s].take(r), out=idx)
            np.take(tables[s], idx, out=val, mode="clip")
            acc += val
    if shift:
        acc -= np.float32(shift)
    return (r if spans else pos), acc


def score_pq_spans(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64],
                   bound: float, tables: F32 | None = None) -> tuple[npt.NDArray[np.int64], F32]:
    """The rows of the whole partitions ``parts`` of a PQ segment that may lie within ``bound``
    of ``q``, and their distances (the same values as :func:`score_rows`, bit for bit).

    What :func:`score_rows` with a bound computes, for the common case of scoring every row of
    the probed partitions: each partition's codes are a slice of the transposed codes, so no row
    list is built, and only the rows kept come back (no array of NaN for the pruned ones).
    ``tables``: as for :func:`score_rows`.
    """
    st = seg.storage
    assert isinstance(st, PQStorage)
    seg.load(parts)
    prep = _prepared(seg)
    assert prep.codes_t is not None
    _pq_ready(seg, st, prep, parts)
    if tables is None:
        tables = pq_tables(seg, q, parts)
    m, k = st.codebook.shape[:2]
    width = 0 if seg.metric == "dot" else k
    shift = float(m - 1) if seg.metric == "dot" else 0.0
    starts = seg.offsets[parts].astype(np.int64)
    sizes = seg.lengths[parts].astype(np.int64)
    ends = np.cumsum(sizes)
    stops = _pq_stops(m) if math.isfinite(bound) else []
    first = stops[0] if stops else m
    acc = np.empty(int(ends[-1]) if ends.size else 0, np.float32)
    codes_t = prep.codes_t
    # the same summation order as _score_pq: sub-vector after sub-vector, partition by partition
    for i, (lo, n, at) in enumerate(zip(starts.tolist(), sizes.tolist(), (ends - sizes).tolist(), strict=True)):
        if n:
            out = acc[at:at + n]
            col = i * width
            np.take(tables[0, col:col + k], codes_t[0, lo:lo + n], out=out, mode="clip")
            for s in range(1, first):
                out += np.take(tables[s, col:col + k], codes_t[s, lo:lo + n], mode="clip")
    if stops:
        return _pq_pruned(codes_t, tables, ends, width, starts, acc, stops, bound, shift, spans=True)
    rows = np.concatenate([np.arange(lo, lo + n, dtype=np.int64) for lo, n in zip(starts.tolist(), sizes.tolist(),
                                                                                  strict=True)] or [np.empty(0, np.int64)])
    if shift:
        acc -= np.float32(shift)
    return rows, acc


def _code_blocks(codes: npt.NDArray[Any], rows: list[npt.NDArray[np.int64]],
                 axis: int = 0) -> list[npt.NDArray[Any]]:
    """The codes of each probed partition along ``axis`` (rows, or columns of transposed codes):
    whole partitions are views, not a gather of every row."""
    def block(r: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        sel: slice | npt.NDArray[np.int64] = slice(int(r[0]), int(r[0]) + r.size) if _is_range(r) else r
        return codes[sel] if axis == 0 else codes[:, sel]
    return [block(r) for r in rows if r.size]


def _score_sq(seg: IvfSegment, st: SQStorage, q: npt.NDArray[np.floating], parts: npt.NDArray[np.int64],
              rows: list[npt.NDArray[np.int64]], flat_rows: npt.NDArray[np.int64], bound: float | None = None) -> F32:
    span = st.end - st.start
    if flat_rows.size == 0:
        return np.empty(0, np.float32)
    if seg.metric == "dot":
        # 14.0.2 scores dot on the dequantized vectors, ``start + code * span / 255`` (observed on
        # its ``_distance``), not code to code as the l2 path does.
        xh = (st.start + st.codes[flat_rows].astype(np.float64) * (span / 255.0)).astype(np.float32)
        return distances("dot", xh, q)
    qc, scaled = _sq_query(st, q)
    # ||c - qc||² = ||c||² - 2 c·qc + ||qc||² in float32 (one BLAS product, no int64 copy): every term
    # and partial sum is an integer below 2 · 255² · dim < 2**24 for dim <= 128, so float32 holds it exactly.
    # The products are einsum, not BLAS: a multi-threaded sgemv is many times slower on a busy machine.
    blocks = _code_blocks(st.codes, rows)
    prep = _prepared(seg)
    if prep.sq_ready is not None:
        _sq_ready(seg, st, prep, parts)
    norms = prep.sq_norms
    if norms is None:  # wider vectors could round: the exact integer path
        qi = qc.astype(np.int64)[None, :]
        diffs = [c.astype(np.int64) - qi for c in blocks]
        return scaled(np.concatenate([np.einsum("ij,ij->i", d, d) for d in diffs]).astype(np.float32))
    limit = None if bound is None or span == 0 or prep.sq_head is None else _raw_limit(bound, scaled)
    if limit is None or prep.sq_head is None or prep.sq_head_norms is None:
        cross = np.concatenate([np.einsum("ij,j->i", c, qc) for c in blocks])
        return scaled(norms[flat_rows] - 2 * cross + np.float32(qc @ qc))
    # Two passes: the squared distance over the first SQ_HEAD dimensions is a lower bound of the
    # whole one (a sum of non-negative integers, exact in float32), so rows whose head alone is
    # beyond ``bound`` (beyond ``limit`` in code units) are dropped (NaN) and only the others are
    # scored in full, with the same exact integer sums (bit-identical distances).
    qh = qc[:SQ_HEAD]
    head_cross = np.concatenate([np.einsum("ij,j->i", c, qh) for c in _code_blocks(prep.sq_head, rows)])
    head_norms = np.concatenate(_code_blocks(prep.sq_head_norms, rows))  # views of whole partitions
    keep = np.flatnonzero(head_norms - 2 * head_cross <= limit - float(qh @ qh))
    r = flat_rows[keep]
    out = np.full(flat_rows.size, np.nan, np.float32)
    out[keep] = scaled(norms[r] - 2 * np.einsum("ij,j->i", st.codes[r], qc) + np.float32(qc @ qc))
    return out


def _sq_query(st: SQStorage, q: npt.NDArray[np.floating]) -> tuple[F32, Callable[[F32], F32]]:
    """The query quantized with the segment's bounds, and the map from code-space distances to
    pylance's units (monotone)."""
    span = st.end - st.start
    if span == 0:
        qc = np.zeros(q.size, np.float32)
    else:  # Rust's saturating `as u8`: NaN -> 0, out of range clamped
        qc = np.clip(np.nan_to_num((q.astype(np.float64) - st.start) * 255.0 / span, nan=0.0), 0, 255)
        qc = qc.astype(np.int64).astype(np.float32)

    def scaled(raw: F32) -> F32:
        out: F32 = (raw.astype(np.float32) * np.float32(span) ** 2 / np.float32(255.0 ** 2)).astype(np.float32)
        return out

    return qc, scaled


def score_sq_spans(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64],
                   bound: float) -> tuple[npt.NDArray[np.int64], F32] | None:
    """What :func:`score_pq_spans` does for SQ codes of l2 / cosine segments: the rows of the
    whole partitions ``parts`` that may lie within ``bound`` of ``q`` and their distances (those
    of :func:`score_rows`, bit for bit), partition by partition from contiguous views; ``None``
    when the two-pass pruning of :func:`_score_sq` does not apply (the caller scores every row).
    """
    st = seg.storage
    assert isinstance(st, SQStorage) and seg.metric != "dot"
    seg.load(parts)
    prep = _prepared(seg)
    if st.end - st.start == 0 or prep.sq_ready is None or prep.sq_head is None or prep.sq_head_norms is None:
        return None
    qc, scaled = _sq_query(st, _query(seg, q))
    limit = _raw_limit(bound, scaled)
    if limit is None:
        return None
    _sq_ready(seg, st, prep, parts)
    assert prep.sq_norms is not None
    qh = qc[:SQ_HEAD]
    cut = limit - float(qh @ qh)
    kept = []
    # the same exact integer sums as _score_sq, one partition's contiguous rows at a time
    for lo, n in zip(seg.offsets[parts].tolist(), seg.lengths[parts].tolist(), strict=True):
        if n:
            head = np.einsum("ij,j->i", prep.sq_head[lo:lo + n], qh)
            kept.append(lo + np.flatnonzero(prep.sq_head_norms[lo:lo + n] - 2 * head <= cut))
    r = np.concatenate(kept) if kept else np.empty(0, np.int64)
    return r, scaled(prep.sq_norms[r] - 2 * np.einsum("ij,j->i", st.codes[r], qc) + np.float32(qc @ qc))


def _raw_limit(bound: float, scaled: Callable[[F32], F32]) -> float | None:
    """The largest whole number ``h`` with ``scaled(h) <= bound`` (``scaled``: SQ code-space
    distance to pylance's units, monotone), so that integer distances compare in code space;
    ``None`` when no finite limit applies (then nothing is pruned)."""
    if not math.isfinite(bound) or bound < 0:
        return None
    one = float(scaled(np.ones(1, np.float32))[0])
    guess = math.floor(bound / one) if one > 0 else -1
    if guess < 0 or guess >= 1 << 24:  # beyond float32's exact integers: no pruning
        return None
    cand = np.arange(max(guess - 8, 0), guess + 9, dtype=np.float32)  # rounding moves it by a few units
    ok = cand[scaled(cand) <= bound]
    if ok.size == 0 or ok[-1] == cand[-1]:  # the limit is outside the window
        return None
    return float(ok[-1])


def score_rows(seg: IvfSegment, q: npt.NDArray[np.generic], parts: npt.NDArray[np.int64],
               rows: list[npt.NDArray[np.int64]], bound: float | None = None, tables: F32 | None = None) -> F32:
    """Distances from ``q`` to the segment rows ``rows[i]`` of partitions ``parts[i]``.

    Each ``rows[i]`` is ascending and distinct (positions in the segment); a contiguous run is
    scored from a view of the codes instead of a gather. IVF_RQ rows get pylance's estimated
    distances (:func:`rabitq.estimate`) for l2 and cosine. With a ``bound``, PQ rows and SQ rows
    of l2 / cosine indices (:func:`prunable`) whose distance is certainly above it may come back
    as NaN instead (the others are unchanged, bit for bit). ``tables``: the PQ lookup tables of
    ``parts`` (:func:`pq_tables`), when the caller computed them for more partitions at once.

    Raises:
        NotSupportedError: IVF_RQ (RaBitQ) storage of a dot index.
    """
    seg.load(parts)  # a lazily read segment reads the codes of partitions probed first now
    st = seg.storage
    metric: Metric = seg.metric
    flat_rows = np.concatenate(rows) if rows else np.empty(0, np.int64)
    qf = _query(seg, q)
    if isinstance(st, FlatStorage):
        if metric == "cosine":  # stored normalized: 1 - cos is 1 - q̂·x
            return distances("dot", st.vectors[flat_rows], qf)
        return distances(metric, st.vectors[flat_rows], q if metric == "hamming" else qf)
    if isinstance(st, PQStorage):
        return _score_pq(seg, st, q, parts, rows, flat_rows, bound, tables)
    if isinstance(st, SQStorage):
        return _score_sq(seg, st, qf, parts, rows, flat_rows, bound)
    assert isinstance(st, RQStorage)
    if metric == "dot":  # 14.0.2's dot estimates differ from rabitq.estimate's: callers score exactly
        raise NotSupportedError(f"scoring {seg.index_type} (RaBitQ) codes on dot is not supported; "
                                "pass use_index=False")
    return rabitq.estimate(st, np.asarray(q, np.float32), metric, np.asarray(seg.centroids, np.float32), parts,
                           seg.offsets.astype(np.int64), seg.lengths.astype(np.int64))


def prunable(seg: IvfSegment) -> bool:
    """Whether :func:`score_rows` can drop rows beyond a bound for this segment's storage."""
    st = seg.storage
    return isinstance(st, PQStorage) or (isinstance(st, SQStorage) and seg.metric != "dot")


def sq_row_scorer(seg: IvfSegment, q: npt.NDArray[np.generic],
                  parts: npt.NDArray[np.int64]) -> Callable[[npt.NDArray[np.integer[Any]]], F32] | None:
    """Distances of any rows of the (loaded) partitions ``parts`` of an SQ segment, one gather
    each, for searches that score the rows they reach (a graph walk) instead of whole partitions;
    the same values as :func:`score_rows` (exact integer sums in code space). ``None`` where
    those sums are not exact (dot, wide vectors): the caller scores whole partitions."""
    st = seg.storage
    if not isinstance(st, SQStorage) or seg.metric == "dot":
        return None
    prep = _prepared(seg)
    if prep.sq_ready is None or prep.sq_norms is None:
        return None
    _sq_ready(seg, st, prep, parts)
    qc, _ = _sq_query(st, _query(seg, q))
    minus2 = -2 * qc
    qq = np.float32(qc @ qc)
    norms, codes = prep.sq_norms, st.codes
    # _sq_query's scaling, in place: (raw * span²) / 255², each step in float32 as there
    span2, denom = np.float32(st.end - st.start) ** 2, np.float32(255.0 ** 2)

    def score(rows: npt.NDArray[np.integer]) -> F32:
        # integer sums below 2**24 (see _score_sq): exact in float32 in any order, so a matmul of
        # the gathered codes gives _score_sq's values (and is ~1.5x faster than einsum here)
        raw: F32 = codes[rows] @ minus2
        raw += norms[rows]
        raw += qq
        raw *= span2
        raw /= denom
        return raw

    return score
