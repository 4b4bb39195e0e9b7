"""k-means for IVF centroids and PQ codebooks, vectorised on numpy/BLAS.

What pylance 14.0.2 trains (``docs/formats/vector-indices.md`` §7; upstream
``rust/lance-index/src/vector/kmeans.rs``), reproduced in its observable behaviour:

* ``l2``: Lloyd iterations on squared L2; centroids are the members' means.
* ``cosine``: the vectors are L2-normalised first, then it is ``l2`` (the centroids, means of
  unit vectors, are *not* unit themselves, as pylance stores them).
* ``dot``: assignment by ``1 - x·c``; the centroids are normalised to unit length before the
  first assignment and after every mean update (pylance's "normalize dot k-means centroids").

**Initialisation: k-means++ (D² sampling) on a subset of the sample, not pylance's random rows.**
pylance 14.0.2 seeds every k-means (IVF and each PQ sub-vector) with ``k`` distinct rows drawn
uniformly (``kmeans_random_init``), and Lloyd iterations from such starts stop in a local
optimum that varies with the draw. With ``k = 256`` codewords per PQ sub-vector that costs
quality: on the data of ``tests/index/test_vector_build.py`` random starts leave a PQ
reconstruction error of 4,240-4,370 (ours with random starts and pylance's alike, depending
on the draw) and IVF_PQ dot recall@10 of 0.75-0.81 between pylance builds, while k-means++
gives 3,630-3,660 for every seed and recall 0.84. The index is judged against pylance's
(recall within 0.02), so seeding that is never worse than an unlucky draw is what keeps us
inside the bound on every build. The cost is bounded: the seeds are drawn from a random
subset of at most :data:`SEED_ROWS_PER_CLUSTER` rows per cluster (fewer when the ``k``
passes would exceed :data:`SEED_WORK`), all PQ sub-vectors at once. For the default PQ
(256 codewords, 65,536 training rows) that is about a sixteenth of the multiply-adds of one
of the up to 50 Lloyd steps that follow; on clustered data those steps also stop sooner
(the test data above trains its codebooks several times faster), on unclustered data both
starts run every step and end at the same loss. For
``dot`` the seeds are drawn on the normalised rows: partitions are ranked by direction
(unit centroids), so the seeds should spread over directions. Everything stays seeded
(:data:`SEED`): a local build and a Spark build of the same data train the same model.

Assignment computes ``||x||² - 2 x·c + ||c||²`` with one matrix product per chunk of rows,
so memory stays at :data:`CHUNK_ELEMENTS` distances whatever the data size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from lance_format.errors import InvalidInputError

# pylance's defaults, named here too (build code imports them from k-means)
from lance_format.index.vector.defaults import MAX_ITERS as MAX_ITERS
from lance_format.index.vector.defaults import SAMPLE_RATE as SAMPLE_RATE

F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
Metric = Literal["l2", "cosine", "dot", "hamming"]
Init = Literal["kmeans++", "random"]

#: pylance's relative loss change that stops k-means early (``KMeansParams``).
TOLERANCE = 1e-4
#: Seed of initialisation, so the same sample trains the same centroids everywhere.
SEED = 42
#: k-means++ seeds from a random subset of this many rows per cluster (``k`` passes over it)...
SEED_ROWS_PER_CLUSTER = 16
#: ... and of fewer when those passes would cost more multiply-adds than this.
SEED_WORK = 1 << 31
#: Distances held at once by :func:`assign` (rows per chunk = this / k).
CHUNK_ELEMENTS = 1 << 22
#: Relative perturbation when an empty cluster takes half of the largest (as upstream: 1/1024).
_SPLIT_EPS = 1.0 / 1024


@dataclass(frozen=True)
class KMeans:
    """A trained model: ``centroids`` ``[k, dim]`` float32 and the final assignment's loss."""

    centroids: F32
    loss: float


