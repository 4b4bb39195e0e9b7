"""The two files of a vector segment, ``index.idx`` and ``auxiliary.idx``, read and written.

pylance 14.0.2's v3 layout (``docs/formats/vector-indices.md`` §3-6; upstream
``rust/lance-index/src/vector/v3/``, ``ivf/storage.rs``, ``pq/storage.rs``, ``sq/storage.rs``,
``hnsw/``): both files carry an ``IVF`` protobuf in the global buffer named by the schema
metadata key ``lance:ivf``. ``index.idx`` holds the centroids (and, for HNSW kinds, the graph
rows of each partition); ``auxiliary.idx`` holds the quantized storage, one row per indexed
vector with its ``_rowid``, grouped by partition and sorted by row id inside each.

:func:`read_segment` turns the files into an :class:`IvfSegment` of plain numpy arrays
(PQ codes untransposed and unpacked, one row per vector); :func:`write_ivf_files` writes
such a segment back in pylance's layout, so a build, remap or optimize only produces arrays.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import numbers
from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.index.codec.vector import (
    IvfModel,
    Tensor,
    decode_ivf,
    decode_tensor,
    encode_ivf,
    encode_tensor,
)
from lance_format.index.store import IndexDir
from lance_format.index.vector import rq_layout
from lance_format.index.vector.distance import Metric, metric_name
from lance_format.index.vector.hnsw_walk import GraphRows, read_graph
from lance_format.index.vector.partition_codes import ROW_ID, PartitionCodes, fsl_matrix
from lance_format.index.vector.rq_layout import Decoded
from lance_format.table.index_metadata import IndexFile

INDEX_FILE = "index.idx"
AUX_FILE = "auxiliary.idx"
#: pylance 14.0.2 writes vector index files as Lance 2.2 files on every dataset.
VECTOR_FILE_VERSION = "2.2"
U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]
IndexType = Literal["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_RQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"]


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


@dataclass(frozen=True)
class FlatStorage:
    """Raw vectors (``flat`` column); L2-normalized for cosine indices."""

    vectors: npt.NDArray[Any]  # [n, dim], the column's element type


@dataclass(frozen=True)
class PQStorage:
    """Product-quantized codes (``__pq_code``) and their codebook.

    Attributes:
        codebook: ``[num_sub_vectors, 2**nbits, dim // num_sub_vectors]`` codewords.
        codes: ``[n, num_sub_vectors]`` codeword index per vector and sub-vector (unpacked).
        nbits: 8 or 4 bits per code.
    """

    codebook: npt.NDArray[Any]
    codes: U8
    nbits: int = 8

    @property
    def num_sub_vectors(self) -> int:
        """Sub-vectors per vector."""
        return int(self.codebook.shape[0])

    @property
    def dimension(self) -> int:
        """Vector dimension."""
        return int(self.codebook.shape[0] * self.codebook.shape[2])


@dataclass(frozen=True)
class SQStorage:
    """Scalar-quantized codes (``__sq_code``): ``floor((x - start) / (end - start) * 255)`` per element."""

    codes: U8  # [n, dim]
    start: float
    end: float
    num_bits: int = 8


@dataclass(frozen=True)
class RQStorage:
    """RaBitQ storage, kept as pylance wrote it (columns after ``_rowid`` and the metadata JSON).

    Attributes:
        columns: The stored columns (no rows when the segment is read per partition).
        metadata: ``storage_metadata`` (rotation, bit width, layout).
        decoded: Set on a segment read per partition (``read_segment(lazy=True)``): the
            scoring arrays, each partition's rows valid once :meth:`IvfSegment.load` covered it.
        read_columns: Reads the stored columns whole (set with ``decoded``).
    """

    columns: pa.Table
    metadata: dict[str, Any]
    decoded: Decoded | None = None
    read_columns: Callable[[], pa.Table] | None = None

    def table(self) -> pa.Table:
        """The stored columns, read now if the segment was read per partition (writing it back)."""
        return self.columns if self.read_columns is None else self.read_columns()


Storage = Union[FlatStorage, PQStorage, SQStorage, RQStorage]


@dataclass(frozen=True)
class HnswGraph:
    """The HNSW rows of ``index.idx``: per partition, its levels (§5.2).

    Attributes:
        table: ``__vector_id`` (uint32), ``__neighbors`` (list<uint32>), ``_distance``
            (list<float32>) rows of every partition, partition after partition.
        lengths: Graph rows of each partition.
        partitions: Per partition, ``{"entry_point", "params", "level_offsets"}`` as in ``lance:hnsw``.
    """

    table: pa.Table
    lengths: npt.NDArray[np.uint32]
    partitions: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class IvfSegment:
    """One vector segment in memory.

    Attributes:
        index_type: ``IVF_PQ``, ``IVF_HNSW_SQ``…
        metric: The segment's distance type.
        centroids: ``[num_partitions, dim]`` IVF centroids.
        lengths: Vectors of each partition (rows of ``auxiliary.idx``).
        row_ids: ``_rowid`` of each vector, partition after partition.
        storage: The vectors' storage (same row order as ``row_ids``).
        loss: k-means loss recorded in ``index.idx`` (``None``: not recorded).
        hnsw: The graph of ``IVF_HNSW_*`` kinds.
        codes: Set when the row ids and the storage's code rows are read per partition on first
            use (``read_segment(lazy=True)``): a partition's code rows are valid once :meth:`load`
            covered it, its row ids once :meth:`load` or :meth:`load_ids` did.
        walk: The graph of ``IVF_HNSW_*`` kinds read per partition for searching
            (``read_segment(graph="walk")``), see :mod:`lance_format.index.vector.hnsw_walk`.
    """

    index_type: str
    metric: Metric
    centroids: npt.NDArray[Any]
    lengths: npt.NDArray[np.uint32]
    row_ids: U64
    storage: Storage
    loss: float | None = None
    hnsw: HnswGraph | None = None
    codes: PartitionCodes | None = None
    walk: GraphRows | None = None

    def load(self, parts: npt.NDArray[np.int64]) -> None:
        """Make the row ids and storage rows of partitions ``parts`` valid (a no-op on an eagerly
        read segment)."""
        if self.codes is not None:
            self.codes.load(parts)

    def load_ids(self, parts: npt.NDArray[np.int64]) -> None:
        """Make the row ids of partitions ``parts`` valid, leaving their code rows unread."""
        if self.codes is not None:
            self.codes.load_ids(parts)

    def load_all(self) -> None:
        """Make every row id and storage row valid, for consumers of the whole segment (writing it back)."""
        self.load(np.arange(self.num_partitions, dtype=np.int64))

    @property
    def offsets(self) -> npt.NDArray[np.uint64]:
        """First row of each partition."""
        return np.concatenate([[0], np.cumsum(self.lengths, dtype=np.uint64)[:-1]]).astype(np.uint64)

    @property
    def num_partitions(self) -> int:
        """Partitions of the IVF model."""
        return int(self.centroids.shape[0])

    def partition_rows(self, p: int) -> slice:
        """Rows of partition ``p`` in ``row_ids`` and the storage arrays."""
        start = int(self.offsets[p])
        return slice(start, start + int(self.lengths[p]))


# -- reading -------------------------------------------------------------------------------------

def _ivf_of(reader: Any, where: str) -> IvfModel:
    meta = reader.schema.metadata or {}
    pos = meta.get(b"lance:ivf")
    if pos is None:
        raise CorruptFileError(f"{where}: no lance:ivf schema metadata")
    try:
        return decode_ivf(reader.read_global_buffer(int(pos)), f"{where}: IVF")
    except ValueError as exc:
        raise CorruptFileError(f"{where}: bad lance:ivf {pos!r}: {exc}") from exc


def _json_meta(meta: dict[bytes, bytes], key: bytes, where: str) -> Any:
    raw = meta.get(key)
    if raw is None:
        raise CorruptFileError(f"{where}: no {key.decode()} schema metadata")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CorruptFileError(f"{where}: {key.decode()} is not JSON: {exc}") from exc


def _untranspose(raw: U8, lengths: npt.NDArray[np.uint32], width: int) -> U8:
    """Per partition, the stored bytes are the transpose of its ``n × width`` code matrix."""
    out = np.empty_like(raw)
    flat, start = raw.reshape(-1), 0
    for n in lengths.tolist():
        block = flat[start * width:(start + n) * width]
        out[start:start + n] = block.reshape(width, n).T
        start += n
    return out


def _transpose(codes: U8, lengths: npt.NDArray[np.uint32]) -> U8:
    width = codes.shape[1]
    out = np.empty(codes.size, dtype=np.uint8)
    start = 0
    for n in lengths.tolist():
        out[start * width:(start + n) * width] = codes[start:start + n].T.reshape(-1)
        start += n
    return out.reshape(codes.shape)


def _unpack(raw: U8, nbits: int, m: int) -> U8:
    """One code per sub-vector: 4-bit codes come two to a byte, low nibble first."""
    if nbits == 8:
        return raw
    codes = np.empty((raw.shape[0], raw.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2], codes[:, 1::2] = raw & 0x0F, raw >> 4
    return codes[:, :m]


def _lazy_storage(src: IndexDir, aux: Any, meta: dict[bytes, bytes], lengths: npt.NDArray[np.uint32],
                  where: str) -> tuple[Storage, PartitionCodes] | None:
    """Storage whose code rows :class:`PartitionCodes` reads per partition (``None``: a storage
    read whole, an unknown one or RaBitQ's legacy layout)."""
    fields = {f.name: f for f in aux.schema}
    sm = _json_meta(meta, b"storage_metadata", where)
    info = json.loads(sm[0]) if isinstance(sm, list) and sm else {}
    n = int(aux.num_rows)

    def ids_reader() -> Any:
        return src.reader(AUX_FILE, [ROW_ID])

    row_ids = np.empty(n, np.uint64)
    if rq_layout.CODES in fields:
        dim, ex_bits, packed = rq_layout.describe(info)
        cols = rq_layout.columns_of(dim, ex_bits)
        if any(c not in fields for c in cols):
            return None  # a legacy layout: read whole (and refused there)
        dec = rq_layout.empty(n, dim, ex_bits)

        def put(table: pa.Table, spans: list[tuple[int, int, int]]) -> None:
            rq_layout.fill(dec, table, spans, dim, ex_bits, packed, where)

        # no rows (from_batches: Schema.empty_table imports pandas)
        columns = pa.Table.from_batches([], schema=pa.schema([f for f in aux.schema if f.name != ROW_ID]))
        def read_columns() -> pa.Table:
            return src.reader(AUX_FILE).read_all().to_table().drop_columns([ROW_ID])

        return RQStorage(columns, info, dec, read_columns), PartitionCodes(src.reader(AUX_FILE, [ROW_ID, *cols]), cols[0], lengths,
                                                             dec.codes, lambda raw: raw, row_ids, ids_reader, put=put)
    for column in ("flat", "__sq_code", "__pq_code"):
        if column in fields:
            break
    else:
        return None
    typ = fields[column].type
    if not pa.types.is_fixed_size_list(typ):
        raise CorruptFileError(f"{where}: column {column} is {typ}, not a fixed-size list")
    width = int(typ.list_size)
    reader = src.reader(AUX_FILE, [ROW_ID, column])
    storage: Storage
    if column == "flat":
        vectors = np.empty((n, width), typ.value_type.to_pandas_dtype())
        return FlatStorage(vectors), PartitionCodes(reader, column, lengths, vectors, lambda raw: raw, row_ids,
                                                    ids_reader)
    if column == "__sq_code":
        bounds = info.get("bounds") or {}
        codes = np.empty((n, width), np.uint8)
        storage = SQStorage(codes, float(bounds.get("start", 0.0)), float(bounds.get("end", 0.0)),
                            int(info.get("num_bits", 8)))
        return storage, PartitionCodes(reader, column, lengths, codes, lambda raw: raw, row_ids, ids_reader)
    nbits, m, dim = int(info["nbits"]), int(info["num_sub_vectors"]), int(info["dimension"])
    if nbits not in (4, 8):
        raise NotSupportedError(f"{where}: PQ with {nbits} bits per code is not supported")
    tensor = decode_tensor(aux.read_global_buffer(int(info["codebook_position"])), f"{where}: PQ codebook")
    codebook = tensor.to_numpy().reshape(m, 1 << nbits, dim // m)
    transposed = bool(info.get("transposed", False))

    def decode(raw: npt.NDArray[Any]) -> U8:
        block = raw.astype(np.uint8, copy=False)
        if transposed:  # one partition's bytes are the transpose of its rows x width matrix
            block = block.reshape(-1).reshape(width, block.shape[0]).T
        return _unpack(block, nbits, m)

    codes = np.empty((n, m), np.uint8)
    return PQStorage(codebook, codes, nbits), PartitionCodes(reader, column, lengths, codes, decode, row_ids,
                                                             ids_reader)


def _storage(table: pa.Table, meta: dict[bytes, bytes], lengths: npt.NDArray[np.uint32], reader: Any,
             where: str) -> Storage:
    names = table.schema.names
    sm = _json_meta(meta, b"storage_metadata", where)
    info = json.loads(sm[0]) if isinstance(sm, list) and sm else {}
    if "flat" in names:
        return FlatStorage(fsl_matrix(table.column("flat"), where))
    if "__sq_code" in names:
        bounds = info.get("bounds") or {}
        return SQStorage(fsl_matrix(table.column("__sq_code"), where).astype(np.uint8),
                         float(bounds.get("start", 0.0)), float(bounds.get("end", 0.0)), int(info.get("num_bits", 8)))
    if "__pq_code" in names:
        nbits, m, dim = int(info["nbits"]), int(info["num_sub_vectors"]), int(info["dimension"])
        tensor = decode_tensor(reader.read_global_buffer(int(info["codebook_position"])), f"{where}: PQ codebook")
        codebook = tensor.to_numpy().reshape(m, 1 << nbits, dim // m)
        raw = fsl_matrix(table.column("__pq_code"), where).astype(np.uint8)
        if info.get("transposed", False):
            raw = _untranspose(raw, lengths, raw.shape[1])
        if nbits not in (4, 8):
            raise NotSupportedError(f"{where}: PQ with {nbits} bits per code is not supported")
        return PQStorage(codebook, _unpack(raw, nbits, m), nbits)
    if "_rabit_codes" in names:
        return RQStorage(table.drop_columns([ROW_ID]), info)
    raise NotSupportedError(f"{where}: unknown vector storage columns {names}")


def _hnsw(reader: Any, ivf: IvfModel, meta: dict[bytes, bytes], where: str) -> HnswGraph:
    # pylance writes an empty string for a partition without rows
    parts = tuple(json.loads(p) if p else {} for p in _json_meta(meta, b"lance:hnsw", where))
    return HnswGraph(reader.read_all().to_table(), ivf.lengths.astype(np.uint32), parts)


def read_segment(src: IndexDir, *, graph: bool | Literal["walk"] = True, lazy: bool = False) -> IvfSegment:
    """Read both files of a vector segment (``graph=False``: leave the HNSW rows of
    ``index.idx`` unread, ``hnsw`` is then ``None``; ``graph="walk"``: read each partition's
    graph when a search first walks it, into ``walk``).

    ``lazy=True`` reads the row ids and the storage's code rows per partition when
    :meth:`IvfSegment.load` (or, for row ids alone, :meth:`IvfSegment.load_ids`) first asks for
    them (FLAT, PQ, SQ and RaBitQ storage; RaBitQ's are decoded for scoring and its columns left
    empty): for searches, which touch a few
    partitions. Consumers of every row call ``load_all`` or read eagerly (the default).

    Raises:
        CorruptFileError: missing or inconsistent metadata, buffers or columns.
        NotSupportedError: a storage or layout this reader does not know.
    """
    idx = src.reader(INDEX_FILE)
    aux = src.reader(AUX_FILE)
    where_i, where_a = idx.path, aux.path
    imeta = dict(idx.schema.metadata or {})
    ameta = dict(aux.schema.metadata or {})
    kind = _json_meta(imeta, b"lance:index", where_i)
    index_type = str(kind.get("type", ""))
    metric = metric_name(str(kind.get("distance_type", ameta.get(b"distance_type", b"l2").decode())))
    ivf_i, ivf_a = _ivf_of(idx, where_i), _ivf_of(aux, where_a)
    centroids = ivf_i.centroid_array()
    if centroids is None:  # a merged segment also keeps them in the aux file (§11)
        centroids = ivf_a.centroid_array()
    if centroids is None:
        raise CorruptFileError(f"{where_i}: the IVF model has no centroids")
    lengths = ivf_a.lengths.astype(np.uint32)
    if lengths.size != centroids.shape[0] or int(lengths.sum()) != aux.num_rows:
        raise CorruptFileError(f"{where_a}: partition lengths {lengths.tolist()[:8]}… do not match "
                               f"{centroids.shape[0]} centroids and {aux.num_rows} rows")
    has_graph = b"lance:hnsw" in imeta
    hnsw = _hnsw(idx, ivf_i, imeta, where_i) if graph is True and has_graph else None
    walk = None
    if graph == "walk" and has_graph:
        walk = read_graph(lambda: src.reader(INDEX_FILE, ["__vector_id", "__neighbors"]),
                          _json_meta(imeta, b"lance:hnsw", where_i), lengths, ivf_i.lengths.astype(np.uint32), where_i)
    lazily = _lazy_storage(src, aux, ameta, lengths, where_a) if lazy else None
    if lazily is not None:  # row ids too are read per partition, with the codes
        storage, codes = lazily
        return IvfSegment(index_type, metric, centroids, lengths, codes.row_ids, storage, ivf_i.loss, hnsw, codes,
                          walk)
    table = aux.read_all().to_table()
    row_ids = numbers(table.column(ROW_ID)).astype(np.uint64)
    storage = _storage(table, ameta, lengths, aux, where_a)
    return IvfSegment(index_type, metric, centroids, lengths, row_ids, storage, ivf_i.loss, hnsw, walk=walk)


# -- writing -------------------------------------------------------------------------------------

def _fsl(matrix: npt.NDArray[Any], typ: pa.DataType) -> pa.FixedSizeListArray:
    n, width = matrix.shape
    return pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(matrix).reshape(-1), type=typ), width)


def _aux_table(seg: IvfSegment) -> tuple[pa.Table, dict[str, Any], list[bytes]]:
    """The storage columns, the ``storage_metadata`` object and extra global buffers (after the IVF)."""
    seg.load_all()
    st = seg.storage
    rid = pa.field(ROW_ID, pa.uint64(), nullable=True)
    ids = pa.array(seg.row_ids, pa.uint64())
    if isinstance(st, FlatStorage):
        typ = pa.from_numpy_dtype(st.vectors.dtype)
        f = pa.field("flat", pa.list_(typ, st.vectors.shape[1]), nullable=st.vectors.dtype == np.uint8)
        return (pa.Table.from_arrays([ids, _fsl(st.vectors, typ)], schema=pa.schema([rid, f])),
                {"dim": int(st.vectors.shape[1])}, [])
    if isinstance(st, SQStorage):
        f = pa.field("__sq_code", pa.list_(pa.uint8(), st.codes.shape[1]), nullable=True)
        info = {"dim": int(st.codes.shape[1]), "num_bits": st.num_bits, "bounds": {"start": st.start, "end": st.end}}
        return pa.Table.from_arrays([ids, _fsl(st.codes, pa.uint8())], schema=pa.schema([rid, f])), info, []
    if isinstance(st, PQStorage):
        codes = st.codes.astype(np.uint8)
        if st.nbits == 4:
            padded = np.zeros((codes.shape[0], codes.shape[1] + codes.shape[1] % 2), np.uint8)
            padded[:, :codes.shape[1]] = codes
            codes = ((padded[:, 0::2] & 0x0F) | (padded[:, 1::2] << 4)).astype(np.uint8)
        codes = _transpose(codes, seg.lengths)
        f = pa.field("__pq_code", pa.list_(pa.uint8(), codes.shape[1]), nullable=True)
        # The codebook tensor says [2**nbits, dim] but its data is sub-vector-major (§6.2).
        cb = Tensor.from_numpy(np.ascontiguousarray(st.codebook))
        cb = Tensor(cb.data_type, (st.codebook.shape[1], st.dimension), cb.data)
        info = {"codebook_position": 2, "nbits": st.nbits, "num_sub_vectors": st.num_sub_vectors,
                "dimension": st.dimension, "codebook_tensor": [], "transposed": True}
        return (pa.Table.from_arrays([ids, _fsl(codes, pa.uint8())], schema=pa.schema([rid, f])), info,
                [encode_tensor(cb)])
    stored = st.table()
    cols = [ids, *stored.columns]
    schema = pa.schema([rid, *stored.schema])
    return pa.Table.from_arrays(cols, schema=schema), dict(st.metadata), []


def write_ivf_files(out: IndexDir, seg: IvfSegment) -> tuple[IndexFile, IndexFile]:
    """Write ``seg`` as pylance 14.0.2 does; returns the manifest's file entries (aux first).

    The caller gives rows grouped by partition (``seg.lengths``) and sorted by row id inside
    each partition, cosine FLAT vectors normalized, PQ codes one row per vector. Both files are
    Lance 2.2 files whatever the dataset's storage version (§1).
    """
    if out.version != VECTOR_FILE_VERSION:
        sub = IndexDir(out.store, out.uuid, VECTOR_FILE_VERSION)
        try:
            return write_ivf_files(sub, seg)
        finally:
            out.written.extend(sub.written)
    nparts = seg.num_partitions
    if seg.lengths.size != nparts or int(seg.lengths.sum()) != seg.row_ids.size:
        raise ValueError(f"{seg.lengths.size} partition lengths summing to {int(seg.lengths.sum())} "
                         f"for {nparts} centroids and {seg.row_ids.size} rows")
    table, info, extra = _aux_table(seg)
    aux_ivf = encode_ivf(IvfModel(seg.offsets, seg.lengths.astype(np.uint32)))
    aux = out.write(AUX_FILE, table, {"distance_type": seg.metric, "lance:ivf": "1",
                                      "storage_metadata": _compact([_compact(info)])},
                    [aux_ivf, *extra])
    kind = _compact({"type": seg.index_type, "distance_type": seg.metric})
    centroids = Tensor.from_numpy(np.asarray(seg.centroids))
    if seg.hnsw is None:
        zeros = np.zeros(nparts, np.uint64)
        ivf = IvfModel(zeros, zeros.astype(np.uint32), centroids, seg.loss)
        marker = pa.schema([pa.field("__flat_marker", pa.uint64(), nullable=False)])
        meta = {"lance:index": kind, "lance:ivf": "1", "lance:flat": _compact([""] * nparts)}
        graph = marker.empty_table()
    else:
        g = seg.hnsw
        goff = np.concatenate([[0], np.cumsum(g.lengths, dtype=np.uint64)[:-1]]).astype(np.uint64)
        ivf = IvfModel(goff, g.lengths.astype(np.uint32), centroids, seg.loss)
        meta = {"lance:index": kind, "lance:ivf": "1", "lance:hnsw": _compact([_compact(p) for p in g.partitions])}
        graph = g.table
    index = out.write(INDEX_FILE, graph, meta, [encode_ivf(ivf)])
    return aux, index
