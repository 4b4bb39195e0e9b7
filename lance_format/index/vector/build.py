"""Building IVF vector segments: train on the driver, assign and encode per task, lay out on the driver.

The three steps the generic build (:mod:`lance_format.index.build`) runs through a kind:

1. :func:`train_model`: from one sample of the column, the IVF centroids (k-means on
   ``num_partitions × sample_rate`` rows) and the quantizer (PQ codebooks on up to
   ``256 × 256`` residuals of other rows than the IVF's, SQ bounds on up to ``256 × 256``
   vectors), as pylance trains them
   (``docs/formats/vector-indices.md`` §7; ``rust/lance/src/index/vector/ivf.rs``);
2. :func:`encode_rows`: one task's rows → partition, row id and stored payload (vectors or codes);
   a pure function of the model and the rows, so local threads and Spark executors give the
   same result;
3. :func:`write_model_segment`: every task's rows sorted by (partition, row id), PQ codes
   transposed per partition, HNSW graphs built per partition, both files written.

The model (:class:`VectorModel`) is picklable and is what a delta segment reuses
(``optimize_indices``) and what distributed workers share (``create_index_uncommitted``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.index.codec import HnswConfig, VectorIndexDetails
from lance_format.index.kind import TrainingData
from lance_format.index.store import IndexDir
from lance_format.index.vector import hnsw as _hnsw
from lance_format.index.vector import quantize as q
from lance_format.index.vector import rabitq as rq
from lance_format.index.vector.blas import one_blas_thread
from lance_format.index.vector.kmeans import (
    F32,
    I32,
    Metric,
    assign,
    assign_hamming,
    bits_of,
    normalize,
    train_kmeans,
    train_kmodes,
)
from lance_format.index.vector.layout import (
    FlatStorage,
    HnswGraph,
    IvfSegment,
    PQStorage,
    RQStorage,
    SQStorage,
    Storage,
    read_segment,
    write_ivf_files,
)
from lance_format.table.index_metadata import IndexFile

#: Rows per partition pylance aims for when ``num_partitions`` is not given
#: (``IndexType::target_partition_size``, ``rust/lance-index/src/lib.rs``).
TARGET_PARTITION_SIZE = {"IVF_FLAT": 4096, "IVF_SQ": 8192, "IVF_PQ": 8192, "IVF_RQ": 4096}
HNSW_TARGET_PARTITION_SIZE = 1 << 20


@dataclass(frozen=True)
class VectorModel:
    """What every task of one segment shares (picklable).

    Attributes:
        index_type: ``IVF_FLAT``, ``IVF_PQ``, ``IVF_SQ``, ``IVF_HNSW_*``.
        metric: The distance.
        centroids: ``[num_partitions, dim]`` float32 (unit rows for ``dot``).
        element_type: The column's element type (the stored centroids and FLAT vectors keep it).
        loss: The k-means loss of the training sample, or the stored loss of a loaded segment
            (``None``: none); a segment written from chunks records its rows' loss instead.
        pq: PQ codebooks (``*_PQ``).
        sq: SQ bounds (``*_SQ``).
        hnsw: HNSW parameters (``IVF_HNSW_*``).
        target_partition_size: Recorded in the details when the caller gave it.
        hints: pylance's ``runtime_hints`` (build parameters as strings), in the order written.
    """

    index_type: str
    metric: Metric
    centroids: F32
    element_type: str
    loss: float | None = None
    pq: q.PqCodebook | None = None
    sq: q.SqBounds | None = None
    hnsw: _hnsw.HnswParams | None = None
    target_partition_size: int = 0
    hints: tuple[tuple[str, str], ...] = ()
    rq: rq.RabitqModel | None = None

    @property
    def num_partitions(self) -> int:
        """IVF partitions."""
        return int(self.centroids.shape[0])

    @property
    def storage_kind(self) -> str:
        """``FLAT``, ``PQ`` or ``SQ``."""
        return self.index_type.rsplit("_", 1)[1]

    def details(self) -> VectorIndexDetails:
        """The segment's ``VectorIndexDetails``."""
        kind = self.storage_kind
        hnsw = None if self.hnsw is None else HnswConfig(self.hnsw.m, self.hnsw.ef_construction, self.hnsw.max_level)
        return VectorIndexDetails(
            metric=self.metric, target_partition_size=self.target_partition_size, hnsw=hnsw,
            compression="pq" if kind == "PQ" else "sq" if kind == "SQ" else "rq" if kind == "RQ" else "flat",
            num_bits=self.pq.num_bits if self.pq is not None else self.sq.num_bits if self.sq is not None else
            self.rq.num_bits if self.rq is not None else 0,
            num_sub_vectors=self.pq.num_sub_vectors if self.pq is not None else 0,
            runtime_hints=self.hints)


