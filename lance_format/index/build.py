"""Building an index of any kind: plan (driver) → execute (per group of fragments) → commit.

The kind (:mod:`lance_format.index.registry`) supplies the parts that differ: a model trained
on the driver from a sample (centroids, codebooks; none for BTREE), a per-task encoding, and
the files. Tasks are picklable values and :func:`execute_index_task` is a module-level
function, so any :class:`~lance_format.maintenance.runner.Runner` can fan them out (local
threads, Spark executors). Training data is what pylance's ``scan_training_data`` reads
(``rust/lance/src/index/scalar.rs``): the column with ``_rowid`` (row address, or stable row
id), deleted rows left out. The commit writes the files under ``_indices/{uuid}/`` and commits
one ``CreateIndex`` through the table layer's commit loop; if the commit fails, the files are
deleted again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.errors import IndexExistsError, IndexNotFoundError, InvalidInputError
from lance_format.index import registry, zones
from lance_format.index._compat import manifest_indices
from lance_format.index.kind import BuildContext, IndexKind, TrainingData
from lance_format.index.models import new_index_metadata
from lance_format.index.store import IndexDir
from lance_format.maintenance.runner import LocalRunner, Runner
from lance_format.table.commit import commit_transaction
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.manifest import Manifest
from lance_format.table.transaction import LanceOperation, Transaction

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

#: Rows one build task reads (tasks cover whole fragments); a kind may ask for less.
TASK_ROWS = 2_000_000
#: Seed of the training sample, so two builds of the same data train the same model.
SAMPLE_SEED = 42


def check_indexable(index_type: str, column: str, typ: pa.DataType) -> None:
    """Raise if ``index_type`` cannot index a column of type ``typ``.

    Raises:
        UnsupportedIndexTypeError: unknown index type or unsupported column type.
    """
    registry.by_type(index_type).check_column(column, typ)


@dataclass(frozen=True)
class IndexBuildTask:
    """Read and encode one group of fragments."""

    dataset: Any  # LanceDataset (pickles as uri + version)
    fragment_ids: tuple[int, ...]
    kind: IndexKind
    context: BuildContext
    model: Any = None


@dataclass(frozen=True)
class IndexBuildPlan:
    """Everything the commit needs; ``tasks`` go to the runner."""

    dataset: Any
    column: str
    field_id: int
    kind: IndexKind
    context: BuildContext
    name: str
    replaced: tuple[IndexMetadata, ...]
    fragment_ids: frozenset[int]
    tasks: tuple[IndexBuildTask, ...]
    model: Any = None

    @property
    def index_type(self) -> str:
        """The kind's ``index_type`` name (``"BTREE"``…)."""
        return self.kind.name


@dataclass(frozen=True)
class IndexChange:
    """Segments one ``CreateIndex`` adds and removes, and the directories written for it."""

    new: tuple[IndexMetadata, ...] = ()
    removed: tuple[IndexMetadata, ...] = ()
    dirs: tuple[IndexDir, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.new or self.removed)

    def __add__(self, other: IndexChange) -> IndexChange:
        return IndexChange(self.new + other.new, self.removed + other.removed, self.dirs + other.dirs)

    def operation(self) -> LanceOperation.CreateIndex:
        """The ``CreateIndex`` operation of this change."""
        return LanceOperation.CreateIndex(list(self.new), list(self.removed))

    def discard(self) -> None:
        """Delete the files written for the change (its commit failed or was abandoned)."""
        for out in self.dirs:
            out.discard()


def _column_of(ds: LanceDataset, field_id: int) -> str | None:
    return next((f.name for f in ds.lance_schema.fields if f.id == field_id), None)


