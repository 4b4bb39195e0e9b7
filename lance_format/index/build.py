"""Building a scalar index: plan (driver) → execute (per group of fragments) → commit.

Tasks are picklable values and :func:`execute_index_task` is a module-level function, so
any :class:`~lance_format.maintenance.runner.Runner` can fan them out. Training data is
what pylance's ``scan_training_data`` reads (``rust/lance/src/index/scalar.rs``): the
column with ``_rowid`` (row address, or stable row id), deleted rows left out.
The commit writes the index files under ``_indices/{uuid}/`` and commits one
``CreateIndex``; if the commit fails, the files are deleted again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import IndexExistsError, InvalidInputError, UnsupportedIndexTypeError
from lance_format.index import bitmap, btree
from lance_format.index._compat import manifest_indices, to_operation
from lance_format.index.models import TYPE_URLS, ScalarIndexType, index_version_for, new_index_metadata
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner

#: Rows one build task reads (tasks cover whole fragments).
TASK_ROWS = 2_000_000


def check_indexable(index_type: str, column: str, typ: pa.DataType) -> None:
    """Raise if ``index_type`` cannot index a column of type ``typ``."""
    if index_type not in TYPE_URLS:
        raise UnsupportedIndexTypeError(
            f"index type {index_type!r} on column {column!r} is not supported (supported: {sorted(TYPE_URLS)})")
    t = pa.types
    if index_type == "LABEL_LIST":
        if not (t.is_list(typ) or t.is_large_list(typ)):
            raise UnsupportedIndexTypeError(
                f"a LABEL_LIST index needs a list column; column {column!r} is of type {typ}")
        typ = typ.value_type
    elif t.is_list(typ) or t.is_large_list(typ):
        raise UnsupportedIndexTypeError(
            f"a {index_type} index cannot be built on list column {column!r} ({typ}); use LABEL_LIST")
    ok = (t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_string(typ)
          or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ) or t.is_date(typ)
          or t.is_timestamp(typ) or t.is_time(typ) or t.is_decimal(typ))
    if not ok:
        raise UnsupportedIndexTypeError(
            f"a {index_type} index cannot be built on column {column!r} of type {typ}")


@dataclass(frozen=True)
class IndexBuildTask:
    """Read one group of fragments' training data."""

    dataset: Any  # LanceDataset (pickles as uri + version)
    column: str
    fragment_ids: tuple[int, ...]
    index_type: str = "BTREE"


@dataclass(frozen=True)
class IndexChunk:
    """Training data of one task: values and their ids, in scan order."""

    values: pa.Array
    ids: npt.NDArray[np.uint64]


@dataclass(frozen=True)
class IndexBuildPlan:
    """Everything the commit needs; ``tasks`` go to the runner."""

    dataset: Any
    column: str
    field_id: int
    index_type: ScalarIndexType
    name: str
    replaced: tuple[IndexMetadata, ...]
    fragment_ids: frozenset[int]
    tasks: tuple[IndexBuildTask, ...]


def plan_index_build(ds: LanceDataset, column: str, index_type: str, *, name: str | None = None,
                     replace: bool = True, fragment_ids: Sequence[int] | None = None) -> IndexBuildPlan:
    """Validate the request and split the fragments into tasks.

    Raises:
        InvalidInputError: unknown column.
        UnsupportedIndexTypeError: unknown index type or unsupported column type.
        IndexExistsError: ``name`` exists and ``replace`` is false.
    """
    kind = str(index_type).upper()
    if column not in ds.schema.names:
        raise InvalidInputError(f"{ds.uri}: cannot index column {column!r}: no such column "
                                f"(columns: {ds.schema.names})")
    check_indexable(kind, column, ds.schema.field(column).type)
    name = name or f"{column}_idx"
    existing = [m for m in manifest_indices(ds.manifest) if m.name == name]
    if existing and not replace:
        raise IndexExistsError(f"{ds.uri}: an index named {name!r} already exists (pass replace=True)")
    frags = [f for f in ds.manifest.fragments if fragment_ids is None or f.id in set(fragment_ids)]
    tasks: list[IndexBuildTask] = []
    group: list[int] = []
    rows = 0
    for f in frags:
        group.append(f.id)
        rows += f.physical_rows
        if rows >= TASK_ROWS:
            tasks.append(IndexBuildTask(ds, column, tuple(group), kind))
            group, rows = [], 0
    if group:
        tasks.append(IndexBuildTask(ds, column, tuple(group), kind))
    return IndexBuildPlan(ds, column, ds.lance_schema.field(column).id, kind,  # type: ignore[arg-type]
                          name, tuple(existing), frozenset(f.id for f in frags), tuple(tasks))


