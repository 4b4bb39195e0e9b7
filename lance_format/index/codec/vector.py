"""``VectorIndexDetails``, ``IVF`` and ``Tensor`` (package ``lance.index.pb``) as pylance 14.0.2 writes them.

Field numbers are the wire's (``docs/formats/vector-indices.md`` §2.1 and §4); names follow
``rust/lance/src/index/vector/details.rs`` and ``protos/index.proto``. Decoding keeps the
order of the ``runtime_hints`` entries, so ``encode(decode(b)) == b`` for every message
pylance wrote; a new segment should pass its hints in a fixed order (pylance's order comes
from a hash map and changes between builds).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.index.codec.wire import (
    FIXED64,
    LEN,
    VARINT,
    double_field,
    fields,
    len_field,
    packed_field,
    packed_varints,
    varint_field,
)

IVF_DETAILS_TYPE_URL = "/lance.index.pb.VectorIndexDetails"

Metric = Literal["l2", "cosine", "dot", "hamming"]
Compression = Literal["flat", "pq", "sq", "rq"]
#: ``VectorMetricType`` enum values.
METRICS: tuple[Metric, ...] = ("l2", "cosine", "dot", "hamming")
#: Details field number of each ``compression`` oneof member (field 7 was never seen).
_COMPRESSION_FIELD: dict[Compression, int] = {"pq": 4, "sq": 5, "rq": 6, "flat": 8}
_FIELD_COMPRESSION = {v: k for k, v in _COMPRESSION_FIELD.items()}

#: ``Tensor.DataType`` values and their numpy types (BFLOAT16 = 0 has none).
TENSOR_DTYPES: dict[int, np.dtype[np.generic]] = {
    1: np.dtype("<f2"), 2: np.dtype("<f4"), 3: np.dtype("<f8"), 4: np.dtype("u1"),
    5: np.dtype("<u2"), 6: np.dtype("<u4"), 7: np.dtype("<u8"),
}
_DTYPE_CODES = {v: k for k, v in TENSOR_DTYPES.items()}


@dataclass(frozen=True)
class HnswConfig:
    """``hnsw_index_config`` (details field 3): the HNSW build parameters."""

    max_connections: int = 20
    construction_ef: int = 150
    max_level: int = 7


@dataclass(frozen=True)
class VectorIndexDetails:
    """The details message of a vector segment.

    Attributes:
        metric: ``l2``, ``cosine``, ``dot`` or ``hamming``.
        target_partition_size: Set only when the caller passed one (0 otherwise).
        hnsw: The HNSW parameters for ``IVF_HNSW_*`` kinds.
        compression: Which storage the segment has (``None``: the message had none).
        num_bits: PQ/SQ/RQ bits per code.
        num_sub_vectors: PQ sub-vectors.
        rotation_type: RQ rotation enum (0, "fast", is the only one seen).
        runtime_hints: The build parameters pylance records, in wire order.
    """

    metric: Metric = "l2"
    target_partition_size: int = 0
    hnsw: HnswConfig | None = None
    compression: Compression | None = None
    num_bits: int = 0
    num_sub_vectors: int = 0
    rotation_type: int = 0
    runtime_hints: tuple[tuple[str, str], ...] = ()

    @property
    def index_type(self) -> str:
        """pylance's ``index_type`` for these details (``IVF_PQ``, ``IVF_HNSW_SQ``…)."""
        storage = {"flat": "FLAT", "pq": "PQ", "sq": "SQ", "rq": "RQ", None: "FLAT"}[self.compression]
        return f"IVF_HNSW_{storage}" if self.hnsw is not None else f"IVF_{storage}"

    @property
    def hints(self) -> dict[str, str]:
        """``runtime_hints`` as a dict."""
        return dict(self.runtime_hints)


def _where(what: str) -> str:
    return f"vector index details ({what})"