def _sample(ds: LanceDataset, column: str, frag_ids: Sequence[int], n: int, by_address: bool) -> TrainingData:
    """Up to ``n`` live rows of ``frag_ids`` drawn at random (all of them when fewer).

    Only the drawn rows are read: ``n`` distinct positions among the fragments' live rows
    (seeded by :data:`SAMPLE_SEED`, so every build of the same version trains the same model,
    whichever runner encodes), sorted, mapped to dataset-wide live positions and read with the
    dataset's ``take`` (one read per fragment). The encode tasks read the whole column once
    more; a scan here too would read it twice.
    """
    col = "_rowaddr" if by_address else "_rowid"
    wanted = set(frag_ids)
    frags = ds.manifest.fragments
    live = np.array([f.num_rows for f in frags], np.int64)
    starts = np.cumsum(live) - live  # dataset-wide live position of each fragment's first row
    mine = np.array([f.id in wanted for f in frags], bool)
    counts, firsts = live[mine], starts[mine]
    total = int(counts.sum())
    if total <= n:  # every row is in the sample: one scan
        table = ds.scanner([column], fragments=[ds.get_fragment(f.id) for f in frags if f.id in wanted],
                           with_row_id=not by_address, with_row_address=by_address,
                           batch_size=1 << 17).to_table()
    else:
        pick = np.sort(np.random.default_rng(SAMPLE_SEED).choice(total, n, replace=False))
        ends = np.cumsum(counts)
        which = np.searchsorted(ends, pick, side="right")
        positions = pick - (ends - counts)[which] + firsts[which]
        table = ds.take(positions, columns=[column, col])
    return TrainingData(table.column(column).combine_chunks(),
                        table.column(col).to_numpy().astype(np.uint64, copy=False))


def plan_index_build(ds: LanceDataset, column: str, index_type: str, *, name: str | None = None,
                     replace: bool = True, fragment_ids: Sequence[int] | None = None,
                     params: Mapping[str, Any] | None = None, model: Any = None) -> IndexBuildPlan:
    """Validate the request, train the kind's model (if it has one) and split the fragments into tasks.

    Args:
        ds: The dataset version to index.
        column: The column.
        index_type: Any ``index_type`` the registry builds.
        name: Index name (default ``"{column}_idx"``).
        replace: Replace segments of an index of the same name.
        fragment_ids: Only these fragments (a delta segment, or one worker's share).
        params: The kind's create-time parameters.
        model: A model to reuse instead of training one (delta segments of incremental kinds).

    Raises:
        InvalidInputError: unknown column or parameter.
        UnsupportedIndexTypeError: unknown index type or unsupported column type.
        IndexExistsError: ``name`` exists and ``replace`` is false.
    """
    kind = registry.by_type(index_type)
    if column not in ds.schema.names:
        raise InvalidInputError(f"{ds.uri}: cannot index column {column!r}: no such column "
                                f"(columns: {ds.schema.names})")
    typ = ds.schema.field(column).type
    kind.check_column(column, typ)
    checked = kind.params(column, dict(params or {}))
    name = name or f"{column}_idx"
    existing = [m for m in manifest_indices(ds.manifest) if m.name == name]
    if existing and not replace:
        raise IndexExistsError(f"{ds.uri}: an index named {name!r} already exists (pass replace=True)")
    wanted = None if fragment_ids is None else set(fragment_ids)
    frags = [f for f in ds.manifest.fragments if wanted is None or f.id in wanted]
    ctx = BuildContext(column, typ, checked, ds.has_stable_row_ids, {f.id: f.physical_rows for f in frags})
    by_address = kind.reads_addresses(ds.has_stable_row_ids)
    if model is None:
        model = kind.train(lambda n: _sample(ds, column, [f.id for f in frags], n, by_address), ctx)
    tasks: list[IndexBuildTask] = []
    group: list[int] = []
    rows = 0
    limit = TASK_ROWS if kind.task_rows is None else min(kind.task_rows, TASK_ROWS)
    for f in frags:
        group.append(f.id)
        rows += f.physical_rows
        if rows >= limit:
            tasks.append(IndexBuildTask(ds, tuple(group), kind, ctx, model))
            group, rows = [], 0
    if group:
        tasks.append(IndexBuildTask(ds, tuple(group), kind, ctx, model))
    return IndexBuildPlan(ds, column, ds.lance_schema.field(column).id, kind, ctx, name, tuple(existing),
                          frozenset(f.id for f in frags), tuple(tasks), model)


