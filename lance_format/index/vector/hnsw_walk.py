"""Searching IVF_HNSW partitions by walking their graphs, as pylance does, vectorised over partitions.

pylance searches each probed partition of an ``IVF_HNSW_*`` index from the entry point its
``lance:hnsw`` metadata names (14.0.2 writes the node of the top level there; older sources
started from node 0): a greedy descent through the upper levels, then a beam search of width
``ef`` on level 0 (default ``1.5 k``), and returns the ``k`` best nodes the beam found
(``rust/lance-index/src/vector/hnsw/builder.rs`` ``search_inner`` / ``HnswQueryParams``,
``rust/lance-index/src/vector/graph.rs`` ``greedy_search`` / ``beam_search``). The beam misses some true neighbours, so reproducing
pylance's answers means walking the same graph with the same rules:

* a neighbour joins the candidates while the results hold fewer than ``ef`` nodes, or when its
  distance is at most the farthest result at that moment (14.0.2 compares with the results as
  they stand, not as they stood before the expansion: with the older rule 29 of 200 queries
  on a 1M-row index differed from pylance's answers, with this one none);
* those the prefilter allows (and within the distance range) join the results, which keep the
  ``ef`` nearest;
* the walk stops when the nearest candidate is farther than the farthest of ``ef`` results;
* with a prefilter keeping fewer than a tenth of a partition, the partition is searched flat.

Python cannot afford a heap step per node, so the probed partitions walk in lockstep: each
iteration expands the nearest candidate of every partition still walking, with numpy over the
``partitions × neighbours`` block. Within one expansion the outcome does not depend on the
order of the neighbour list (up to ties), so the block step is exact. Distances come from the
caller's ``score``, asked only for the nodes the walk reaches. The format and search rules are
written down in ``docs/formats/vector-indices.md`` (§5.2, §8).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import distinct, numbers
from lance_format.errors import CorruptFileError

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
BoolMask = npt.NDArray[np.bool_]
#: ``read(first_row, rows)``: rows of the graph table (``__vector_id``, ``__neighbors``).
ReadRows = Callable[[int, int], pa.Table]
#: ``score(rows)``: the query's distances to segment rows of the walked partitions.
Score = Callable[[npt.NDArray[np.integer[Any]]], F32]


def _list_parts(col: pa.ChunkedArray | pa.Array, where: str) -> tuple[I64, I64]:
    """Offsets (rows + 1) and values of a ``list<uint32>`` column."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        raise CorruptFileError(f"{where}: null neighbour lists in the HNSW graph")
    offsets = numbers(arr.offsets).astype(np.int64)  # from the buffers: no pandas import
    values = numbers(arr.values).astype(np.int64)
    return offsets - offsets[0], values[offsets[0]:offsets[-1]]


def _padded(lens: I64, values: I64, width: int, pad: int) -> I32:
    """Lists of lengths ``lens`` (``values`` one after the other) as rows of ``width``, ``pad`` after."""
    out = np.full((lens.size, width), pad, np.int32)
    out[np.arange(width) < lens[:, None]] = values  # a row-major mask takes the values in list order
    return out


class _Level:
    """One upper level of every loaded partition: ``pos[row]`` is the node's row in ``nb``
    (0: not on this level, whose ``nb`` row is all sentinels)."""

    def __init__(self, n: int, width: int) -> None:
        self.pos = np.zeros(n + 1, np.int32)  # calloc'd: untouched pages cost nothing
        self.nb = np.full((64, width), n, np.int32)
        self.used = 1
        self.sentinel = n

    def add(self, rows: I64, lists: I64, values: I64, base: int) -> None:
        n, width = rows.size, self.nb.shape[1]
        lens = np.diff(lists)
        if lens.size and int(lens.max()) > width:
            width = int(lens.max())
            wider = np.full((self.nb.shape[0], width), self.sentinel, np.int32)
            wider[:, :self.nb.shape[1]] = self.nb
            self.nb = wider
        if self.used + n > self.nb.shape[0]:
            grown = np.full((max(2 * self.nb.shape[0], self.used + n), width), self.sentinel, np.int32)
            grown[:self.used] = self.nb[:self.used]
            self.nb = grown
        at = np.arange(self.used, self.used + n)
        self.pos[rows + base] = at
        self.nb[self.used:self.used + n] = _padded(lens, values + base, width, self.sentinel)
        self.used += n


