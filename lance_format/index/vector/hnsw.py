"""HNSW graphs of IVF partitions, built with numpy, in the layout pylance 14.0.2 reads.

Layout (``docs/formats/vector-indices.md`` §5.2, verified on pylance's files): per partition,
level 0 lists every node (``__vector_id`` = position in the partition's storage slice), each
higher level lists only its nodes in ascending id order; ``__neighbors`` are node ids on the
same level (at most ``2m`` on level 0, ``m`` above) and ``_distance`` their distances in the
storage's units; ``lance:hnsw`` holds per partition the entry point (the node of the top
non-empty level), the parameters and the cumulative ``level_offsets``.

Construction. Levels are drawn as upstream does (``floor(-ln U / ln m)``, capped at
``max_level - 1``; ``rust/lance-index/src/vector/hnsw/builder.rs``) from a generator seeded by
the partition's index, so a build is reproducible however its partitions are spread over
tasks (the graphs are built per group of partitions on the runner, see
:func:`lance_format.index.vector.build.graph_tasks`). Instead of inserting nodes one by one (a
sequential greedy search per node, which does not vectorise), each level's neighbour lists
are the nearest nodes of that level (:data:`SELECT_POOL` candidates, computed blockwise with
one matrix product per block), thinned by HNSW's diversity heuristic and completed with
reverse links, all vectorised over the nodes: the lists insertion would converge to, from
k-NN candidates instead of a greedy search. pylance's search (greedy descent from the entry
point, then a beam of ``ef`` on level 0) reads them as any HNSW graph.

Cost. Up to :data:`EXACT_LIMIT` nodes the candidates are exact (``O(n²·dim)`` per level);
above it they come from the node's own and nearest sub-clusters of about
:data:`SUBCLUSTER_ROWS` rows (partition-local exact k-NN in chunks), so the cost per node is
bounded and a partition of a million nodes builds in linear time. The heuristic costs
``SELECT_POOL² · dim`` per node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.index.vector.kmeans import F32, assign, train_kmeans
from lance_format.index.vector.layout import HnswGraph

if TYPE_CHECKING:
    from lance_format.index.vector.build import VectorModel

GraphMetric = Literal["l2", "dot"]
#: Nodes above which a partition's neighbour search is restricted to nearby sub-clusters.
EXACT_LIMIT = 8192
#: Rows per sub-cluster and sub-clusters searched per row above :data:`EXACT_LIMIT`.
SUBCLUSTER_ROWS = 1024
SUBCLUSTER_PROBES = 3
#: Candidates the neighbour heuristic weighs per node (at most ``ef_construction``): its cost
#: grows with the square of this. The first :data:`NEAR_POOL` are the nearest nodes; the rest
#: are spread evenly over the ranks up to ``ef_construction``: on clustered data the nearest
#: few dozen all lie in the node's own cluster, and these farther ones give the links between
#: clusters that keep the graph connected (what insertion's wide ``ef_construction`` finds).
SELECT_POOL = 64
NEAR_POOL = 40
#: Distance entries computed at once.
_BLOCK = 1 << 22
_SEED = 0x5EED


@dataclass(frozen=True)
class HnswParams:
    """``m`` (max connections), ``ef_construction`` and ``max_level`` (pylance's defaults)."""

    m: int = 20
    ef_construction: int = 150
    max_level: int = 7


def graph_metric(metric: str) -> GraphMetric:
    """The distance a graph's ``_distance`` column holds: ``dot`` for dot, squared L2 otherwise."""
    return "dot" if metric == "dot" else "l2"


def storage_vectors(payload: npt.NDArray[np.generic], model: VectorModel) -> F32:
    """The vectors the storage represents (decoded codes), row for row, for distance computation."""
    if model.pq is not None:
        codes = payload.astype(np.uint8)
        book = model.pq.codebook
        parts = [book[s][codes[:, s]] for s in range(book.shape[0])]  # one gather per sub-vector
        return np.ascontiguousarray(np.concatenate(parts, axis=1), np.float32) if parts else \
            np.zeros((0, 0), np.float32)
    if model.sq is not None:
        span = model.sq.end - model.sq.start
        return (model.sq.start + (payload.astype(np.float32) + 0.5) / 255.0 * span).astype(np.float32)
    return np.ascontiguousarray(payload, np.float32)


def _levels(n: int, params: HnswParams, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    u = 1.0 - rng.random(n)  # (0, 1]
    lv: npt.NDArray[np.int64] = np.floor(-np.log(u) / np.log(max(params.m, 2))).astype(np.int64)
    return np.minimum(lv, max(params.max_level - 1, 0))


def _pair_dist(a: F32, b: F32, metric: GraphMetric) -> F32:
    prod = a @ b.T
    out: F32
    if metric == "dot":
        out = (1.0 - prod).astype(np.float32)
        return out
    sq = np.einsum("ij,ij->i", a, a)[:, None] - 2.0 * prod + np.einsum("ij,ij->i", b, b)[None, :]
    out = np.maximum(sq, 0.0).astype(np.float32)
    return out


def _knn(x: F32, k: int, metric: GraphMetric) -> tuple[npt.NDArray[np.int64], F32]:
    """For every row, its ``k`` nearest other rows (exact, blockwise) and their distances."""
    n = x.shape[0]
    k = min(k, n - 1)
    idx = np.zeros((n, max(k, 0)), np.int64)
    dist = np.zeros((n, max(k, 0)), np.float32)
    if k <= 0:
        return idx, dist
    step = max(1, _BLOCK // n)
    for lo in range(0, n, step):
        d = _pair_dist(x[lo:lo + step], x, metric)
        rows = np.arange(d.shape[0])
        d[rows, lo + rows] = np.inf  # not its own neighbour
        part = np.argpartition(d, k - 1, axis=1)[:, :k]
        pd = np.take_along_axis(d, part, axis=1)
        order = np.argsort(pd, axis=1, kind="stable")
        idx[lo:lo + step] = np.take_along_axis(part, order, axis=1)
        dist[lo:lo + step] = np.take_along_axis(pd, order, axis=1)
    return idx, dist


def _approx_knn(x: F32, k: int, metric: GraphMetric) -> tuple[npt.NDArray[np.int64], F32]:
    """k-NN restricted to each row's sub-cluster and the nearest other sub-clusters (large partitions).

    The rows are split by a quick k-means into sub-clusters of about :data:`SUBCLUSTER_ROWS`;
    a row's candidates are the members of its own and the :data:`SUBCLUSTER_PROBES` - 1 nearest
    other sub-clusters, so the cost per row is a constant (``PROBES × SUBCLUSTER_ROWS``
    distances) instead of the partition size: exact k-NN within each neighbourhood, blockwise
    with one matrix product per block of rows.
    """
    n = x.shape[0]
    nclus = max(2, n // SUBCLUSTER_ROWS)
    km = train_kmeans(x[np.random.default_rng(_SEED).choice(n, min(n, nclus * 32), replace=False)], nclus,
                      metric="dot" if metric == "dot" else "l2", max_iters=10)
    labels, _ = assign(x, km.centroids, metric)
    cdist = _pair_dist(km.centroids, km.centroids, metric)
    near = np.argsort(cdist, axis=1)[:, :SUBCLUSTER_PROBES]
    idx = np.zeros((n, k), np.int64)
    dist = np.full((n, k), np.inf, np.float32)
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(labels, minlength=nclus))))
    for c in range(nclus):  # one neighbourhood per sub-cluster, not per row
        rows = order[bounds[c]:bounds[c + 1]]
        if rows.size == 0:
            continue
        cand = np.concatenate([order[bounds[o]:bounds[o + 1]] for o in near[c]])
        kk = min(k, cand.size - 1)
        if kk <= 0:
            continue
        xc = x[cand]
        step = max(1, _BLOCK // cand.size)
        for lo in range(0, rows.size, step):  # bounded memory however unbalanced the sub-clusters
            r = rows[lo:lo + step]
            d = _pair_dist(x[r], xc, metric)
            d[cand[None, :] == r[:, None]] = np.inf
            part = np.argpartition(d, kk - 1, axis=1)[:, :kk]
            pd = np.take_along_axis(d, part, axis=1)
            srt = np.argsort(pd, axis=1, kind="stable")
            idx[r, :kk] = cand[np.take_along_axis(part, srt, axis=1)]
            dist[r, :kk] = np.take_along_axis(pd, srt, axis=1)
    return idx, dist


def _thin(idx: npt.NDArray[np.int64], dist: F32, size: int) -> tuple[npt.NDArray[np.int64], F32]:
    """The nearest :data:`NEAR_POOL` candidates and the rest spread evenly over the farther ranks."""
    c = idx.shape[1]
    if c <= size:
        return idx, dist
    near = min(NEAR_POOL, size)
    cols = np.concatenate([np.arange(near), np.linspace(near, c - 1, size - near).round().astype(np.int64)])
    return idx[:, cols], dist[:, cols]


def _select(x: F32, idx: npt.NDArray[np.int64], dist: F32, m: int, degree: int, metric: GraphMetric
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], F32]:
    """HNSW's neighbour heuristic over each node's sorted candidates, then reverse links.

    Up to ``m`` candidates are kept, each only if it is closer to the node than to every
    neighbour kept before it (``select_neighbors_heuristic``), which keeps links between
    clusters that a plain k-NN list drops; each kept link is also offered to the other end, as
    insertion does, and a list over ``degree`` keeps its heuristic links first, then the
    nearest reverse links.
    Returns the edges as ``(source, target, distance)`` arrays.
    """
    n, c = idx.shape
    keep = np.zeros((n, c), bool)
    step = max(1, _BLOCK // max(c * c, 1))
    for lo in range(0, n, step):  # blocks of nodes; the loop below runs over candidate ranks
        ci = idx[lo:lo + step]
        cd = dist[lo:lo + step]
        cv = x[ci]  # [b, c, dim]
        prod = np.matmul(cv, cv.transpose(0, 2, 1))  # batched BLAS (einsum would not use it)
        if metric == "dot":
            pair = 1.0 - prod
        else:
            sq = np.einsum("bid,bid->bi", cv, cv)
            pair = sq[:, :, None] - 2.0 * prod + sq[:, None, :]
        blocked = ~np.isfinite(cd)
        count = np.zeros(ci.shape[0], np.int64)
        for j in range(c):
            ok = ~blocked[:, j] & (count < m)
            keep[lo:lo + step, j] = ok
            count += ok
            blocked |= ok[:, None] & (pair[:, j, :] < cd)
    src = np.repeat(np.arange(n), c)[keep.ravel()]
    dst = idx.ravel()[keep.ravel()]
    dd = dist.ravel()[keep.ravel()]
    # reverse links come after forward ones (priority 1); duplicates keep the forward copy
    s_all = np.concatenate([src, dst])
    t_all = np.concatenate([dst, src])
    d_all = np.concatenate([dd, dd]).astype(np.float32)
    prio = np.concatenate([np.zeros(src.size, np.int8), np.ones(src.size, np.int8)])
    order = np.lexsort((prio, t_all, s_all))
    s_all, t_all, d_all, prio = s_all[order], t_all[order], d_all[order], prio[order]
    first = np.ones(s_all.size, bool)
    first[1:] = (s_all[1:] != s_all[:-1]) | (t_all[1:] != t_all[:-1])
    s_all, t_all, d_all, prio = s_all[first], t_all[first], d_all[first], prio[first]
    order = np.lexsort((d_all, prio, s_all))
    s_all, t_all, d_all = s_all[order], t_all[order], d_all[order]
    starts = np.searchsorted(s_all, np.arange(n))
    rank = np.arange(s_all.size) - starts[s_all]
    kept = rank < degree
    return s_all[kept], t_all[kept], d_all[kept]


def _lists(n: int, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], dist: F32,
           ids: npt.NDArray[np.int64]) -> tuple[pa.Array, pa.Array]:
    """List columns of neighbour node ids and distances from edges sorted by source."""
    counts = np.bincount(src, minlength=n)
    offsets = pa.array(np.concatenate(([0], np.cumsum(counts))).astype(np.int32))
    nb = pa.ListArray.from_arrays(offsets, pa.array(ids[dst].astype(np.uint32), pa.uint32()))
    ds = pa.ListArray.from_arrays(offsets, pa.array(dist, pa.float32()))
    return nb, ds


def build_partition(x: F32, params: HnswParams, metric: GraphMetric, rng: np.random.Generator
                    ) -> tuple[npt.NDArray[np.uint32], pa.Array, pa.Array, dict[str, Any]]:
    """The graph rows of one partition and its ``lance:hnsw`` entry."""
    n = x.shape[0]
    levels = _levels(n, params, rng)
    vids: list[npt.NDArray[np.uint32]] = []
    nbs: list[pa.Array] = []
    dss: list[pa.Array] = []
    offsets = [0]
    entry = 0
    for level in range(params.max_level):
        nodes = np.flatnonzero(levels >= level)
        if nodes.size:
            entry = int(nodes[0])
            degree = 2 * params.m if level == 0 else params.m
            sub = x[nodes]
            # insertion links a node to ``m`` chosen neighbours; reverse links fill up to the cap
            pool = max(params.ef_construction, degree)
            idx, dist = (_knn(sub, pool, metric) if nodes.size <= EXACT_LIMIT
                         else _approx_knn(sub, pool, metric))
            idx, dist = _thin(idx, dist, max(SELECT_POOL, degree))
            src, dst, dd = _select(sub, idx, dist, params.m, degree, metric)
            nb, ds = _lists(int(nodes.size), src, dst, dd, nodes)
            vids.append(nodes.astype(np.uint32))
            nbs.append(nb)
            dss.append(ds)
        offsets.append(offsets[-1] + int(nodes.size))
    meta = {"entry_point": entry,
            "params": {"max_level": params.max_level, "m": params.m, "ef_construction": params.ef_construction,
                       "prefetch_distance": 2},
            "level_offsets": offsets}
    vid = np.concatenate(vids) if vids else np.zeros(0, np.uint32)
    empty = pa.array([], pa.list_(pa.uint32()))
    nb_all = pa.concat_arrays(nbs) if nbs else empty
    ds_all = pa.concat_arrays(dss) if dss else pa.array([], pa.list_(pa.float32()))
    return vid, nb_all, ds_all, meta


def build_graphs(vectors: F32, lengths: npt.NDArray[np.int64], params: HnswParams, metric: GraphMetric,
                 first: int = 0) -> HnswGraph:
    """Graphs of every partition of a storage whose rows are grouped by partition (``lengths``).

    Args:
        vectors: The rows, partition after partition.
        lengths: Rows of each partition.
        params: HNSW parameters.
        metric: The graph's distance.
        first: Index of the first partition in the segment: each partition draws its levels
            from a generator seeded by its own index, so partitions built by different tasks
            give the graphs one task would.
    """
    vids: list[npt.NDArray[np.uint32]] = []
    nbs: list[pa.Array] = []
    dss: list[pa.Array] = []
    metas: list[dict[str, Any]] = []
    glens: list[int] = []
    lo = 0
    for i, n in enumerate(np.asarray(lengths, np.int64).tolist()):  # one graph per partition
        rng = np.random.default_rng((_SEED, first + i))
        vid, nb, ds, meta = build_partition(vectors[lo:lo + n], params, metric, rng)
        vids.append(vid)
        nbs.append(nb)
        dss.append(ds)
        metas.append(meta)
        glens.append(int(vid.size))
        lo += n
    table = pa.table({"__vector_id": pa.array(np.concatenate(vids) if vids else np.zeros(0, np.uint32), pa.uint32()),
                      "__neighbors": pa.concat_arrays(nbs) if nbs else pa.array([], pa.list_(pa.uint32())),
                      "_distance": pa.concat_arrays(dss) if dss else pa.array([], pa.list_(pa.float32()))})
    return HnswGraph(table, np.asarray(glens, np.uint32), tuple(metas))


def concat_graphs(graphs: list[HnswGraph]) -> HnswGraph:
    """The graph of consecutive partition groups, in order (each built by :func:`build_graphs`)."""
    if not graphs:
        return build_graphs(np.zeros((0, 0), np.float32), np.zeros(0, np.int64), HnswParams(), "l2")
    return HnswGraph(pa.concat_tables([g.table for g in graphs]),
                     np.concatenate([g.lengths for g in graphs]).astype(np.uint32),
                     tuple(p for g in graphs for p in g.partitions))