def execute_index_task(task: IndexBuildTask) -> Any:
    """Read the column and row ids of the task's fragments and encode them (runs anywhere)."""
    ds = task.dataset
    frags = [ds.get_fragment(i) for i in task.fragment_ids]
    by_address = task.kind.reads_addresses(task.context.stable_row_ids)
    col = "_rowaddr" if by_address else "_rowid"
    if task.kind.streams and by_address:
        # address-keyed kinds (ZONEMAP, BLOOMFILTER) read each data file whole, no scanner batches
        direct = zones.file_columns(ds._ctx, [f.metadata for f in frags if f is not None], task.context.column)
        if direct is not None:
            return task.kind.encode_batches(direct, task.model, task.context)
    scanner = ds.scanner([task.context.column], fragments=frags, with_row_id=not by_address,
                         with_row_address=by_address, batch_size=1 << 17)
    if task.kind.streams:
        batches = ((b.column(task.context.column), b.column(col).to_numpy().astype(np.uint64, copy=False))
                   for b in scanner.to_batches())
        return task.kind.encode_batches(batches, task.model, task.context)
    table = scanner.to_table()
    data = TrainingData(table.column(task.context.column).combine_chunks(),
                        table.column(col).to_numpy().astype(np.uint64, copy=False))
    return task.kind.encode(data, task.model, task.context)


def execute_finish_task(item: tuple[IndexKind, Any]) -> Any:
    """Run one of a kind's :meth:`~IndexKind.finish_tasks` items (runs anywhere)."""
    return item[0].finish(item[1])


def write_segment(plan: IndexBuildPlan, chunks: Sequence[Any]) -> tuple[IndexMetadata, IndexDir]:
    """Write the segment's files from the tasks' results; returns its metadata and directory."""
    ds, kind = plan.dataset, plan.kind
    meta = new_index_metadata(name=plan.name, field_id=plan.field_id, dataset_version=ds.version,
                              fragment_ids=plan.fragment_ids, type_url=kind.type_url, files=(),
                              index_version=kind.index_version(ds.has_stable_row_ids),
                              details_value=kind.details_value(plan.context, plan.model))
    out = IndexDir(ds._store, meta.uuid, ds.data_storage_version)
    try:
        files = kind.write(out, chunks, plan.model, plan.context)
    except BaseException:
        out.discard()
        raise
    return dataclasses.replace(meta, files=files), out


def build_change(plan: IndexBuildPlan, runner: Runner | None = None) -> IndexChange:
    """Run the plan's tasks and write its segment: the ``CreateIndex`` change, not yet committed."""
    run = runner or LocalRunner()
    chunks = run.map(execute_index_task, list(plan.tasks))
    finish = [(plan.kind, t) for t in plan.kind.finish_tasks(chunks, plan.model, plan.context)]
    if finish:  # a second pass over regrouped rows (HNSW graphs per partition), on the runner too
        chunks = run.map(execute_finish_task, finish)
    meta, out = write_segment(plan, chunks)
    return IndexChange((meta,), plan.replaced, (out,))


def commit_index_build(plan: IndexBuildPlan, chunks: Sequence[Any],
                       transaction_properties: Mapping[str, str] | None = None) -> Manifest:
    """Write the segment from the tasks' results (gathered from any runner) and commit it."""
    meta, out = write_segment(plan, chunks)
    return commit_change(plan.dataset, IndexChange((meta,), plan.replaced, (out,)), transaction_properties)


def commit_change(ds: LanceDataset, change: IndexChange,
                  transaction_properties: Mapping[str, str] | None = None) -> Manifest:
    """Commit ``change`` as one ``CreateIndex`` on ``ds``'s version; its files go if the commit fails."""
    txn = Transaction(ds.version, change.operation(), transaction_properties=dict(transaction_properties or {}))
    try:
        return commit_transaction(ds._store, txn, base=ds.manifest)
    except BaseException:
        change.discard()
        raise


def create_index(ds: LanceDataset, column: str, index_type: str, *, name: str | None = None,
                 replace: bool = True, runner: Runner | None = None,
                 params: Mapping[str, Any] | None = None) -> Manifest:
    """Plan, execute (on ``runner``, local threads by default) and commit an index of any buildable kind."""
    plan = plan_index_build(ds, column, index_type, name=name, replace=replace, params=params)
    return commit_change(ds, build_change(plan, runner))


def drop_index(ds: LanceDataset, name: str) -> Manifest:
    """Commit a ``CreateIndex`` removing every segment named ``name``.

    Raises:
        IndexNotFoundError: no such index.
    """
    segments = tuple(m for m in manifest_indices(ds.manifest) if m.name == name)
    if not segments:
        raise IndexNotFoundError(f"{ds.uri}: version {ds.version} has no index named {name!r}")
    return commit_change(ds, IndexChange(removed=segments))