@dataclass(frozen=True)
class VectorChunk:
    """One task's rows: partition, ``_rowid`` and stored payload (``[n, width]``), in scan order.

    ``loss`` sums the rows' distances to their centroids: pylance records the loss of every
    indexed vector in ``index.idx`` (summed while it shuffles them, ``rust/lance/src/index/vector/
    builder.rs``), not the loss of its training sample.
    """

    partitions: npt.NDArray[np.uint32]
    row_ids: npt.NDArray[np.uint64]
    payload: npt.NDArray[np.generic]
    loss: float = 0.0


def vectors_of(values: pa.Array) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.bool_]]:
    """``[n, dim]`` values of a fixed-size-list column (null rows zero) and the mask of usable rows.

    Null vectors and vectors with NaN or infinite elements are left out of an index, as
    pylance's ``filter_nan`` does.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    dim = values.type.list_size
    n = len(values)
    flat = values.flatten() if values.null_count == 0 else pa.FixedSizeListArray.from_arrays(
        values.values, dim).flatten()
    arr = flat.to_numpy(zero_copy_only=False).reshape(n, dim)
    ok = np.ones(n, bool) if values.null_count == 0 else np.asarray(values.is_valid())
    if arr.dtype.kind == "f":
        ok &= np.isfinite(arr).all(axis=1)
    return arr, ok


def default_partitions(index_type: str, rows: int, target: int | None) -> int:
    """pylance's ``num_partitions`` when none is given: ``max(1, rows // target)``."""
    if target is None:
        target = HNSW_TARGET_PARTITION_SIZE if "HNSW" in index_type else TARGET_PARTITION_SIZE.get(index_type, 8192)
    return max(1, rows // max(1, int(target)))


def _hints(index_type: str, p: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    out = [("lance.ivf.max_iters", str(p["max_iterations"])), ("lance.ivf.sample_rate", str(p["sample_rate"])),
           ("lance.ivf.shuffle_partition_batches", str(p.get("shuffle_partition_batches") or 10240)),
           ("lance.ivf.shuffle_partition_concurrency", str(p.get("shuffle_partition_concurrency") or 2)),
           ("lance.skip_transpose", "true" if p.get("skip_transpose") else "false")]
    if index_type.endswith("PQ"):
        out += [("lance.pq.max_iters", str(p["max_iterations"])), ("lance.pq.sample_rate", str(p["sample_rate"])),
                ("lance.pq.kmeans_redos", "1")]
    if index_type.endswith("SQ"):
        out.append(("lance.sq.sample_rate", str(p["sample_rate"])))
    if "HNSW" in index_type:
        out.append(("lance.hnsw.prefetch_distance", "2"))
    return tuple(out)


def _assign(x: F32, centroids: F32, metric: Metric) -> tuple[I32, F32]:
    """Partition assignment; hamming compares the bytes' bits (binary centroids)."""
    return assign_hamming(x, centroids) if metric == "hamming" else assign(x, centroids, metric)


def _given_array(value: Any, what: str) -> F32 | None:
    if value is None:
        return None
    if isinstance(value, (pa.FixedSizeListArray, pa.ChunkedArray)):
        values, _ = vectors_of(value)
        out: F32 = values.astype(np.float32)
        return out
    out = np.asarray(value, np.float32)
    if out.ndim < 2:
        raise InvalidInputError(f"{what} must be a 2-D (or 3-D) array, got shape {out.shape}")
    return out


#: Seed of the draw that splits the training sample between IVF and quantizer.
SPLIT_SEED = 7


def split_sample(n: int, ivf_rows: int, quant_rows: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Sorted row positions of an ``n``-row sample for IVF training and for the quantizer's.

    Disjoint when ``n >= ivf_rows + quant_rows``; a smaller sample (a small dataset) gives each
    as many rows as it has, sharing the fewest. Seeded: every build of the same sample splits it alike.
    """
    perm = np.random.default_rng(SPLIT_SEED).permutation(n)
    return np.sort(perm[:min(n, ivf_rows)]), np.sort(perm[max(0, n - quant_rows):])


def train_model(index_type: str, sample: Callable[[int], TrainingData], params: Mapping[str, Any],
                element_type: str, total_rows: int) -> VectorModel:
    """Train the IVF centroids and the quantizer from a sample (runs on the driver).

    Args:
        index_type: The kind being built.
        sample: Returns up to ``n`` live rows of the indexed fragments.
        params: The validated create-time parameters (pylance's names).
        element_type: The column's element type name (``float``, ``halffloat``…).
        total_rows: Rows in the indexed fragments (for the default ``num_partitions``).

    Raises:
        InvalidInputError: too few vectors to train on, or parameters that do not fit the data.
    """
    metric: Metric = params["metric"]
    target = params.get("target_partition_size")
    centroids = _given_array(params.get("ivf_centroids"), "ivf_centroids")
    if centroids is not None:
        nparts = centroids.shape[0]
    else:
        nparts = params.get("num_partitions") or default_partitions(index_type, total_rows, target)
    kind = index_type.rsplit("_", 1)[1]
    rate = int(params["sample_rate"])
    nbits = int(params.get("num_bits") or 8)
    quant_rows = (1 << nbits) * rate if kind in ("PQ", "SQ") else 0
    # PQ codebooks trained on the IVF's own training rows learn residuals that k-means has just
    # minimised on exactly those rows (at 1M rows and 256 partitions both samples are the same
    # 65,536 rows), smaller than the residuals of the rows they will encode; pylance draws the
    # two samples separately. So when both are trained they get disjoint rows of one sample:
    # at 100k x 128 (64 partitions, 1,000 queries, 4 seeds each) recall@10 0.216 -> 0.220,
    # pylance's builds 0.219-0.227
    separate = kind == "PQ" and centroids is None and params.get("pq_codebook") is None
    want = nparts * rate + quant_rows if separate else max(nparts * rate, quant_rows)
    data = sample(want)
    arr, ok = vectors_of(data.values)
    prepared = q.prepare(arr[ok], metric)
    quant = prepared  # what the quantizer trains on
    loss: float | None
    if centroids is None:
        pick = prepared
        if separate:
            ivf_rows, pq_rows = split_sample(prepared.shape[0], nparts * rate, quant_rows)
            pick, quant = prepared[ivf_rows], prepared[pq_rows]
        elif prepared.shape[0] > nparts * rate:
            rng = np.random.default_rng(SPLIT_SEED)
            pick = prepared[np.sort(rng.choice(prepared.shape[0], nparts * rate, replace=False))]
        if pick.shape[0] < nparts:
            raise InvalidInputError(f"IVF: cannot train {nparts} partitions from {pick.shape[0]} vectors; "
                                    "choose a smaller num_partitions")
        # one BLAS thread: its threads spin between the Lloyd steps' mid-sized products; on the
        # shared 2-core machine 65k x 256 k-means took 2.1-2.8 s CPU / 4.3-5.5 s wall on one
        # thread against 3.8-4.8 s / 7.3-9.8 s on two (blas.py)
        with one_blas_thread():
            km = train_kmodes(pick, nparts, max_iters=int(params["max_iterations"])) if metric == "hamming" \
                else train_kmeans(pick, nparts, metric=metric, max_iters=int(params["max_iterations"]))
        centroids, loss = km.centroids, km.loss
    else:
        if metric == "dot":
            centroids = normalize(centroids)
        loss = float(_assign(prepared, centroids, metric)[1].sum(dtype=np.float64))
    pq = sq = None
    if kind == "PQ":
        given = _given_array(params.get("pq_codebook"), "pq_codebook")
        if given is not None:
            pq = q.PqCodebook(np.asarray(given, np.float32).reshape(int(params["num_sub_vectors"]), 1 << nbits, -1),
                              nbits)
        else:
            parts, _ = _assign(quant, centroids, metric)
            pq = q.train_pq(q.residuals(quant, parts, centroids, metric), int(params["num_sub_vectors"]),
                            num_bits=nbits, max_iters=int(params["max_iterations"]))
    elif kind == "SQ":
        sq = q.train_sq(prepared, 8)  # pylance ignores num_bits for SQ (§6.3): always 8
    rabit = None if kind != "RQ" else rq.given_model(params["rabitq_model"], prepared.shape[1], int(params["num_bits"])) \
        if params.get("rabitq_model") else rq.new_model(prepared.shape[1], int(params["num_bits"]))
    hnsw = None
    if "HNSW" in index_type:
        hnsw = _hnsw.HnswParams(int(params["m"]), int(params["ef_construction"]), int(params["max_level"]))
    return VectorModel(index_type, metric, np.ascontiguousarray(centroids, np.float32), element_type, loss,
                       pq, sq, hnsw, int(target or 0), _hints(index_type, params), rabit)


def encode_rows(data: TrainingData, model: VectorModel) -> VectorChunk:
    """Assign one task's rows to partitions and encode what the storage keeps (runs anywhere)."""
    arr, ok = vectors_of(data.values)
    arr, ids = arr[ok], data.ids[ok]
    prepared = q.prepare(arr, model.metric)
    payload: npt.NDArray[np.generic]
    with one_blas_thread():  # the runner's tasks are the parallelism (blas.py)
        parts, dist = _assign(prepared, model.centroids, model.metric)
        loss = float(dist.sum(dtype=np.float64)) if model.metric == "hamming" else \
            _assignment_loss(prepared, parts, model.centroids, model.metric)
        if model.rq is not None:
            payload = rq.encode(prepared, parts, model.centroids, model.metric, model.rq)
        elif model.pq is not None:
            payload = q.encode_pq(q.residuals(prepared, parts, model.centroids, model.metric), model.pq)
        elif model.sq is not None:
            payload = q.encode_sq(prepared, model.sq)
        else:
            payload = prepared.astype(arr.dtype) if model.metric == "cosine" else arr
    return VectorChunk(parts.astype(np.uint32), ids.astype(np.uint64), payload, loss)


#: Rows whose loss is summed at once (bounds the float64 copy; 16k rows of 128 dims stay in
#: cache: ~7x faster than 64k rows with a separate square pass).
_LOSS_ROWS = 1 << 14


def _assignment_loss(x: F32, parts: I32, centroids: F32, metric: Metric) -> float:
    """Sum of each row's distance to its centroid (squared L2; ``1 - x·c`` for dot).

    Computed elementwise in float64 rather than taken from the assignment's matrix product, so
    an executor whose BLAS rounds differently records the same loss as a local build.
    """
    total = 0.0
    for lo in range(0, x.shape[0], _LOSS_ROWS):
        xs, cs = x[lo:lo + _LOSS_ROWS], centroids[parts[lo:lo + _LOSS_ROWS]]
        # float32 operands cast inside the ufunc: one float64 buffer instead of three
        if metric == "dot":
            total += xs.shape[0] - float(np.einsum("ij,ij->", xs, cs, dtype=np.float64))
        else:
            d = np.subtract(xs, cs, dtype=np.float64)
            total += float(np.einsum("ij,ij->", d, d))
    return total


def merge_chunks(chunks: Sequence[VectorChunk], model: VectorModel) -> tuple[VectorChunk, npt.NDArray[np.int64]]:
    """Every task's rows sorted by (partition, row id), and each partition's row count."""
    width = model.pq.num_sub_vectors if model.pq is not None else model.rq.width if model.rq is not None else \
        model.centroids.shape[1]
    coded = model.pq is not None or model.sq is not None or model.rq is not None
    dtype = np.uint8 if coded else np.dtype(_NUMPY[model.element_type])
    parts = np.concatenate([c.partitions for c in chunks]) if chunks else np.zeros(0, np.uint32)
    ids = np.concatenate([c.row_ids for c in chunks]) if chunks else np.zeros(0, np.uint64)
    payload = np.concatenate([c.payload for c in chunks]) if chunks else np.zeros((0, width), dtype)
    order = np.lexsort((ids, parts))
    lengths = np.bincount(parts, minlength=model.num_partitions).astype(np.int64)
    loss = math.fsum(c.loss for c in chunks)  # exactly rounded: the same whatever the tasks' order
    return VectorChunk(parts[order], ids[order], np.ascontiguousarray(payload[order], dtype), loss), lengths


_NUMPY = {"float": "float32", "halffloat": "float16", "double": "float64", "uint8": "uint8"}


def stored_centroids(model: VectorModel) -> npt.NDArray[np.generic]:
    """The centroids in the column's element type, as pylance's tensor keeps them."""
    return model.centroids.astype(_NUMPY.get(model.element_type, "float32"))


def storage_of(rows: VectorChunk, model: VectorModel, lengths: npt.NDArray[np.int64] | None = None) -> Storage:
    """The storage of sorted rows (PQ codes one row per vector; the layout transposes them)."""
    if model.rq is not None:
        return rq.storage(rows.payload.astype(np.uint8),
                          lengths if lengths is not None else np.array([rows.row_ids.size]), model.rq)
    if model.pq is not None:
        book = model.pq.codebook.astype(_NUMPY.get(model.element_type, "float32"))
        return PQStorage(book, rows.payload.astype(np.uint8), model.pq.num_bits)
    if model.sq is not None:
        return SQStorage(rows.payload.astype(np.uint8), model.sq.start, model.sq.end, model.sq.num_bits)
    return FlatStorage(rows.payload)


@dataclass(frozen=True)
class PartitionRows:
    """The sorted rows of consecutive partitions ``first, first + 1, …`` and (once built) their graphs."""

    first: int
    rows: VectorChunk
    lengths: npt.NDArray[np.int64]
    graph: HnswGraph | None = None


#: Rows one graph task aims at: consecutive partitions are grouped up to this size (a larger
#: partition is a task of its own), so a runner spreads the graphs over its workers. Small
#: enough that 100k rows make several tasks: local threads then build graphs side by side
#: (numpy releases the GIL in the matrix products, partitions and gathers that dominate).
GRAPH_TASK_ROWS = 16_384


def graph_tasks(chunks: Sequence[VectorChunk], model: VectorModel) -> list[tuple[PartitionRows, VectorModel]]:
    """Every task's rows regrouped by partition, for graphs built on the runner (IVF_HNSW_*; else none)."""
    if model.hnsw is None:
        return []
    rows, lengths = merge_chunks(chunks, model)
    ends = np.cumsum(lengths)
    tasks: list[tuple[PartitionRows, VectorModel]] = []
    p = lo = 0
    while p < lengths.size:
        # the partitions whose rows end within GRAPH_TASK_ROWS of this group's start (at least one)
        q = max(p + 1, int(np.searchsorted(ends, lo + GRAPH_TASK_ROWS, side="right")))
        hi = int(ends[q - 1])
        # the first task carries the segment's loss (write_model_segment sums the tasks')
        part = VectorChunk(rows.partitions[lo:hi], rows.row_ids[lo:hi], rows.payload[lo:hi], rows.loss if p == 0 else 0.0)
        tasks.append((PartitionRows(p, part, lengths[p:q]), model))
        p, lo = q, hi
    # largest first: partitions are uneven (at 1M rows, 256 partitions range from hundreds to ~20k
    # rows), and a big one started last keeps one worker busy after the others are done; the
    # segment is assembled by each group's first partition, so the order changes nothing written
    tasks.sort(key=lambda t: -int(t[0].rows.row_ids.size))
    return tasks


def build_partition_graphs(task: tuple[PartitionRows, VectorModel]) -> PartitionRows:
    """One graph task: the HNSW graphs of its partitions (runs on the runner)."""
    group, model = task
    assert model.hnsw is not None
    # hamming: squared l2 between 0/1 bit vectors is the hamming distance of the bytes
    vectors = bits_of(group.rows.payload) if model.metric == "hamming" else \
        _hnsw.storage_vectors(group.rows.payload, model)
    with one_blas_thread():  # the runner's workers share the cores, not BLAS threads (index/vector/blas.py)
        graph = _hnsw.build_graphs(vectors, group.lengths, model.hnsw,
                                   _hnsw.graph_metric(model.metric), first=group.first)
    return replace(group, graph=graph)


def write_rows(out: IndexDir, rows: VectorChunk, lengths: npt.NDArray[np.int64], model: VectorModel,
               loss: float | None, graph: HnswGraph | None = None) -> tuple[IndexFile, ...]:
    """Write a segment from rows already sorted by (partition, row id); HNSW graphs not given are built here."""
    if model.hnsw is not None and graph is None:
        graph = build_partition_graphs((PartitionRows(0, rows, lengths), model)).graph
    seg = IvfSegment(model.index_type, model.metric, stored_centroids(model), lengths.astype(np.uint32),
                     rows.row_ids, storage_of(rows, model, lengths), loss, graph)
    return write_ivf_files(out, seg)


def write_model_segment(out: IndexDir, chunks: Sequence[VectorChunk], model: VectorModel) -> tuple[IndexFile, ...]:
    """Write the segment from every task's chunk, or from every graph task's partitions (on the driver)."""
    if chunks and all(isinstance(c, PartitionRows) for c in chunks):
        groups = sorted((c for c in chunks if isinstance(c, PartitionRows)), key=lambda g: g.first)
        rows = VectorChunk(np.concatenate([g.rows.partitions for g in groups]),
                           np.concatenate([g.rows.row_ids for g in groups]),
                           np.concatenate([g.rows.payload for g in groups]))
        graphs = [g.graph for g in groups if g.graph is not None]
        return write_rows(out, rows, np.concatenate([g.lengths for g in groups]), model,
                          math.fsum(g.rows.loss for g in groups), _hnsw.concat_graphs(graphs))
    rows, lengths = merge_chunks(chunks, model)
    return write_rows(out, rows, lengths, model, rows.loss)


def with_loss(model: VectorModel, loss: float | None) -> VectorModel:
    """``model`` recording another loss (delta segments carry their own)."""
    return replace(model, loss=loss)


# -- existing segments: their model (delta segments) and their rows (remap) ---------------------

_ELEMENT = {np.dtype("float32"): "float", np.dtype("float16"): "halffloat", np.dtype("float64"): "double",
            np.dtype("uint8"): "uint8"}


def model_of(seg: IvfSegment, details: VectorIndexDetails) -> VectorModel:
    """The model of an existing segment (ours or pylance's): centroids, loss and quantizer."""
    st = seg.storage
    pq = q.PqCodebook(np.asarray(st.codebook, np.float32), st.nbits) if isinstance(st, PQStorage) else None
    sq = q.SqBounds(st.start, st.end, st.num_bits) if isinstance(st, SQStorage) else None
    rabit = rq.model_of(st) if isinstance(st, RQStorage) else None
    hnsw = None if details.hnsw is None else _hnsw.HnswParams(
        details.hnsw.max_connections, details.hnsw.construction_ef, details.hnsw.max_level)
    return VectorModel(details.index_type, details.metric, np.asarray(seg.centroids, np.float32),
                       _ELEMENT.get(np.dtype(seg.centroids.dtype), "float"), seg.loss, pq, sq, hnsw,
                       details.target_partition_size, details.runtime_hints, rabit)


def load_model(src: IndexDir, details: VectorIndexDetails) -> VectorModel:
    """The model of the segment stored in ``src``."""
    return model_of(read_segment(src, graph=False), details)  # the graph is not part of the model


def rows_of(seg: IvfSegment) -> VectorChunk:
    """A segment's stored rows, with their partitions."""
    st = seg.storage
    payload = st.codes if isinstance(st, (PQStorage, SQStorage)) else rq.payload_of(st, seg.lengths) \
        if isinstance(st, RQStorage) else st.vectors
    parts = np.repeat(np.arange(seg.lengths.size, dtype=np.uint32), seg.lengths.astype(np.int64))
    return VectorChunk(parts, seg.row_ids, payload)


def remap_segment(src: IndexDir, out: IndexDir, details: VectorIndexDetails,
                  translate: Callable[[npt.NDArray[np.uint64]], tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]]
                  ) -> tuple[IndexFile, ...]:
    """Write a segment again with its row ids translated (``translate`` → new ids and keep mask).

    Every kept row keeps its partition and its exact code (pylance copies codes, §9.1);
    rows are sorted again by new row id within each partition; HNSW graphs are rebuilt.
    """
    seg = read_segment(src, graph=False)  # the graphs are built again below
    model = model_of(seg, details)
    rows = rows_of(seg)
    new_ids, keep = translate(rows.row_ids)
    kept = VectorChunk(rows.partitions[keep], new_ids, rows.payload[keep])
    merged, lengths = merge_chunks([kept], model)
    return write_rows(out, merged, lengths, model, model.loss)
