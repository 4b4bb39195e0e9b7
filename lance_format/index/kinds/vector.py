"""IVF vector kinds (``IVF_FLAT``, ``IVF_PQ``, ``IVF_SQ``, ``IVF_HNSW_FLAT/PQ/SQ``): ``VectorIndexDetails``.

Every vector segment has the same details message (``/lance.index.pb.VectorIndexDetails``), so
the registry finds one of these kinds for any vector segment; what a segment *is* (storage,
sub-index, metric) comes from its decoded details, never from the kind object that found it.
The kinds differ only in what ``create_index(column, index_type)`` builds. The format is in
``docs/formats/vector-indices.md``; the algorithms in :mod:`lance_format.index.vector`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError, UnsupportedIndexTypeError
from lance_format.index.codec import (
    IVF_DETAILS_TYPE_URL,
    VectorIndexDetails,
    decode_vector_details,
    encode_vector_details,
)
from lance_format.index.kind import BuildContext, Family, IndexKind, TrainingData
from lance_format.index.store import IndexDir
from lance_format.index.vector import build as vb
from lance_format.index.vector.kmeans import MAX_ITERS, SAMPLE_RATE
from lance_format.index.vector.layout import read_segment
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap

#: Metric spellings pylance accepts (case-insensitive; ``euclidean`` is ``l2``).
_METRICS = {"l2": "l2", "euclidean": "l2", "cosine": "cosine", "dot": "dot", "hamming": "hamming"}

#: ``create_index`` keyword arguments of the vector kinds, with pylance 14.0.2's defaults.
DEFAULTS: Mapping[str, Any] = {
    "metric": "L2", "num_partitions": None, "num_sub_vectors": None, "num_bits": 8,
    "sample_rate": SAMPLE_RATE, "max_iterations": MAX_ITERS, "ivf_centroids": None, "pq_codebook": None,
    "target_partition_size": None, "m": 20, "ef_construction": 150, "max_level": 7,
    "index_cache_size": None, "accelerator": None, "shuffle_partition_batches": None,
    "shuffle_partition_concurrency": None, "storage_options": None, "filter_nan": True, "train": True,
    "skip_transpose": False, "index_file_version": None,
}


def details_of(meta: IndexMetadata) -> VectorIndexDetails:
    """The decoded details of a vector segment."""
    return decode_vector_details(meta.index_details.value if meta.index_details is not None else b"")


def _element(typ: pa.DataType) -> str:
    inner = typ.value_type
    return "halffloat" if pa.types.is_float16(inner) else "double" if pa.types.is_float64(inner) else \
        "uint8" if pa.types.is_uint8(inner) else "float"


class VectorKind(IndexKind):
    """An IVF vector kind; subclasses name what ``create_index`` builds."""

    details: ClassVar[str] = "VectorIndexDetails"
    display: ClassVar[str] = "Vector"
    family: ClassVar[Family] = "vector"
    # 14.0.2 knows vector index versions up to 2 (IVF_RQ); every other kind writes 1 (§1)
    supported_version: ClassVar[int] = 2
    buildable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    incremental: ClassVar[bool] = True
    defaults: ClassVar[Mapping[str, Any]] = DEFAULTS

    @property
    def type_url(self) -> str:
        """Vector details live in package ``lance.index.pb`` (not ``lance.table``)."""
        return IVF_DETAILS_TYPE_URL

    def index_version(self, stable_row_ids: bool) -> int:
        return 1

    def stores_addresses(self, meta: IndexMetadata, stable_row_ids: bool) -> bool:
        # ``_rowid`` holds stable row ids on such datasets: compaction keeps the segment (§9.1)
        return not stable_row_ids

    def display_name(self, meta: IndexMetadata) -> str:
        """pylance's ``list_indices()`` type of a segment (``IVF_PQ``, ``IVF_HNSW_SQ``…)."""
        return details_of(meta).index_type

    def rebuild_request(self, src: IndexDir, meta: IndexMetadata) -> tuple[str, dict[str, Any]]:
        """The segment's kind and quantizer parameters; ``num_partitions`` comes from the default
        target size again, as pylance's ``retrain`` does (§10)."""
        d = details_of(meta)
        params: dict[str, Any] = {"metric": d.metric}
        if d.compression == "pq":
            params.update(num_sub_vectors=d.num_sub_vectors, num_bits=d.num_bits or 8)
        if d.hnsw is not None:
            params.update(m=d.hnsw.max_connections, ef_construction=d.hnsw.construction_ef,
                          max_level=d.hnsw.max_level)
        if d.target_partition_size:
            params["target_partition_size"] = d.target_partition_size
        return d.index_type, params

    def params(self, column: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """pylance's checks (``_create_index_impl``, ``lance/dataset.py``), defaults filled in.

        Raises:
            InvalidInputError: unknown parameter, unsupported metric, missing ``num_sub_vectors``.
        """
        p = super().params(column, given)
        metric = p["metric"]
        if not isinstance(metric, str) or metric.lower() not in _METRICS:
            raise InvalidInputError(f"{self.name} index on column {column!r}: metric {metric!r} not supported "
                                    f"(l2, euclidean, cosine, dot, hamming)")
        p["metric"] = _METRICS[metric.lower()]
        if p["metric"] == "hamming":
            raise NotSupportedError(f"{self.name} index on column {column!r}: the hamming metric is not "
                                    "supported by this implementation")
        if p["accelerator"] is not None:
            raise NotSupportedError(f"{self.name} index on column {column!r}: GPU accelerators are not supported")
        if p["index_cache_size"] is not None:
            warnings.warn("The 'index_cache_size' parameter of create_index is ignored (as in pylance).",
                          DeprecationWarning, stacklevel=4)
        parts = p["num_partitions"]
        if isinstance(parts, float):
            p["num_partitions"] = int(parts)
        elif parts is not None and (not isinstance(parts, int) or isinstance(parts, bool) or parts < 1):
            raise InvalidInputError(f"{self.name} index on column {column!r}: num_partitions must be a "
                                    f"positive int, got {parts!r}")
        if self.name.endswith("PQ") and p["num_sub_vectors"] is None:
            raise InvalidInputError(f"{self.name} index on column {column!r}: num_partitions and "
                                    f"num_sub_vectors are required for {self.name}")
        if p["pq_codebook"] is not None and p["ivf_centroids"] is None:
            raise InvalidInputError(f"{self.name} index on column {column!r}: ivf_centroids must be "
                                    "specified when pq_codebook is provided")
        for key in ("sample_rate", "max_iterations", "m", "ef_construction", "max_level"):
            if not isinstance(p[key], int) or p[key] < 1:
                raise InvalidInputError(f"{self.name} index on column {column!r}: {key} must be a positive "
                                        f"int, got {p[key]!r}")
        return p

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if not pa.types.is_fixed_size_list(typ):
            raise UnsupportedIndexTypeError(f"Vector column {column!r} must be FixedSizeListArray, got {typ}")
        inner = typ.value_type
        if not (pa.types.is_floating(inner) or pa.types.is_uint8(inner)):
            raise UnsupportedIndexTypeError(f"Vector column {column!r} must have floating value type, got {inner}")
        if pa.types.is_uint8(inner):
            raise NotSupportedError(f"{self.name} index on column {column!r}: uint8 vectors (hamming) are "
                                    "not supported by this implementation")

    def check_dimension(self, column: str, typ: pa.DataType, params: Mapping[str, Any]) -> None:
        """pylance's ``dimension must be divisible by num_sub_vectors`` check."""
        subs = params.get("num_sub_vectors")
        if subs is not None and (not isinstance(subs, int) or subs < 1 or typ.list_size % subs):
            raise InvalidInputError(f"{self.name} index on column {column!r}: dimension ({typ.list_size}) must "
                                    f"be divisible by num_sub_vectors ({subs})")

    # -- build --------------------------------------------------------------------------------
    def train(self, sample: Callable[[int], TrainingData], ctx: BuildContext) -> vb.VectorModel:
        self.check_dimension(ctx.column, ctx.field_type, ctx.params)
        total = sum(ctx.fragment_rows.values())
        return vb.train_model(self.name, sample, ctx.params, _element(ctx.field_type), total)

    def details_value(self, ctx: BuildContext, model: Any) -> bytes:
        assert isinstance(model, vb.VectorModel)
        return encode_vector_details(model.details())

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> vb.VectorChunk:
        return vb.encode_rows(data, model)

    def finish_tasks(self, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> Sequence[Any]:
        """IVF_HNSW_*: the graphs are built per group of partitions on the runner."""
        assert isinstance(model, vb.VectorModel)
        return vb.graph_tasks(list(chunks), model)

    def finish(self, task: Any) -> Any:
        return vb.build_partition_graphs(task)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        return vb.write_model_segment(out, list(chunks), model)

    def load_model(self, src: IndexDir, meta: IndexMetadata) -> vb.VectorModel:
        return vb.load_model(src, details_of(meta))

    # -- remap, statistics ---------------------------------------------------------------------
    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        return vb.remap_segment(src, out, details_of(meta), amap.translate)

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        d = details_of(meta)
        seg = read_segment(src)
        # pylance's per-segment keys (``indices[i]`` of ``index_statistics``), centroids left out
        return {"index_type": d.index_type, "metric_type": d.metric, "num_partitions": seg.num_partitions,
                "partitions": [{"size": int(n)} for n in seg.lengths], "loss": seg.loss,
                "index_file_version": "V3"}


class IvfFlat(VectorKind):
    """``IVF_FLAT``: raw vectors per partition."""

    name: ClassVar[str] = "IVF_FLAT"


class IvfPq(VectorKind):
    """``IVF_PQ``: product-quantized residuals per partition."""

    name: ClassVar[str] = "IVF_PQ"


class IvfSq(VectorKind):
    """``IVF_SQ``: 8-bit scalar-quantized vectors per partition."""

    name: ClassVar[str] = "IVF_SQ"


class IvfHnswFlat(VectorKind):
    """``IVF_HNSW_FLAT``: an HNSW graph over raw vectors per partition."""

    name: ClassVar[str] = "IVF_HNSW_FLAT"


class IvfHnswPq(VectorKind):
    """``IVF_HNSW_PQ``: an HNSW graph over PQ codes per partition."""

    name: ClassVar[str] = "IVF_HNSW_PQ"


class IvfHnswSq(VectorKind):
    """``IVF_HNSW_SQ``: an HNSW graph over SQ codes per partition."""

    name: ClassVar[str] = "IVF_HNSW_SQ"


#: Every vector kind (the first answers for any vector segment found by its details).
ALL: tuple[VectorKind, ...] = (IvfFlat(), IvfPq(), IvfSq(), IvfHnswFlat(), IvfHnswPq(), IvfHnswSq())