def execute_index_task(task: IndexBuildTask) -> IndexChunk:
    """Read the column and ``_rowid`` of the task's fragments (runs anywhere)."""
    ds = task.dataset
    frags = [ds.get_fragment(i) for i in task.fragment_ids]
    # A BTREE on a stable-row-id dataset is version 1 and holds row addresses (as pylance's).
    by_address = task.index_type == "BTREE" and ds.has_stable_row_ids
    col = "_rowaddr" if by_address else "_rowid"
    table = ds.scanner([task.column], fragments=frags, with_row_id=not by_address, with_row_address=by_address,
                       batch_size=1 << 17).to_table()
    ids = table.column(col).to_numpy().astype(np.uint64, copy=False)
    return IndexChunk(table.column(task.column).combine_chunks(), ids)


def write_index_files(out: IndexDir, index_type: str, values: pa.Array, ids: npt.NDArray[np.uint64]
                      ) -> tuple[IndexFile, ...]:
    """Write the files of a BTREE, BITMAP or LABEL_LIST segment from unsorted training data."""
    if index_type == "BTREE":
        sv, sids = btree.sort_training_data(values, ids)
        return btree.write_btree(out, sv, sids)
    if index_type == "LABEL_LIST":
        return bitmap.write_label_list(out, *bitmap.label_list_rows(values, ids))
    keys, rows = bitmap.group_rows(values, ids)
    return bitmap.write_bitmap(out, keys, rows)


def commit_files(plan: IndexBuildPlan, chunks: Sequence[IndexChunk]) -> tuple[IndexMetadata, IndexDir]:
    """Write the segment's files from the tasks' results; returns its metadata and directory."""
    ds = plan.dataset
    typ = ds.schema.field(plan.column).type
    values = pa.concat_arrays([c.values for c in chunks]) if chunks else pa.array([], typ)
    ids = np.concatenate([c.ids for c in chunks]) if chunks else np.empty(0, np.uint64)
    meta = new_index_metadata(name=plan.name, field_id=plan.field_id, dataset_version=ds.version,
                              fragment_ids=plan.fragment_ids, type_url=TYPE_URLS[plan.index_type], files=(),
                              index_version=index_version_for(plan.index_type, ds.has_stable_row_ids))
    out = IndexDir(ds._store, meta.uuid, ds.data_storage_version)
    try:
        files = write_index_files(out, plan.index_type, values.cast(typ), ids)
    except BaseException:
        out.discard()
        raise
    return dataclasses.replace(meta, files=files), out


def commit_index_build(plan: IndexBuildPlan, chunks: Sequence[IndexChunk]) -> LanceDataset:
    """Write the index files and commit one ``CreateIndex`` (files removed if it fails)."""
    from lance_format.dataset import LanceDataset
    from lance_format.table.transaction import LanceOperation

    meta, out = commit_files(plan, chunks)
    try:
        op = LanceOperation.CreateIndex([to_operation(meta)], [to_operation(m) for m in plan.replaced])
        return LanceDataset.commit(plan.dataset, op, read_version=plan.dataset.version)
    except BaseException:
        out.discard()
        raise


def create_scalar_index(ds: LanceDataset, column: str, index_type: str, *, name: str | None = None,
                        replace: bool = True, runner: Runner | None = None) -> LanceDataset:
    """Plan, execute (on ``runner``, local threads by default) and commit a scalar index."""
    from lance_format.maintenance.runner import LocalRunner

    plan = plan_index_build(ds, column, index_type, name=name, replace=replace)
    chunks = (runner or LocalRunner()).map(execute_index_task, list(plan.tasks))
    return commit_index_build(plan, chunks)


def drop_index(ds: LanceDataset, name: str) -> LanceDataset:
    """Commit a ``CreateIndex`` removing every segment named ``name``.

    Raises:
        IndexNotFoundError: no such index.
    """
    from lance_format.dataset import LanceDataset
    from lance_format.errors import IndexNotFoundError
    from lance_format.table.transaction import LanceOperation

    segments = [m for m in manifest_indices(ds.manifest) if m.name == name]
    if not segments:
        raise IndexNotFoundError(f"{ds.uri}: version {ds.version} has no index named {name!r}")
    op = LanceOperation.CreateIndex([], [to_operation(m) for m in segments])
    return LanceDataset.commit(ds, op, read_version=ds.version)
