"""IVF vector kinds (``IVF_FLAT``, ``IVF_PQ``, ``IVF_SQ``, ``IVF_RQ``, ``IVF_HNSW_FLAT/PQ/SQ``): ``VectorIndexDetails``.

Every vector segment has the same details message (``/lance.index.pb.VectorIndexDetails``), so
the registry finds one of these kinds for any vector segment; what a segment *is* (storage,
sub-index, metric) comes from its decoded details, never from the kind object that found it.
The kinds differ only in what ``create_index(column, index_type)`` builds, so they are one
class instantiated per name (:data:`KINDS`). The format is in ``docs/formats/vector-indices.md``;
the algorithms in :mod:`lance_format.index.vector`.

Column types and metrics follow pylance 14.0.2 (tried on it): float vectors with ``l2``,
``cosine`` and ``dot`` for every kind; ``uint8`` vectors with ``hamming`` for ``IVF_FLAT`` and
``IVF_HNSW_FLAT`` only (pylance's PQ/SQ builders reject uint8 with a ``RuntimeError``, IVF_RQ
rejects hamming, and its IVF training rejects float + hamming and uint8 + another metric with a
``ValueError``; :class:`UnsupportedIndexTypeError` is both).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError, UnsupportedIndexTypeError
from lance_format.index import registry
from lance_format.index.codec import (
    IVF_DETAILS_TYPE_URL,
    VectorIndexDetails,
    decode_vector_details,
    encode_vector_details,
)
from lance_format.index.kind import BuildContext, Family, IndexKind, TrainingData
from lance_format.index.store import IndexDir
from lance_format.index.vector import multivector as mv
from lance_format.index.vector import rabitq
from lance_format.index.vector.defaults import MAX_ITERS, SAMPLE_RATE
from lance_format.index.vector.layout import read_segment
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap
    from lance_format.index.vector.build import VectorChunk, VectorModel

#: Metric spellings pylance accepts (case-insensitive; ``euclidean`` is ``l2``).
_METRICS = {"l2": "l2", "euclidean": "l2", "cosine": "cosine", "dot": "dot", "hamming": "hamming"}

#: ``create_index`` keyword arguments of the vector kinds, with pylance 14.0.2's defaults.
DEFAULTS: Mapping[str, Any] = {
    "metric": "L2", "num_partitions": None, "num_sub_vectors": None, "num_bits": 8,
    "sample_rate": SAMPLE_RATE, "max_iterations": MAX_ITERS, "ivf_centroids": None, "pq_codebook": None,
    "target_partition_size": None, "m": 20, "ef_construction": 150, "max_level": 7,
    "index_cache_size": None, "accelerator": None, "shuffle_partition_batches": None,
    "shuffle_partition_concurrency": None, "storage_options": None, "filter_nan": True, "train": True,
    "skip_transpose": False, "index_file_version": None, "rabitq_model": None,
}


def details_of(meta: IndexMetadata) -> VectorIndexDetails:
    """The decoded details of a vector segment."""
    return decode_vector_details(meta.index_details.value if meta.index_details is not None else b"")


def _element(typ: pa.DataType) -> str:
    inner = mv.vector_type(typ).value_type
    return "halffloat" if pa.types.is_float16(inner) else "double" if pa.types.is_float64(inner) else \
        "uint8" if pa.types.is_uint8(inner) else "float"


#: Kinds whose storage keeps the raw vectors: the only ones pylance builds on uint8 (hamming).
_HAMMING_KINDS = ("IVF_FLAT", "IVF_HNSW_FLAT")


class VectorKind(IndexKind):
    """An IVF vector kind; :data:`KINDS` makes one per name ``create_index`` builds."""

    details: ClassVar[str] = "VectorIndexDetails"
    display: ClassVar[str] = "Vector"
    family: ClassVar[Family] = "vector"
    # 14.0.2 knows vector index versions up to 2 (IVF_RQ); every other kind writes 1 (§1)
    supported_version: ClassVar[int] = 2
    buildable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    incremental: ClassVar[bool] = True
    defaults: ClassVar[Mapping[str, Any]] = DEFAULTS
    #: Encoding (assignment, PQ/SQ/RaBitQ codes) is numpy work that releases the GIL: tasks of
    #: ~50k rows let local threads and Spark executors share a build, where one 2M-row task left
    #: a core idle; 256k-row tasks still left a 100k-row IVF_RQ build (its extended-code search
    #: is most of the work) on one thread. The output does not depend on the split: rows are
    #: merged sorted.
    task_rows: ClassVar[int] = 50_000

    def __reduce__(self) -> tuple[Callable[[str], VectorKind], tuple[str]]:
        # the per-name classes are not module attributes: pickle (build tasks sent to Spark) by name
        return kind_named, (self.name,)

    @property
    def type_url(self) -> str:
        """Vector details live in package ``lance.index.pb`` (not ``lance.table``)."""
        return IVF_DETAILS_TYPE_URL

    def index_version(self, stable_row_ids: bool) -> int:
        return 2 if self.name == "IVF_RQ" else 1

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
        if d.compression == "rq":
            params.update(num_bits=d.num_bits or rabitq.DEFAULT_NUM_BITS)
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
        if self.name == "IVF_RQ" and "num_bits" not in given:
            p["num_bits"] = rabitq.DEFAULT_NUM_BITS  # pylance's RQ default; 8 is PQ's
        metric = p["metric"]
        if not isinstance(metric, str) or metric.lower() not in _METRICS:
            raise InvalidInputError(f"{self.name} index on column {column!r}: metric {metric!r} not supported "
                                    f"(l2, euclidean, cosine, dot, hamming)")
        p["metric"] = _METRICS[metric.lower()]
        if p["metric"] == "hamming" and self.name not in _HAMMING_KINDS:
            raise UnsupportedIndexTypeError(f"{self.name} index on column {column!r}: the hamming metric needs "
                                            f"uint8 vectors, which only {' and '.join(_HAMMING_KINDS)} index")
        if self.name == "IVF_RQ":
            bits = p["num_bits"]
            if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= rabitq.MAX_NUM_BITS:
                raise InvalidInputError(f"IVF_RQ index on column {column!r}: num_bits must be an int from 1 to "
                                        f"{rabitq.MAX_NUM_BITS}, got {bits!r}")
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
        typ = mv.vector_type(typ)  # a multivector column is indexed vector by vector (index/vector/multivector.py)
        if not pa.types.is_fixed_size_list(typ):
            raise UnsupportedIndexTypeError(f"Vector column {column!r} must be FixedSizeListArray, got {typ}")
        inner = typ.value_type
        if not (pa.types.is_floating(inner) or pa.types.is_uint8(inner)):
            raise UnsupportedIndexTypeError(f"Vector column {column!r} must have floating value type, got {inner}")
        if pa.types.is_uint8(inner) and self.name not in _HAMMING_KINDS:
            raise UnsupportedIndexTypeError(f"{self.name} index on column {column!r}: uint8 vectors can only be "
                                            f"indexed with the hamming metric by {' and '.join(_HAMMING_KINDS)}")

    def check_dimension(self, column: str, typ: pa.DataType, params: Mapping[str, Any]) -> None:
        """pylance's checks of the column against the parameters: ``dimension must be divisible by
        num_sub_vectors`` (PQ), by 8 (RQ); hamming if and only if the vectors are uint8.

        Raises:
            UnsupportedIndexTypeError: the metric does not fit the element type.
            InvalidInputError: the dimension does not fit the parameters; a multivector column
                with another metric than cosine.
        """
        if mv.is_multivector(typ):
            mv.check_metric(column, self.name, str(params.get("metric")))
            typ = typ.value_type
        if (params.get("metric") == "hamming") != pa.types.is_uint8(typ.value_type):
            raise UnsupportedIndexTypeError(f"{self.name} index on column {column!r}: metric "
                                            f"{params.get('metric')!r} does not apply to {typ.value_type} vectors "
                                            "(hamming needs uint8 vectors, other metrics float vectors)")
        if self.name == "IVF_RQ" and typ.list_size % 8:
            raise InvalidInputError(f"IVF_RQ index on column {column!r}: vector dimension ({typ.list_size}) must "
                                    "be divisible by 8")
        subs = params.get("num_sub_vectors")
        if subs is not None and (not isinstance(subs, int) or subs < 1 or typ.list_size % subs):
            raise InvalidInputError(f"{self.name} index on column {column!r}: dimension ({typ.list_size}) must "
                                    f"be divisible by num_sub_vectors ({subs})")

    # -- build (the work is in kinds/vector_build.py, loaded only for builds, remaps and optimize) --
    def train(self, sample: Callable[[int], TrainingData], ctx: BuildContext) -> VectorModel:
        self.check_dimension(ctx.column, ctx.field_type, ctx.params)
        model: VectorModel = registry.build_half(self.name).train(self.name, sample, ctx, _element(ctx.field_type))
        return model

    def details_value(self, ctx: BuildContext, model: Any) -> bytes:
        return encode_vector_details(model.details())

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> VectorChunk:
        chunk: VectorChunk = registry.build_half(self.name).encode(data, model, ctx)
        return chunk

    def finish_tasks(self, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> Sequence[Any]:
        """IVF_HNSW_*: the graphs are built per group of partitions on the runner."""
        tasks: Sequence[Any] = registry.build_half(self.name).finish_tasks(chunks, model)
        return tasks

    def finish(self, task: Any) -> Any:
        return registry.build_half(self.name).finish(task)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        files: tuple[IndexFile, ...] = registry.build_half(self.name).write(out, chunks, model)
        return files

    def load_model(self, src: IndexDir, meta: IndexMetadata) -> VectorModel:
        model: VectorModel = registry.build_half(self.name).load_model(src, details_of(meta))
        return model

    # -- remap, statistics ---------------------------------------------------------------------
    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        files: tuple[IndexFile, ...] = registry.build_half(self.name).remap(src, out, details_of(meta), amap)
        return files

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        d = details_of(meta)
        seg = read_segment(src, graph=False, lazy=True)  # the lengths and IVF model: no rows read
        # pylance's per-segment keys (``indices[i]`` of ``index_statistics``), centroids left out
        return {"index_type": d.index_type, "metric_type": d.metric, "num_partitions": seg.num_partitions,
                "partitions": [{"size": int(n)} for n in seg.lengths], "loss": seg.loss,
                "index_file_version": "V3"}


#: What ``create_index(column, index_type)`` builds for each vector kind name.
KINDS: Mapping[str, str] = {
    "IVF_FLAT": "raw vectors per partition",
    "IVF_PQ": "product-quantized residuals per partition",
    "IVF_SQ": "8-bit scalar-quantized vectors per partition",
    "IVF_HNSW_FLAT": "an HNSW graph over raw vectors per partition",
    "IVF_HNSW_PQ": "an HNSW graph over PQ codes per partition",
    "IVF_HNSW_SQ": "an HNSW graph over SQ codes per partition",
    "IVF_RQ": "RaBitQ codes of rotated residuals per partition",
}


def _kind(name: str, what: str) -> VectorKind:
    """The kind object of one name: a :class:`VectorKind` whose class carries the name."""
    cls = type(name.title().replace("_", ""), (VectorKind,), {"name": name, "__doc__": f"``{name}``: {what}."})
    kind: VectorKind = cls()
    return kind


#: Every vector kind (the first answers for any vector segment found by its details).
ALL: tuple[VectorKind, ...] = tuple(_kind(name, what) for name, what in KINDS.items())


def kind_named(name: str) -> VectorKind:
    """The vector kind called ``name`` (``IVF_PQ``…).

    Raises:
        UnsupportedIndexTypeError: no vector kind has that name.
    """
    for kind in ALL:
        if kind.name == name:
            return kind
    raise UnsupportedIndexTypeError(f"unknown vector index type {name!r}")
