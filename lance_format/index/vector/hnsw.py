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

Cost. Up to :data:`EXACT_LIMIT` nodes the candidates are exact; above it they come from the
node's own and nearest sub-clusters of about :data:`SUBCLUSTER_ROWS` rows, so the cost per node
is bounded and a partition of a million nodes builds in linear time. Distances come from
matrix products only: a group of up to :data:`FULL_LIMIT` candidates computes its whole
distance matrix once and both the k-NN and the heuristic read it (the heuristic's candidate
pairs are gathered from it, never recomputed from vectors); larger groups compute it by blocks
of rows, and the heuristic there gets each row's own small matrix among its candidates
(``rows × SELECT_POOL²`` distances, one batched product). The heuristic loops over the
:data:`SELECT_POOL` candidate ranks, vectorised over the nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.index.vector.kmeans import F32, Metric, assign, train_kmeans
from lance_format.index.vector.layout import HnswGraph

if TYPE_CHECKING:
    from lance_format.index.vector.build import VectorModel

GraphMetric = Literal["l2", "dot"]
#: Nodes above which a partition's neighbour search is restricted to nearby sub-clusters.
EXACT_LIMIT = 8192
#: Candidates of one group at most (the cost per row grows with it).
GROUP_LIMIT = 8192
#: Candidates up to which a group's whole distance matrix is computed once (64 MB); 8192 (every
#: exact partition) was no faster: the heuristic's scattered reads of a 256 MB matrix miss cache.
FULL_LIMIT = 4096
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
    """Distances between every row of ``a`` and every row of ``b``, updated in place (one buffer)."""
    out: F32 = np.ascontiguousarray(a @ b.T, np.float32)
    if metric == "dot":
        np.subtract(np.float32(1.0), out, out=out)
        return out
    out *= np.float32(-2.0)
    out += np.einsum("ij,ij->i", a, a)[:, None]
    out += np.einsum("ij,ij->i", b, b)[None, :]
    np.maximum(out, np.float32(0.0), out=out)
    return out


Group = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _subclusters(x: F32, metric: GraphMetric) -> list[Group]:
    """Groups ``(rows, cand)`` of a large partition: a sub-cluster's rows and where their neighbours are sought.

    A quick k-means splits the rows into sub-clusters of about :data:`SUBCLUSTER_ROWS`; a
    sub-cluster's candidates are its own rows (first) and those of the
    :data:`SUBCLUSTER_PROBES` - 1 nearest other sub-clusters, so the cost per row does not grow
    with the partition. A row's cost grows with its group's candidates, so they stop at
    :data:`GROUP_LIMIT`: farther sub-clusters that do not fit are left out, and an oversized
    sub-cluster (k-means on clustered data is far from balanced) is cut into pieces.
    """
    n = x.shape[0]
    kmetric: Metric = "dot" if metric == "dot" else "l2"
    rng = np.random.default_rng(_SEED)
    nclus = max(2, n // SUBCLUSTER_ROWS)
    km = train_kmeans(x[rng.choice(n, min(n, nclus * 32), replace=False)], nclus, metric=kmetric, max_iters=10)
    labels = assign(x, km.centroids, metric)[0].astype(np.int64)
    # k-means on clustered data is far from balanced, and a group's cost per row follows its
    # candidates: sub-clusters over twice the target size are split again by their own k-means
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(labels, minlength=nclus))))
    for c in np.flatnonzero(np.diff(bounds) > 2 * SUBCLUSTER_ROWS).tolist():
        members = order[bounds[c]:bounds[c + 1]]
        parts = -(-members.size // SUBCLUSTER_ROWS)
        sub = train_kmeans(x[members[rng.choice(members.size, parts * 32, replace=False)]], parts,
                           metric=kmetric, max_iters=10)
        piece = assign(x[members], sub.centroids, metric)[0].astype(np.int64)
        labels[members[piece > 0]] = nclus + piece[piece > 0] - 1  # piece 0 keeps the label
        nclus += parts - 1
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=nclus)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    filled = counts > 0
    centroids = np.zeros((nclus, x.shape[1]), np.float32)
    centroids[filled] = np.add.reduceat(x[order], bounds[:-1][filled], axis=0) / counts[filled, None]
    cdist = _pair_dist(centroids, centroids, metric)
    cdist[:, ~filled] = np.inf
    np.fill_diagonal(cdist, -np.inf)  # its own sub-cluster first (a dot distance may be below the self one)
    near = np.argsort(cdist, axis=1, kind="stable")[:, :SUBCLUSTER_PROBES]
    groups: list[Group] = []
    for c in range(nclus):  # one group per sub-cluster, not per row
        own = order[bounds[c]:bounds[c + 1]]
        for lo in range(0, own.size, GROUP_LIMIT):
            rows = own[lo:lo + GROUP_LIMIT]
            cand = [rows]
            room = GROUP_LIMIT - rows.size
            for o in near[c, 1:]:
                other = order[bounds[o]:bounds[o + 1]]
                if other.size <= room:
                    cand.append(other)
                    room -= other.size
            groups.append((rows, np.concatenate(cand)))
    return groups