def decode_vector_details(data: bytes) -> VectorIndexDetails:
    """Decode the ``index_details.value`` bytes of a vector segment.

    Raises:
        CorruptFileError: malformed bytes or an unknown metric.
    """
    where = _where("lance.index.pb.VectorIndexDetails")
    metric: Metric = "l2"
    target = rotation = bits = subs = 0
    hnsw: HnswConfig | None = None
    compression: Compression | None = None
    hints: list[tuple[str, str]] = []
    for num, wt, value in fields(data, where):
        if num == 1 and wt == VARINT:
            assert isinstance(value, int)
            if value >= len(METRICS):
                raise CorruptFileError(f"{where}: unknown metric type {value}")
            metric = METRICS[value]
        elif num == 2 and wt == VARINT:
            assert isinstance(value, int)
            target = value
        elif num == 3 and wt == LEN:
            assert isinstance(value, bytes)
            vals = {n: v for n, w, v in fields(value, where) if w == VARINT}
            hnsw = HnswConfig(int(vals.get(1, 0)), int(vals.get(2, 0)), int(vals.get(3, 0)))
        elif num in _FIELD_COMPRESSION and wt == LEN:
            assert isinstance(value, bytes)
            compression = _FIELD_COMPRESSION[num]
            vals = {n: v for n, w, v in fields(value, where) if w == VARINT}
            bits = int(vals.get(1, 0))
            if compression == "pq":
                subs = int(vals.get(2, 0))
            elif compression == "rq":
                rotation = int(vals.get(2, 0))
        elif num == 9 and wt == LEN:
            assert isinstance(value, bytes)
            k = v = ""
            for n, w, item in fields(value, where):
                if w == LEN and isinstance(item, bytes):
                    if n == 1:
                        k = item.decode()
                    elif n == 2:
                        v = item.decode()
            hints.append((k, v))
        # other fields: newer than 14.0.2; ignored as protobuf readers do
    return VectorIndexDetails(metric, target, hnsw, compression, bits, subs, rotation, tuple(hints))


def encode_vector_details(d: VectorIndexDetails) -> bytes:
    """Serialize ``d`` in pylance's field order (1, 2, 3, compression, hints; defaults omitted)."""
    out = bytearray()
    if d.metric != "l2":
        out += varint_field(1, METRICS.index(d.metric))
    if d.target_partition_size:
        out += varint_field(2, d.target_partition_size)
    if d.hnsw is not None:
        h = d.hnsw
        body = b"".join(varint_field(n, v) for n, v in ((1, h.max_connections), (2, h.construction_ef),
                                                         (3, h.max_level)) if v)
        out += len_field(3, body)
    if d.compression is not None:
        body = b""
        if d.compression in ("pq", "sq", "rq") and d.num_bits:
            body += varint_field(1, d.num_bits)
        if d.compression == "pq" and d.num_sub_vectors:
            body += varint_field(2, d.num_sub_vectors)
        if d.compression == "rq" and d.rotation_type:
            body += varint_field(2, d.rotation_type)
        out += len_field(_COMPRESSION_FIELD[d.compression], body)
    for k, v in d.runtime_hints:
        entry = (len_field(1, k.encode()) if k else b"") + (len_field(2, v.encode()) if v else b"")
        out += len_field(9, entry)
    return bytes(out)


# -- Tensor and IVF ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tensor:
    """A ``lance.index.pb.Tensor``: a typed, shaped little-endian buffer."""

    data_type: int
    shape: tuple[int, ...]
    data: bytes

    def to_numpy(self) -> npt.NDArray[np.generic]:
        """The values shaped as ``shape``.

        Raises:
            NotSupportedError: bfloat16 tensors.
            CorruptFileError: the data does not fill the shape.
        """
        dtype = TENSOR_DTYPES.get(self.data_type)
        if dtype is None:
            raise NotSupportedError(f"index tensors of data type {self.data_type} (bfloat16) are not supported")
        n = int(np.prod(self.shape)) if self.shape else 0
        if len(self.data) != n * dtype.itemsize:
            raise CorruptFileError(f"index tensor of shape {list(self.shape)} holds {len(self.data)} bytes, "
                                   f"expected {n * dtype.itemsize}")
        return np.frombuffer(self.data, dtype=dtype).reshape(self.shape)

    @classmethod
    def from_numpy(cls, arr: npt.NDArray[np.generic]) -> Tensor:
        """A tensor of ``arr`` (row-major, little-endian).

        Raises:
            NotSupportedError: a dtype the Tensor message has no code for.
        """
        code = _DTYPE_CODES.get(arr.dtype.newbyteorder("<"))
        if code is None:
            raise NotSupportedError(f"index tensors of dtype {arr.dtype} are not supported")
        data = np.ascontiguousarray(arr, dtype=TENSOR_DTYPES[code]).tobytes()
        return cls(code, tuple(int(s) for s in arr.shape), data)


