"""Writing a vector segment's two files, ``auxiliary.idx`` and ``index.idx``, as pylance 14.0.2 lays them out.

``docs/formats/vector-indices.md`` §3-§6 (verified on pylance's bytes):

* both files are Lance 2.2 files whatever the dataset's storage version;
* ``auxiliary.idx`` (the storage) holds ``_rowid`` and the vectors or codes, grouped by partition
  in partition order and sorted by row id within a partition; its schema metadata says the
  ``distance_type``, where the IVF message is (``lance:ivf``, global buffer 1: per-partition
  offsets and lengths) and the ``storage_metadata``; PQ adds the codebook as buffer 2;
* ``index.idx`` (the sub-index) holds the IVF centroids and loss in buffer 1 and either an empty
  FLAT marker column or the HNSW graph rows of every partition (``lance:hnsw``, one JSON
  string per partition).

This module only lays out bytes; the search side's readers live in ``vector/layout.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.index.codec import IvfModel, Tensor, encode_ivf, encode_tensor
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile

#: The Lance file version pylance 14.0.2 writes vector index files in, on every dataset.
FILE_VERSION = "2.2"
AUX = "auxiliary.idx"
INDEX = "index.idx"


@dataclass(frozen=True)
class Storage:
    """The storage column of ``auxiliary.idx`` and what describes it.

    Attributes:
        field: The column's field (``flat``, ``__pq_code``, ``__sq_code``).
        values: Its values, rows in the file's order.
        metadata: The one ``storage_metadata`` element (a JSON object as text).
        buffers: Global buffers after the IVF message (the PQ codebook).
    """

    field: pa.Field
    values: pa.Array
    metadata: str
    buffers: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class HnswGraph:
    """The HNSW rows of every partition, concatenated in partition order.

    Attributes:
        vector_ids: Node (position in its partition's storage slice) of each row.
        neighbors: Per row, the node ids of its neighbours on that row's level.
        distances: Per row, the distance to each neighbour.
        lengths: Graph rows of each partition.
        metadata: One ``lance:hnsw`` JSON string per partition.
    """

    vector_ids: npt.NDArray[np.uint32]
    neighbors: pa.Array
    distances: pa.Array
    lengths: npt.NDArray[np.uint32]
    metadata: tuple[str, ...]


def _json(obj: object) -> str:
    """Compact JSON (pylance's serde_json output: no spaces)."""
    return json.dumps(obj, separators=(",", ":"))


def _offsets(lengths: npt.NDArray[np.integer]) -> npt.NDArray[np.uint64]:
    return np.concatenate(([0], np.cumsum(lengths, dtype=np.uint64)[:-1])).astype(np.uint64) \
        if lengths.size else np.zeros(0, np.uint64)


def fixed_size(values: npt.NDArray[np.generic], nullable_items: bool = True) -> pa.FixedSizeListArray:
    """A ``[n, d]`` array as a fixed-size-list column."""
    n, d = values.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(values).reshape(n * d)), d)


def flat_storage(vectors: npt.NDArray[np.generic], nullable: bool = False) -> Storage:
    """FLAT storage: the vectors themselves (normalised for cosine by the caller)."""
    values = fixed_size(vectors)
    return Storage(pa.field("flat", values.type, nullable=nullable), values,
                   _json({"dim": int(vectors.shape[1])}))


def pq_storage(codes: npt.NDArray[np.uint8], codebook: npt.NDArray[np.generic], num_sub_vectors: int,
               num_bits: int, dim: int) -> Storage:
    """PQ storage: transposed (packed) codes and the codebook tensor as global buffer 2."""
    values = fixed_size(codes)
    meta = _json({"codebook_position": 2, "nbits": num_bits, "num_sub_vectors": num_sub_vectors,
                  "dimension": dim, "codebook_tensor": [], "transposed": True})
    return Storage(pa.field("__pq_code", values.type), values, meta,
                   (encode_tensor(Tensor.from_numpy(codebook)),))


def sq_storage(codes: npt.NDArray[np.uint8], start: float, end: float, num_bits: int = 8) -> Storage:
    """SQ storage: row-major 8-bit codes and their bounds."""
    values = fixed_size(codes)
    meta = _json({"dim": int(codes.shape[1]), "num_bits": num_bits, "bounds": {"start": start, "end": end}})
    return Storage(pa.field("__sq_code", values.type), values, meta)


def write_vector_segment(out: IndexDir, *, index_type: str, metric: str, centroids: npt.NDArray[np.generic],
                         loss: float | None, lengths: npt.NDArray[np.integer], row_ids: npt.NDArray[np.uint64],
                         storage: Storage, graph: HnswGraph | None = None) -> tuple[IndexFile, ...]:
    """Write both files of one segment; returns their entries (``auxiliary.idx`` first, as pylance lists them).

    Args:
        out: The segment's directory.
        index_type: ``IVF_PQ``, ``IVF_HNSW_SQ``… (recorded in ``lance:index``).
        metric: ``l2``, ``cosine``, ``dot`` or ``hamming``.
        centroids: ``[num_partitions, dim]`` in the column's element type.
        loss: The k-means loss (``None``: not recorded).
        lengths: Storage rows of each partition.
        row_ids: ``_rowid`` of every storage row (partition order, sorted within each).
        storage: The storage column.
        graph: The HNSW rows, for ``IVF_HNSW_*`` kinds (``None``: a FLAT sub-index).
    """
    out.version = FILE_VERSION
    lens: npt.NDArray[np.uint32] = np.asarray(lengths, np.uint32)
    aux_ivf = IvfModel(_offsets(lens), lens)
    aux_schema = pa.schema([pa.field("_rowid", pa.uint64()), storage.field])
    aux = pa.table([pa.array(row_ids, pa.uint64()), storage.values], schema=aux_schema)
    aux_file = out.write(AUX, aux, {"distance_type": metric, "lance:ivf": "1",
                                     "storage_metadata": _json([storage.metadata])},
                         global_buffers=(encode_ivf(aux_ivf), *storage.buffers))
    index_meta = {"lance:index": _json({"type": index_type, "distance_type": metric}), "lance:ivf": "1"}
    if graph is None:
        glens = np.zeros(lens.size, np.uint32)
        table = pa.table({"__flat_marker": pa.array([], pa.uint64())},
                         schema=pa.schema([pa.field("__flat_marker", pa.uint64(), nullable=False)]))
        index_meta["lance:flat"] = _json([""] * int(lens.size))
    else:
        glens = graph.lengths.astype(np.uint32)
        table = pa.table({"__vector_id": pa.array(graph.vector_ids, pa.uint32()),
                          "__neighbors": graph.neighbors, "_distance": graph.distances},
                         schema=pa.schema([pa.field("__vector_id", pa.uint32()),
                                           pa.field("__neighbors", pa.list_(pa.uint32())),
                                           pa.field("_distance", pa.list_(pa.float32()))]))
        index_meta["lance:hnsw"] = _json(list(graph.metadata))
    index_ivf = IvfModel(_offsets(glens), glens, Tensor.from_numpy(np.ascontiguousarray(centroids)), loss)
    index_file = out.write(INDEX, table, index_meta, global_buffers=(encode_ivf(index_ivf),))
    return aux_file, index_file


def concat_lists(parts: Sequence[pa.Array], typ: pa.DataType) -> pa.Array:
    """Concatenate list arrays (an empty list-typed array for no parts)."""
    return pa.concat_arrays(list(parts)) if parts else pa.array([], typ)