class GraphRows:
    """A segment's HNSW graphs in segment row numbers (partition offset + node), read per
    partition on first use: level 0 as a ``[rows + 1, 2m]`` matrix of neighbour rows (the last
    row and the padding hold the sentinel ``rows``), upper levels as :class:`_Level`."""

    def __init__(self, read: ReadRows, partitions: tuple[dict[str, Any], ...], lengths: npt.NDArray[np.uint32],
                 graph_lengths: npt.NDArray[np.uint32], where: str) -> None:
        self._read = read
        self._meta = partitions
        self._where = where
        self.rows = int(lengths.sum())
        self.lengths = lengths.astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)[:-1]]).astype(np.int64)
        self._graph_starts = np.concatenate([[0], np.cumsum(graph_lengths, dtype=np.int64)[:-1]]).tolist()
        self._graph_lengths = graph_lengths.astype(np.int64).tolist()
        # m from a partition that has a graph (an empty partition's metadata is empty)
        m = next((int(p["params"]["m"]) for p in partitions if "m" in p.get("params", {})), 20)
        self.level0 = np.empty((self.rows + 1, 2 * m), np.int32)  # rows filled as partitions load
        self.level0[self.rows] = self.rows
        self.upper: list[_Level] = []
        #: Per partition, the segment row of its graph's entry point (the node of its top level).
        self.entries = self.starts + np.array([int(m.get("entry_point", 0)) for m in partitions] or [0],
                                              np.int64)[:lengths.size]
        self._loaded = np.zeros(lengths.size, bool)
        self._lock = threading.Lock()

    def load(self, parts: I64) -> None:
        """Read the graphs of the partitions ``parts`` not read yet."""
        if self._loaded[parts].all():
            return
        with self._lock:
            for p in distinct(parts[~self._loaded[parts]]).tolist():
                if self._graph_lengths[p]:
                    self._load_one(p)
                self._loaded[p] = True

    def _load_one(self, p: int) -> None:
        table = self._read(self._graph_starts[p], self._graph_lengths[p])
        offsets = [int(v) for v in self._meta[p].get("level_offsets", [0, table.num_rows])]
        if offsets[-1] > table.num_rows or offsets != sorted(offsets):
            raise CorruptFileError(f"{self._where}: partition {p} has level offsets {offsets[:8]} "
                                   f"for {table.num_rows} graph rows")
        base = int(self.starts[p])
        ids = numbers(table.column("__vector_id")).astype(np.int64)
        lists, values = _list_parts(table.column("__neighbors"), self._where)
        for level, (lo, hi) in enumerate(zip(offsets, offsets[1:], strict=False)):
            rows = ids[lo:hi]
            sub = lists[lo:hi + 1]
            vals = values[sub[0]:sub[-1]]
            sub = sub - sub[0]
            if level == 0:
                self._put_level0(rows, sub, vals, base)
                continue
            while len(self.upper) < level:
                self.upper.append(_Level(self.rows, max(1, self.level0.shape[1] // 2)))
            self.upper[level - 1].add(rows, sub, vals, base)

    def _put_level0(self, rows: I64, lists: I64, values: I64, base: int) -> None:
        lens = np.diff(lists)
        if lens.size and int(lens.max()) > self.level0.shape[1]:  # wider lists than 2m: widen
            # pylance's level-0 lists reach 2m + 1 now and then (1 node in ~25k on a 1M-row
            # index): copy only the rows of partitions already read (and the sentinel row), as
            # a copy of the whole matrix would write [rows, 2m] int32 (160 MB at 1M rows) on
            # one query; the other rows are still unread, as in the matrix they replace
            old = self.level0.shape[1]
            wider = np.empty((self.rows + 1, int(lens.max())), np.int32)
            spans = [(int(self.starts[p]), int(self.starts[p] + self.lengths[p]))
                     for p in np.flatnonzero(self._loaded).tolist()] + [(self.rows, self.rows + 1)]
            for lo, hi in spans:
                wider[lo:hi, :old] = self.level0[lo:hi]
                wider[lo:hi, old:] = self.rows
            self.level0 = wider
        block = _padded(lens, values + base, self.level0.shape[1], self.rows)
        if rows.size and int(rows[0]) == 0 and int(rows[-1]) == rows.size - 1:  # level 0 lists nodes in order
            self.level0[base:base + rows.size] = block
        else:
            self.level0[rows + base] = block


@dataclass(frozen=True)
class WalkResult:
    """Per walked partition, its ``k`` best rows (segment rows) and distances, nearest first."""

    rows: list[I64]
    dists: list[F32]


def walk(graph: GraphRows, parts: I64, score: Score, k: int, ef: int, ok: BoolMask | None,
         distance_range: tuple[float | None, float | None] = (None, None)) -> WalkResult:
    """pylance's HNSW search of the partitions ``parts`` (already :meth:`GraphRows.load`-ed).

    Args:
        graph: The segment's graphs.
        parts: Partitions to search (each with rows).
        score: Distances of segment rows of ``parts`` (never asked for the sentinel row).
        k: Results per partition.
        ef: Beam width (at least ``k``).
        ok: Which segment rows may be returned (``None``: every row).
        distance_range: ``[lower, upper)`` bounds on returned distances.
    """
    lo, hi = distance_range
    n = graph.rows
    starts = graph.starts[parts]
    out_rows: list[I64] = [np.empty(0, np.int64)] * parts.size
    out_d: list[F32] = [np.empty(0, np.float32)] * parts.size
    walk_at = np.arange(parts.size)
    if ok is not None:  # pylance: a partition whose prefilter keeps under a tenth is scored flat
        lens = graph.lengths[parts]
        kept = np.array([int(np.count_nonzero(ok[s:s + m])) for s, m in zip(starts.tolist(), lens.tolist(), strict=True)])
        flat = kept < (lens * 10) // 100
        for i in np.flatnonzero(flat).tolist():
            out_rows[i], out_d[i] = _flat(int(starts[i]), int(lens[i]), score, ok, k, lo, hi)
        walk_at = np.flatnonzero(~flat)
        if (kept[walk_at] == lens[walk_at]).all():
            ok = None  # every row of the walked partitions may be returned: no per-node check
    if walk_at.size:
        rows, dists = _beam(graph, graph.entries[parts[walk_at]], score, k, ef, ok, lo, hi, n)
        for j, i in enumerate(walk_at.tolist()):
            out_rows[i], out_d[i] = rows[j], dists[j]
    return WalkResult(out_rows, out_d)


def _flat(start: int, length: int, score: Score, ok: BoolMask, k: int, lo: float | None,
          hi: float | None) -> tuple[I64, F32]:
    """pylance's flat search of one partition: its allowed rows within ``(lo, hi]``, ``k`` nearest."""
    rows = start + np.flatnonzero(ok[start:start + length])
    d = score(rows) if rows.size else np.empty(0, np.float32)
    keep = np.ones(rows.size, bool)
    if lo is not None:
        keep &= d > lo
    if hi is not None:
        keep &= d <= hi
    rows, d = rows[keep], d[keep]
    order = np.argsort(d, kind="stable")[:k]
    return rows[order], d[order]


def _scored(score: Score, nodes: npt.NDArray[Any], mask: BoolMask) -> F32:
    """Distances of ``nodes[mask]`` in place, ``inf`` elsewhere."""
    out = np.full(nodes.shape, np.inf, np.float32)
    if mask.any():
        out[mask] = score(nodes[mask])
    return out


def _descend(graph: GraphRows, cur: I64, score: Score) -> tuple[I64, F32]:
    """The greedy descent through the upper levels, from each partition's entry point."""
    curd = score(cur)
    rank = np.arange(cur.size)
    for level in reversed(graph.upper):
        while True:
            nb = level.nb[level.pos[cur]]
            dd = _scored(score, nb, nb != graph.rows)
            j = np.argmin(dd, axis=1)
            best = dd[rank, j]
            better = best < curd
            if not better.any():
                break
            cur = np.where(better, nb[rank, j], cur)
            curd = np.where(better, best, curd)
    return cur, curd


def _beam(graph: GraphRows, entry: I64, score: Score, k: int, ef: int, ok: BoolMask | None,
          lo: float | None, hi: float | None, n: int) -> tuple[list[I64], list[F32]]:
    """Level 0 of every partition in lockstep: ``[partitions, …]`` arrays of candidates (popped
    and empty slots hold ``inf``) and of the ``ef`` results (sorted, ``inf`` while not found)."""
    cur, curd = _descend(graph, entry, score)
    p = cur.size
    rank = np.arange(p)
    visited = np.zeros(n + 1, bool)
    visited[n] = True
    visited[cur] = True
    level0 = graph.level0
    width = level0.shape[1]
    inf = np.float32(np.inf)

    def allowed(nodes: npt.NDArray[Any], d: F32) -> BoolMask:
        a = np.ones(d.shape, bool) if ok is None else ok[np.minimum(nodes, n - 1)]
        if lo is not None:
            a &= d >= lo
        if hi is not None:
            a &= d < hi
        return a

    filtered = ok is not None or lo is not None or hi is not None
    # candidates in [p, cap] buffers, columns [0, used) in arrival order: new ones are written
    # after the others (a concatenation per expansion copied all of them), popped ones hold inf
    cap = 16 * width + 1  # room for ~15 expansions between compactions
    cand_d = np.full((p, cap), inf, np.float32)
    cand_n = np.full((p, cap), n, np.int32)
    cand_d[:, 0], cand_n[:, 0] = curd, cur
    used = 1
    res_d = np.full((p, ef), np.inf, np.float32)
    res_n = np.full((p, ef), n, np.int32)
    first = allowed(cur, curd)
    res_d[first, 0], res_n[first, 0] = curd[first], cur[first]
    active = np.ones(p, bool)
    col = rank[:, None]
    # the default ef (1.5 k) over a few partitions: merging all results each expansion is cheaper
    small = p * (ef + width) <= 8192
    while True:
        j = cand_d[:, :used].argmin(axis=1)
        cd = cand_d[rank, j]
        # stop once the nearest candidate is beyond the farthest of ef results (inf: not full)
        active &= (cd <= res_d[:, ef - 1]) & (cd < inf)
        if not active.any():
            break
        cand_d[rank, j] = inf
        nb = level0[np.where(active, cand_n[rank, j], n)]
        fresh = ~visited[nb]
        visited[nb] = True
        d = np.full(nb.shape, inf)  # visited before (and the sentinel): inf, joins nothing
        d[fresh] = score(nb[fresh])
        # the results keep the ef nearest allowed nodes, whatever the order they came in. Only a
        # node nearer than the farthest result (any allowed one while fewer than ef) can enter
        # (a tie stays out, as in pylance's heap): the merge re-sorts just the rows of
        # partitions with such a node, with just those nodes, since a merge of all [p, ef]
        # results per expansion made a walk at ef 2000 over 256 partitions take ~50 s
        new_d = np.where(allowed(nb, d), d, inf) if filtered else d
        if small:  # one merge of every row: fewer numpy calls than picking the rows that change
            all_d = np.concatenate((res_d, new_d), axis=1)
            o = all_d.argsort(axis=1, kind="stable")[:, :ef]  # stable: a tie with the farthest stays out
            res_d = all_d[col, o]
            res_n = np.concatenate((res_n, nb), axis=1)[col, o]
            rows = rank[:0]
        else:
            enters = new_d < res_d[:, ef - 1:]
            rows = np.flatnonzero(enters.any(axis=1))
        if rows.size:
            sub = enters[rows]
            c = int(sub.sum(axis=1).max())
            pick = np.argsort(~sub, axis=1, kind="stable")[:, :c]  # entering nodes first, in order
            sub_col = np.arange(rows.size)[:, None]
            add_d = np.where(sub, new_d[rows], inf)[sub_col, pick]
            all_d = np.concatenate((res_d[rows], add_d), axis=1)
            o = all_d.argsort(axis=1, kind="stable")[:, :ef]
            res_d[rows] = all_d[sub_col, o]
            res_n[rows] = np.concatenate((res_n[rows], nb[rows][sub_col, pick]), axis=1)[sub_col, o]
        # a neighbour joins the candidates if it was within the farthest result when it came
        # (or the results were not full); one beyond the final farthest of full results would
        # never be expanded (the walk stops before popping it), so that bound gives the same walk
        if used + width > cap:
            live_d, live_n = _compact(cand_d[:, :used], cand_n[:, :used])
            used = live_d.shape[1]
            if used + width > cap // 2:  # more than half live (a large ef): double, so that
                cap = 2 * (used + width)  # compactions stay rare (not one per expansion)
                cand_d = np.empty((p, cap), np.float32)
                cand_n = np.empty((p, cap), np.int32)
            cand_d[:, :used], cand_n[:, :used] = live_d, live_n
        cand_d[:, used:used + width] = np.where(d <= res_d[:, ef - 1:], d, inf)
        cand_n[:, used:used + width] = nb
        used += width
    found = np.minimum(np.isfinite(res_d).sum(axis=1), k).tolist()
    return ([res_n[i, :m].astype(np.int64) for i, m in enumerate(found)],
            [res_d[i, :m].copy() for i, m in enumerate(found)])


def _compact(cand_d: F32, cand_n: I32) -> tuple[F32, I32]:
    """Drop popped candidates (their distance is inf), keeping each row's order of the rest."""
    live = max(1, int(np.isfinite(cand_d).sum(axis=1).max()))
    o = np.argsort(~np.isfinite(cand_d), axis=1, kind="stable")[:, :live]
    col = np.arange(cand_d.shape[0])[:, None]
    return cand_d[col, o], cand_n[col, o]


def read_graph(reader_of: Callable[[], Any], meta: list[Any], lengths: npt.NDArray[np.uint32],
               graph_lengths: npt.NDArray[np.uint32], where: str) -> GraphRows:
    """A :class:`GraphRows` over ``index.idx`` (``reader_of`` opens a reader of its
    ``__vector_id`` and ``__neighbors`` columns; ``meta``: the ``lance:hnsw`` entries)."""
    # pylance writes an empty string for a partition without rows (no graph): read it as no metadata
    parts = tuple((json.loads(p) if p else {}) if isinstance(p, (str, bytes)) else dict(p) for p in meta)
    box: list[Any] = []

    def read(first: int, rows: int) -> pa.Table:
        if not box:
            box.append(reader_of())
        return box[0].read_range(first, rows, batch_size=rows).to_table()

    return GraphRows(read, parts, lengths, graph_lengths, where)