def _groups(x: F32, metric: GraphMetric) -> list[Group]:
    """Every row in one group (exact neighbours) up to :data:`EXACT_LIMIT` rows, else sub-clusters."""
    n = x.shape[0]
    if n <= EXACT_LIMIT:
        every = np.arange(n, dtype=np.int64)
        return [(every, every)]
    return _subclusters(x, metric)


class _Group:
    """A group's candidate vectors and, when small enough, their whole distance matrix.

    Up to :data:`FULL_LIMIT` candidates, at most twice its rows, the ``cand × cand`` matrix is
    computed once (one matrix product) and serves both the k-NN and the heuristic; else each block of rows
    gets its ``rows × cand`` distances, and the heuristic the distances among the candidates
    that block actually weighs, so memory stays bounded by :data:`_BLOCK` however unbalanced
    the sub-clusters.
    """

    def __init__(self, x: F32, rows: npt.NDArray[np.int64], cand: npt.NDArray[np.int64], metric: GraphMetric
                 ) -> None:
        self.rows, self.cand, self.metric = rows, cand, metric
        whole = cand.size == x.shape[0] and bool(np.all(cand == np.arange(cand.size)))
        self.xc = x if whole else x[cand]  # the exact group holds every row in order: no copy
        self.full: F32 | None = None
        if cand.size <= FULL_LIMIT and 2 * rows.size >= cand.size:  # else most of it would go unread
            self.full = _pair_dist(self.xc, self.xc, metric)
            np.fill_diagonal(self.full, np.inf)  # a node is not its own neighbour

    def blocks(self) -> list[tuple[int, int]]:
        """Row ranges of about :data:`_BLOCK` distances each (rows are the first candidates)."""
        step = max(1, _BLOCK // max(self.cand.size, 1))
        return [(lo, min(lo + step, self.rows.size)) for lo in range(0, self.rows.size, step)]

    def dist(self, lo: int, hi: int) -> F32:
        """Distances of rows ``lo:hi`` to every candidate, infinite to themselves."""
        if self.full is not None:
            return self.full[lo:hi]
        d = _pair_dist(self.xc[lo:hi], self.xc, self.metric)
        d[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
        return d

    def heuristic(self, li: npt.NDArray[np.int64], ld: F32, m: int) -> npt.NDArray[np.bool_]:
        """:func:`_heuristic` over candidate columns ``li`` of a block (distances ``ld``).

        Without the whole matrix, each row's candidates get their own small distance matrix
        (:func:`_local_dist`): a block's rows weigh thousands of distinct candidates between
        them, and the matrix among all of those (what this computed before) cost several times
        the block's own k-NN distances; the rows' own ``c × c`` matrices cost ``rows × c²``.
        """
        if self.full is not None:
            return _heuristic(self.full, li, ld, m)
        return _heuristic_local(_local_dist(self.xc, li, self.metric), ld, m)


def _nearest(d: F32, k: int) -> tuple[npt.NDArray[np.int64], F32]:
    """Columns and values of each row's ``k`` smallest entries of ``d``, smallest first."""
    part = np.argpartition(d, k - 1, axis=1)[:, :k]
    pd = np.take_along_axis(d, part, axis=1)
    order = np.argsort(pd, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(pd, order, axis=1)


def _knn_in(x: F32, k: int, metric: GraphMetric, groups: list[Group]) -> tuple[npt.NDArray[np.int64], F32]:
    n = x.shape[0]
    k = max(0, min(k, n - 1))
    idx = np.zeros((n, k), np.int64)
    dist = np.full((n, k), np.inf, np.float32)
    for rows, cand in groups:
        kk = min(k, cand.size - 1)
        if kk <= 0:
            continue
        g = _Group(x, rows, cand, metric)
        for lo, hi in g.blocks():
            li, ld = _nearest(g.dist(lo, hi), kk)
            idx[rows[lo:hi], :kk] = cand[li]
            dist[rows[lo:hi], :kk] = ld
    return idx, dist


def _knn(x: F32, k: int, metric: GraphMetric) -> tuple[npt.NDArray[np.int64], F32]:
    """For every row, its ``k`` nearest other rows (exact) and their distances."""
    every = np.arange(x.shape[0], dtype=np.int64)
    return _knn_in(x, k, metric, [(every, every)])


def _approx_knn(x: F32, k: int, metric: GraphMetric) -> tuple[npt.NDArray[np.int64], F32]:
    """k-NN within each row's sub-cluster and the nearest others (:func:`_subclusters`)."""
    return _knn_in(x, k, metric, _subclusters(x, metric))


def _thin(idx: npt.NDArray[np.int64], dist: F32, size: int) -> tuple[npt.NDArray[np.int64], F32]:
    """The nearest :data:`NEAR_POOL` candidates and the rest spread evenly over the farther ranks."""
    c = idx.shape[1]
    if c <= size:
        return idx, dist
    near = min(NEAR_POOL, size)
    cols = np.concatenate([np.arange(near), np.linspace(near, c - 1, size - near).round().astype(np.int64)])
    return idx[:, cols], dist[:, cols]


def _heuristic(d: F32, cand: npt.NDArray[np.int64], dist: F32, m: int) -> npt.NDArray[np.bool_]:
    """HNSW's neighbour heuristic (``select_neighbors_heuristic``) over each row's sorted candidates.

    ``cand`` are columns of the group's distance matrix ``d``. Up to ``m`` candidates are
    kept, each only if it is closer to the row's node than to every candidate kept before it,
    which keeps links between clusters that a plain k-NN list drops. The loop runs over
    candidate ranks (vectorised over the rows); a kept candidate blocks the later ones it is
    nearer to, read from ``d`` instead of recomputed from the vectors.
    """
    return _select(dist, m, lambda rows, j: d[cand[rows, j][:, None], cand[rows, j + 1:]])


def _select(dist: F32, m: int, between: Callable[[npt.NDArray[np.int64], int], F32]) -> npt.NDArray[np.bool_]:
    """The heuristic's loop over candidate ranks; ``between(rows, j)`` gives, for those rows,
    the distances from their ``j``-th candidate to each later one."""
    b, c = dist.shape
    keep = np.zeros((b, c), bool)
    blocked = ~np.isfinite(dist)
    count = np.zeros(b, np.int64)
    for j in range(c):
        rows = np.flatnonzero(~blocked[:, j] & (count < m))
        if rows.size == 0:
            continue
        keep[rows, j] = True
        count[rows] += 1
        if j + 1 < c:
            blocked[rows, j + 1:] |= between(rows, j) < dist[rows, j + 1:]
    return keep


def _local_dist(x: F32, li: npt.NDArray[np.int64], metric: GraphMetric) -> F32:
    """``[b, c, c]``: per row of ``li``, the distances among its ``c`` candidate rows of ``x``.

    The same formula as :func:`_pair_dist` (one batched matrix product of each row's gathered
    candidates), so only the product's rounding may differ in the last bit.
    """
    v = x[li]  # [b, c, dim]
    out: F32 = np.matmul(v, v.transpose(0, 2, 1))
    if metric == "dot":
        np.subtract(np.float32(1.0), out, out=out)
        return out
    norms = np.einsum("bcd,bcd->bc", v, v)
    out *= np.float32(-2.0)
    out += norms[:, :, None]
    out += norms[:, None, :]
    np.maximum(out, np.float32(0.0), out=out)
    return out


def _heuristic_local(local: F32, dist: F32, m: int) -> npt.NDArray[np.bool_]:
    """:func:`_heuristic` reading each row's own candidate matrix (``local[row, j, l]``)."""
    return _select(dist, m, lambda rows, j: local[rows, j, j + 1:])


def _level_edges(x: F32, params: HnswParams, degree: int, metric: GraphMetric
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], F32]:
    """A level's links ``(source, target, distance)``: each node's heuristic choice, then reverse links.

    Insertion links a node to the ``m`` neighbours the heuristic picks among
    ``ef_construction`` candidates (topped up to ``m`` with the nearest pruned ones); here the
    candidates are the node's nearest nodes of the level (:func:`_groups`), thinned to
    :data:`SELECT_POOL` (:func:`_thin`). Each kept link
    is also offered to the other end, as insertion does, and a list over ``degree`` keeps its
    heuristic links first, then the nearest reverse links.
    """
    n = x.shape[0]
    pool = max(params.ef_construction, degree)
    size = max(SELECT_POOL, degree)
    srcs: list[npt.NDArray[np.int64]] = []
    dsts: list[npt.NDArray[np.int64]] = []
    dds: list[F32] = []
    for rows, cand in _groups(x, metric):
        k = min(pool, cand.size - 1)
        if k <= 0:
            continue
        g = _Group(x, rows, cand, metric)
        for lo, hi in g.blocks():
            li, ld = _thin(*_nearest(g.dist(lo, hi), k), size)
            keep = g.heuristic(li, ld, params.m)
            # lists the heuristic left short of ``m`` are filled with the nearest candidates it
            # pruned, as pylance 14.0.2's lists show (every node has ``m`` links at least): on
            # clustered data the heuristic alone keeps a handful, too few for a small ``ef``
            spare = ~keep & np.isfinite(ld)
            short = min(params.m, degree) - keep.sum(axis=1)
            keep |= spare & (np.cumsum(spare, axis=1) <= short[:, None])
            srcs.append(np.broadcast_to(rows[lo:hi, None], li.shape)[keep])
            dsts.append(cand[li[keep]])
            dds.append(ld[keep])
    if not srcs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    return _with_reverse(n, np.concatenate(srcs), np.concatenate(dsts), np.concatenate(dds), degree)


def _with_reverse(n: int, src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64], dd: F32, degree: int
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], F32]:
    """Forward links plus their reverses, per source: forward first, then nearest, at most ``degree``."""
    # reverse links come after forward ones (priority 1); duplicates keep the forward copy
    s_all = np.concatenate([src, dst])
    t_all = np.concatenate([dst, src])
    d_all = np.concatenate([dd, dd]).astype(np.float32)
    prio = np.concatenate([np.zeros(src.size, np.int64), np.ones(src.size, np.int64)])
    # one integer key (source, target, priority) sorts faster than a three-key lexsort
    key = (s_all * n + t_all) * 2 + prio
    order = np.argsort(key, kind="stable")
    key, s_all, t_all, d_all, prio = key[order], s_all[order], t_all[order], d_all[order], prio[order]
    first = np.ones(s_all.size, bool)
    first[1:] = (key[1:] >> 1) != (key[:-1] >> 1)
    s_all, t_all, d_all, prio = s_all[first], t_all[first], d_all[first], prio[first]
    order = np.lexsort((d_all, s_all * 2 + prio))
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
            src, dst, dd = _level_edges(x[nodes], params, degree, metric)
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
