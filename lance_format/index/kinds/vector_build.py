"""The build half of the IVF vector kinds: training, encoding, writing and remapping segments.

:mod:`lance_format.index.kinds.vector` is what the registry loads for any vector segment, a
query's included; it describes segments and checks ``create_index`` parameters, and hands the
work below to this module. Only a build, a remap or ``optimize_indices`` reaches it (through
:func:`lance_format.index.registry.build_half`), so a process that only searches never imports
k-means, the HNSW builder or the quantizers' training (~15 ms of a first query's import).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lance_format.index.codec import VectorIndexDetails
from lance_format.index.kind import BuildContext, TrainingData
from lance_format.index.store import IndexDir
from lance_format.index.vector import build as vb
from lance_format.index.vector import multivector as mv
from lance_format.table.index_metadata import IndexFile

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


def train(name: str, sample: Callable[[int], TrainingData], ctx: BuildContext, element: str) -> vb.VectorModel:
    """The kind ``name``'s model trained on the driver from ``sample`` (parameters already checked;
    ``element``: the column's element type name, ``float``, ``halffloat``...)."""
    total = sum(ctx.fragment_rows.values())
    if mv.is_multivector(ctx.field_type):
        inner = sample
        sample = lambda n: mv.sample_vectors(inner, n)  # noqa: E731  (whole rows, n vectors)
    return vb.train_model(name, sample, ctx.params, element, total)


def encode(data: TrainingData, model: Any, ctx: BuildContext) -> vb.VectorChunk:
    """One task's rows assigned and encoded (a multivector column vector by vector)."""
    return vb.encode_rows(mv.flatten(data) if mv.is_multivector(ctx.field_type) else data, model)


def finish_tasks(chunks: Sequence[Any], model: Any) -> Sequence[Any]:
    """IVF_HNSW_*: the groups of partitions whose graphs the runner builds."""
    assert isinstance(model, vb.VectorModel)
    return vb.graph_tasks(list(chunks), model)


def finish(task: Any) -> Any:
    """One group's HNSW graphs."""
    return vb.build_partition_graphs(task)


def write(out: IndexDir, chunks: Sequence[Any], model: Any) -> tuple[IndexFile, ...]:
    """The segment's files from the tasks' chunks."""
    return vb.write_model_segment(out, list(chunks), model)


def load_model(src: IndexDir, details: VectorIndexDetails) -> vb.VectorModel:
    """A segment's centroids and quantizer (delta segments reuse them)."""
    return vb.load_model(src, details)


def remap(src: IndexDir, out: IndexDir, details: VectorIndexDetails, amap: RowAddressMap) -> tuple[IndexFile, ...]:
    """The segment rewritten with its row addresses translated (compaction)."""
    return vb.remap_segment(src, out, details, amap.translate)