def normalize(x: npt.NDArray[np.floating]) -> F32:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    x32 = np.asarray(x, np.float32)
    norms = np.linalg.norm(x32, axis=1, keepdims=True)
    out: F32 = np.divide(x32, norms, out=np.zeros_like(x32), where=norms > 0)
    return out


def assign(data: F32, centroids: F32, metric: Metric = "l2") -> tuple[I32, F32]:
    """The nearest centroid of every row and its distance, chunk by chunk.

    Args:
        data: ``[n, dim]`` vectors (already normalised for ``cosine``).
        centroids: ``[k, dim]``.
        metric: ``l2``/``cosine`` use squared L2, ``dot`` uses ``1 - x·c``.

    Returns:
        ``(labels int32 [n], distances float32 [n])``.
    """
    n, k = data.shape[0], centroids.shape[0]
    labels = np.empty(n, np.int32)
    dists = np.empty(n, np.float32)
    if n == 0:
        return labels, dists
    step = max(1, CHUNK_ELEMENTS // max(k, 1))
    ct = np.ascontiguousarray(centroids.T)
    c_sq = np.einsum("ij,ij->i", centroids, centroids) if metric != "dot" else None
    for lo in range(0, n, step):
        x = data[lo:lo + step]
        prod = x @ ct
        if c_sq is None:
            best = np.argmax(prod, axis=1)
            dists[lo:lo + step] = 1.0 - prod[np.arange(x.shape[0]), best]
        else:
            # ||x||² is the same for every centroid: rank by ||c||² - 2x·c, add it back after
            prod *= -2.0
            prod += c_sq
            best = np.argmin(prod, axis=1)
            x_sq = np.einsum("ij,ij->i", x, x)
            dists[lo:lo + step] = np.maximum(prod[np.arange(x.shape[0]), best] + x_sq, 0.0)
        labels[lo:lo + step] = best
    return labels, dists


def _means(data_t: F32, labels: I32, k: int) -> tuple[F32, npt.NDArray[np.int64]]:
    """Per-cluster sums divided by counts (empty clusters get zeros) and the counts.

    ``data_t`` is the ``[dim, n]`` transpose of the rows (made once per training): one float64
    ``bincount`` per dimension sums each cluster's members in row order, ~2x faster than sorting
    the rows by cluster for a ``reduceat`` (which summed them in the same order)."""
    counts = np.bincount(labels, minlength=k)
    sums = np.empty((k, data_t.shape[0]), np.float64)
    for d, row in enumerate(data_t):
        sums[:, d] = np.bincount(labels, weights=row, minlength=k)
    means = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
    return means, counts


def _split_empty(centroids: F32, counts: npt.NDArray[np.int64]) -> None:
    """Give every empty cluster half of the currently largest one (in place, as upstream)."""
    counts = counts.copy()
    sign = np.where(np.arange(centroids.shape[1]) % 2 == 0, 1.0, -1.0).astype(np.float32)
    for empty in np.flatnonzero(counts == 0):
        big = int(np.argmax(counts))
        if counts[big] <= 1:
            break
        base = centroids[big].copy()
        centroids[empty] = base * (1 + sign * _SPLIT_EPS)
        centroids[big] = base * (1 - sign * _SPLIT_EPS)
        counts[empty] = counts[big] // 2
        counts[big] -= counts[empty]


def seed_rows(x: F32, k: int, rng: np.random.Generator, init: Init = "kmeans++") -> npt.NDArray[np.int64]:
    """Row indices of the initial centroids of ``m`` problems at once: ``[m, k]``, distinct per problem.

    ``kmeans++`` draws each next seed with probability proportional to its squared distance
    to the nearest seed so far (D² sampling) from a random subset of each problem's rows
    (:func:`_seed_subset_rows`): ``k`` sequential steps, each one batched matrix-vector
    product and a two-level draw (pick a block of :data:`_DRAW_BLOCK` rows by its weight,
    then a row inside it), so no step scans a running sum over every row. ``random`` picks
    ``k`` distinct rows uniformly.

    Args:
        x: ``[m, n, dim]`` training data of ``m`` independent problems.
        k: Seeds per problem (at most ``n``).
        rng: The seeded generator (same data and seed, same seeds).
        init: ``kmeans++`` or ``random``.
    """
    m, n, dim = x.shape
    if init == "random" or k >= n:
        return np.stack([np.sort(rng.choice(n, k, replace=False)) for _ in range(m)])  # m draws, not n
    rows = _seed_subset_rows(m, n, k, dim)
    subset = np.stack([np.sort(rng.choice(n, rows, replace=False)) for _ in range(m)]) if rows < n else \
        np.broadcast_to(np.arange(n), (m, n))
    xs = np.ascontiguousarray(np.take_along_axis(x, subset[:, :, None], axis=1) if rows < n else x, np.float32)
    nblocks = -(-rows // _DRAW_BLOCK)
    # squared distance of every row to its nearest seed, padded with zero-weight rows to whole blocks
    weights = np.zeros((m, nblocks * _DRAW_BLOCK), np.float32)
    nearest = weights[:, :rows]
    x_sq = np.einsum("mnd,mnd->mn", xs, xs)
    problems = np.arange(m)
    picks = np.empty((m, k), np.int64)
    pick: npt.NDArray[np.int64] = np.asarray(rng.integers(0, rows, size=m), np.int64)
    for j in range(k):
        picks[:, j] = pick
        c = xs[problems, pick]  # [m, dim]: the newest seed of every problem
        dist = np.matmul(xs, c[:, :, None])[:, :, 0]
        dist *= -2.0
        dist += x_sq
        dist += np.einsum("md,md->m", c, c)[:, None]
        np.maximum(dist, 0.0, out=dist)
        if j == 0:
            nearest[:] = dist
        else:
            np.minimum(nearest, dist, out=nearest)
        if j + 1 == k:
            break
        pick = _draw(weights.reshape(m, nblocks, _DRAW_BLOCK), rng)
        for p in np.flatnonzero(weights[problems, pick] <= 0):  # padding rows weigh 0 too
            # no weight left (every row coincides with a seed) or a rounding edge: take the
            # farthest row, else any row not yet taken, so the k seeds stay distinct
            far = int(np.argmax(nearest[p]))
            pick[p] = far if nearest[p, far] > 0 else np.setdiff1d(np.arange(rows), picks[p, :j + 1])[0]
    out: npt.NDArray[np.int64] = np.take_along_axis(subset, picks, axis=1)
    return out


#: Rows per block of the two-level D² draw of :func:`seed_rows`.
_DRAW_BLOCK = 64


def _seed_subset_rows(m: int, n: int, k: int, dim: int) -> int:
    """Rows k-means++ seeds from: :data:`SEED_ROWS_PER_CLUSTER` per cluster, fewer (down to two
    per cluster) when ``k`` passes over them would exceed :data:`SEED_WORK` multiply-adds."""
    return int(min(n, SEED_ROWS_PER_CLUSTER * k, max(2 * k, SEED_WORK // max(1, m * k * dim))))


def _draw(weights: F32, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """One row per problem drawn with probability proportional to ``weights`` ``[m, blocks, B]``."""
    m, nblocks, width = weights.shape
    problems = np.arange(m)
    block = weights.sum(axis=2, dtype=np.float64)  # [m, blocks]
    cum = np.cumsum(block, axis=1)
    target = rng.random(m) * cum[:, -1]
    b = np.minimum((cum <= target[:, None]).sum(axis=1), nblocks - 1)
    rest = target - (cum[problems, b] - block[problems, b])
    inner = np.cumsum(weights[problems, b], axis=1, dtype=np.float64)  # [m, B]
    w = np.minimum((inner <= rest[:, None]).sum(axis=1), width - 1)
    out: npt.NDArray[np.int64] = b * width + w
    return out


def train_kmeans(data: npt.NDArray[np.floating], k: int, *, metric: Metric = "l2", max_iters: int = MAX_ITERS,
                 tolerance: float = TOLERANCE, seed: int = SEED, init: Init = "kmeans++") -> KMeans:
    """Train ``k`` centroids on ``data`` with Lloyd iterations.

    Args:
        data: ``[n, dim]`` training vectors (any float type; rows with NaN/inf must be removed).
        k: Number of clusters (at most ``n``).
        metric: ``l2``, ``cosine`` (vectors normalised first) or ``dot`` (unit centroids).
        max_iters: Iteration limit (pylance's default 50).
        tolerance: Stop once the loss changes by less than this fraction.
        seed: Seed of the random initialisation.
        init: ``kmeans++`` (default) or ``random`` distinct rows (pylance's).

    Raises:
        InvalidInputError: fewer training rows than clusters, or ``k < 1``.
    """
    x = np.ascontiguousarray(data, np.float32)
    if metric == "cosine":
        x = normalize(x)
    n = x.shape[0]
    if k < 1 or n < k:
        raise InvalidInputError(f"k-means: cannot train {k} clusters from {n} vectors")
    rng = np.random.default_rng(seed)
    # dot ranks partitions by direction (unit centroids), so the seeds spread over directions
    seeds = seed_rows((normalize(x) if metric == "dot" else x)[None], k, rng, init)[0]
    centroids = x[seeds].copy()
    if metric == "dot":
        centroids = normalize(centroids)
    prev = np.inf
    labels, dists = assign(x, centroids, metric)
    x_t = np.ascontiguousarray(x.T)
    for _ in range(max(1, max_iters)):
        centroids, counts = _means(x_t, labels, k)
        if (counts == 0).any():
            _split_empty(centroids, counts)
        if metric == "dot":
            centroids = normalize(centroids)
        labels, dists = assign(x, centroids, metric)
        loss = float(dists.sum(dtype=np.float64))
        if np.isfinite(prev) and abs(prev - loss) <= tolerance * max(abs(prev), 1e-30):
            break
        prev = loss
    return KMeans(centroids, float(dists.sum(dtype=np.float64)))


# -- many small k-means at once (PQ codebooks) -----------------------------------------------------

#: Scores held at once by :func:`assign_batched` (``m × rows × k``): small blocks stay in cache
#: and below the size at which BLAS starts threads (which thrash on a busy machine).
BATCH_ELEMENTS = 1 << 18


def _augmented(centroids: F32) -> F32:
    """``[m, sub+1, k]``: each centroid with ``-||c||²/2`` appended, so ``[x, 1]·[c, -||c||²/2]``
    is ``x·c - ||c||²/2``, whose maximum over ``c`` is the nearest centroid by squared L2."""
    m, k, sd = centroids.shape
    aug = np.empty((m, sd + 1, k), np.float32)
    aug[:, :sd, :] = centroids.transpose(0, 2, 1)
    aug[:, sd, :] = -0.5 * np.einsum("mkd,mkd->mk", centroids, centroids)
    return aug


def assign_batched(data: F32, centroids: F32, *, distances: bool = True) -> tuple[I32, F32]:
    """Nearest centroid (squared L2) of every row in each of ``m`` independent problems.

    Args:
        data: ``[m, n, sub]`` (problem ``s`` is ``data[s]``; a strided view is fine).
        centroids: ``[m, k, sub]``.
        distances: Compute the distances too (encoding needs only the labels).

    Returns:
        ``(labels int32 [m, n], squared distances float32 [m, n])`` (distances zero when not asked).
    """
    m, n, sd = data.shape
    k = centroids.shape[1]
    labels = np.empty((m, n), np.int32)
    dists = np.zeros((m, n), np.float32)
    if n == 0:
        return labels, dists
    aug = _augmented(centroids)
    step = max(1, BATCH_ELEMENTS // max(m * k, 1))
    xa = np.ones((m, min(step, n), sd + 1), np.float32)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        x = xa[:, :hi - lo]
        x[:, :, :sd] = data[:, lo:hi]
        score = np.matmul(x, aug)  # [m, rows, k]: one batched BLAS call for all problems
        best = np.argmax(score, axis=2)
        labels[:, lo:hi] = best
        if distances:
            top = np.take_along_axis(score, best[:, :, None], axis=2)[:, :, 0]
            x_sq = np.einsum("mnd,mnd->mn", x[:, :, :sd], x[:, :, :sd])
            dists[:, lo:hi] = np.maximum(x_sq - 2.0 * top, 0.0)
    return labels, dists


def _means_batched(data: F32, labels: I32, k: int) -> tuple[F32, npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Per-problem cluster means (empty clusters zero), counts and sums: ``[m, k, sub]``, ``[m, k]``,
    ``[m, k, sub]`` (float64)."""
    m, n, sd = data.shape
    flat = (labels + (np.arange(m, dtype=np.int64) * k)[:, None]).ravel()
    counts = np.bincount(flat, minlength=m * k)
    sums = np.empty((m * k, sd), np.float64)
    rows = data.reshape(m * n, sd)
    for j in range(sd):  # one bincount per sub-vector dimension (a handful), each over every row
        sums[:, j] = np.bincount(flat, weights=rows[:, j], minlength=m * k)
    means = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32).reshape(m, k, sd)
    return means, counts.reshape(m, k), sums.reshape(m, k, sd)


def _loss_batched(x_sq: npt.NDArray[np.float64], centroids: F32, counts: npt.NDArray[np.int64],
                  sums: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each problem's total squared distance of its rows to the centroids they are assigned to.

    ``Σ‖x − c‖² = Σ‖x‖² − 2 Σ_c c·S_c + Σ_c n_c ‖c‖²`` with ``S_c``/``n_c`` the members' sum and
    count, which the mean update computes anyway: the assignment then needs only the labels,
    not a gather of every row's distance (a quarter of the time of a Lloyd step).
    """
    c = centroids.astype(np.float64)
    loss = x_sq - 2.0 * np.einsum("mkd,mkd->m", c, sums) + np.einsum("mk,mk->m", counts, np.einsum("mkd,mkd->mk", c, c))
    out: npt.NDArray[np.float64] = np.maximum(loss, 0.0)
    return out


def train_kmeans_batched(data: F32, k: int, *, max_iters: int = MAX_ITERS, tolerance: float = TOLERANCE,
                         seed: int = SEED, init: Init = "kmeans++") -> tuple[F32, npt.NDArray[np.float64]]:
    """Train ``m`` independent l2 k-means at once (one per PQ sub-vector).

    Each problem runs exactly the Lloyd iterations of :func:`train_kmeans` (k-means++ seeds,
    empty clusters split from the largest, stop on a relative loss change below
    ``tolerance``), but every step is one batched array operation over all problems; a
    problem that has converged keeps its centroids while the others go on.

    Args:
        data: ``[m, n, sub]`` training slices.
        k: Clusters per problem (at most ``n``).
        max_iters: Iteration limit.
        tolerance: Relative loss change that stops a problem.
        seed: Seed of the initialisation (problem ``s`` draws its own rows).
        init: ``kmeans++`` (default) or ``random`` distinct rows (pylance's).

    Returns:
        ``(centroids [m, k, sub], loss per problem [m])``.

    Raises:
        InvalidInputError: fewer rows than clusters, or ``k < 1``.
    """
    x = np.ascontiguousarray(data, np.float32)
    m, n, _ = x.shape
    if k < 1 or n < k:
        raise InvalidInputError(f"k-means: cannot train {k} clusters from {n} vectors")
    rng = np.random.default_rng(seed)
    starts = seed_rows(x, k, rng, init)
    centroids = np.take_along_axis(x, starts[:, :, None], axis=1)
    labels, _ = assign_batched(x, centroids, distances=False)
    x_sq = np.einsum("mnd,mnd->m", x, x, dtype=np.float64)
    loss = np.zeros(m)
    prev = np.full(m, np.inf)
    active = np.ones(m, bool)
    steps = max(1, max_iters)
    for step in range(steps + 1):
        act = np.flatnonzero(active)
        xs = x if act.size == m else x[act]
        means, counts, sums = _means_batched(xs, labels[act], k)
        now = _loss_batched(x_sq[act], centroids[act], counts, sums)  # of the labels the centroids gave
        loss[act] = now
        old = prev[act]
        done = np.isfinite(old) & (np.abs(old - now) <= tolerance * np.maximum(np.abs(old), 1e-30))
        prev[act] = now
        active[act[done]] = False
        if step == steps or not active.any():
            break
        going = ~done
        means, counts = means[going], counts[going]
        for i in np.flatnonzero((counts == 0).any(axis=1)):  # only problems with an empty cluster
            _split_empty(means[i], counts[i])
        act = act[going]
        centroids[act] = means
        labels[act] = assign_batched(xs if going.all() else xs[going], means, distances=False)[0]
    return centroids, loss


# -- hamming: binary centroids by majority vote ("k-modes") ----------------------------------------

def bits_of(data: npt.NDArray[np.generic]) -> F32:
    """``[n, 8 * bytes]`` 0/1 float32 bits of uint8 vectors: the squared L2 distance between two
    such rows is the hamming distance of the bytes, so the BLAS assignment of :func:`assign`
    serves hamming too (exact: every partial sum is an integer far below 2**24)."""
    out: F32 = np.unpackbits(np.ascontiguousarray(data, np.uint8), axis=1).astype(np.float32)
    return out


def assign_hamming(data: npt.NDArray[np.generic], centroids: npt.NDArray[np.generic]) -> tuple[I32, F32]:
    """The nearest centroid of every uint8 row by hamming distance, and that distance.

    Args:
        data: ``[n, bytes]`` vectors (uint8 values in any numeric dtype).
        centroids: ``[k, bytes]`` binary centroids (the same).
    """
    return assign(bits_of(data), bits_of(centroids), "l2")


def train_kmodes(data: npt.NDArray[np.generic], k: int, *, max_iters: int = MAX_ITERS, tolerance: float = TOLERANCE,
                 seed: int = SEED) -> KMeans:
    """Binary centroids for the hamming metric (upstream ``KModeAlgo``, ``rust/lance-index/src/vector/kmeans.rs``).

    Lloyd iterations where a centroid's bit is the majority of its members' bits (a mean above
    one half) and assignment is by hamming distance; a cluster left empty keeps its centroid.
    Initialised from ``k`` distinct random rows, as :func:`train_kmeans`.

    Returns:
        The centroids as float32 ``[k, bytes]`` holding byte values (stored as a UINT8 tensor)
        and the loss (total hamming distance of the rows to their centroids).

    Raises:
        InvalidInputError: fewer training rows than clusters, or ``k < 1``.
    """
    bits = bits_of(data)
    n = bits.shape[0]
    if k < 1 or n < k:
        raise InvalidInputError(f"k-modes: cannot train {k} clusters from {n} vectors")
    rng = np.random.default_rng(seed)
    centroids = bits[np.sort(rng.choice(n, k, replace=False))].copy()
    labels, dists = assign(bits, centroids, "l2")
    prev = float(dists.sum(dtype=np.float64))
    bits_t = np.ascontiguousarray(bits.T)
    for _ in range(max(1, max_iters)):
        means, counts = _means(bits_t, labels, k)
        full = counts > 0
        centroids[full] = (means[full] > 0.5).astype(np.float32)
        labels, dists = assign(bits, centroids, "l2")
        loss = float(dists.sum(dtype=np.float64))
        if abs(prev - loss) <= tolerance * max(abs(prev), 1e-30):
            break
        prev = loss
    packed: F32 = np.packbits(centroids.astype(np.uint8), axis=1).astype(np.float32)
    return KMeans(packed, float(dists.sum(dtype=np.float64)))