def decode_tensor(data: bytes, where: str = "index tensor") -> Tensor:
    """Decode a ``Tensor`` message.

    Raises:
        CorruptFileError: malformed bytes.
    """
    dt, shape, body = 0, [], b""
    for num, wt, value in fields(data, where):
        if num == 1 and wt == VARINT:
            assert isinstance(value, int)
            dt = value
        elif num == 2 and wt == LEN:
            assert isinstance(value, bytes)
            shape += packed_varints(value, where)
        elif num == 2 and wt == VARINT:
            assert isinstance(value, int)
            shape.append(value)
        elif num == 3 and wt == LEN:
            assert isinstance(value, bytes)
            body = value
    return Tensor(dt, tuple(shape), body)


def encode_tensor(t: Tensor) -> bytes:
    """Serialize a ``Tensor`` (data type omitted when 0, as proto3 does)."""
    out = varint_field(1, t.data_type) if t.data_type else b""
    if t.shape:
        out += packed_field(2, list(t.shape))
    if t.data:
        out += len_field(3, t.data)
    return out


@dataclass(frozen=True)
class IvfModel:
    """A ``lance.index.pb.IVF`` message.

    Attributes:
        offsets: First row of each partition in the file holding this message.
        lengths: Rows of each partition in that file.
        centroids: ``[num_partitions, dim]`` centroids (``index.idx`` and merged aux files only).
        loss: The k-means loss, when recorded.
    """

    offsets: npt.NDArray[np.uint64]
    lengths: npt.NDArray[np.uint32]
    centroids: Tensor | None = None
    loss: float | None = None
    #: Deprecated float centroids (field 1); never written by 14.0.2, read for old files.
    legacy_centroids: tuple[float, ...] = field(default=())

    @property
    def num_partitions(self) -> int:
        """Partitions the message describes."""
        if self.centroids is not None and self.centroids.shape:
            return int(self.centroids.shape[0])
        return int(self.lengths.size)

    def centroid_array(self) -> npt.NDArray[np.generic] | None:
        """The centroids as a ``[num_partitions, dim]`` array (``None`` when absent)."""
        if self.centroids is not None:
            return self.centroids.to_numpy()
        if self.legacy_centroids and self.lengths.size:
            arr = np.asarray(self.legacy_centroids, dtype=np.float32)
            return arr.reshape(self.lengths.size, -1)
        return None


def decode_ivf(data: bytes, where: str = "IVF model") -> IvfModel:
    """Decode an ``IVF`` message (packed or unpacked repeated fields).

    Raises:
        CorruptFileError: malformed bytes.
    """
    offsets: list[int] = []
    lengths: list[int] = []
    legacy: list[float] = []
    centroids: Tensor | None = None
    loss: float | None = None
    for num, wt, value in fields(data, where):
        if num == 1:
            if isinstance(value, bytes):
                legacy += list(struct.unpack(f"<{len(value) // 4}f", value[:len(value) // 4 * 4]))
            else:
                legacy.append(struct.unpack("<f", value.to_bytes(4, "little"))[0])
        elif num in (2, 3):
            vals = packed_varints(value, where) if isinstance(value, bytes) else [value]
            (offsets if num == 2 else lengths).extend(vals)
        elif num == 4 and wt == LEN:
            assert isinstance(value, bytes)
            centroids = decode_tensor(value, where)
        elif num == 5 and wt == FIXED64:
            assert isinstance(value, int)
            loss = struct.unpack("<d", value.to_bytes(8, "little"))[0]
    return IvfModel(np.asarray(offsets, dtype=np.uint64), np.asarray(lengths, dtype=np.uint32),
                    centroids, loss, tuple(legacy))


def encode_ivf(ivf: IvfModel) -> bytes:
    """Serialize an ``IVF`` message as pylance does: packed offsets and lengths always present."""
    out = packed_field(2, ivf.offsets.tolist()) + packed_field(3, ivf.lengths.tolist())
    if ivf.centroids is not None:
        out += len_field(4, encode_tensor(ivf.centroids))
    if ivf.loss is not None:
        out += double_field(5, ivf.loss)
    return out
