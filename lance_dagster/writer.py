"""The single write path: one Arrow stream in, exactly one Lance commit out.

The IO manager and the resource both write through :func:`commit_arrow`, so write modes, schema
modes, partition replacement and lineage properties live in one place. Everything that can be
refused (mode, schema, partition column, merge keys) is checked before the first data file is
written. A Spark path that writes fragments itself commits them through :func:`commit_fragments`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import pyarrow as pa
import pyarrow.compute as pc

import lance_format
from lance_format.dataset import LanceDataset
from lance_format.errors import (
    DatasetAlreadyExistsError,
    DatasetNotFoundError,
    InvalidInputError,
    SchemaError,
)
from lance_format.evolution.merge_insert import primary_key
from lance_format.evolution.replace import replace_where, replace_with_fragments
from lance_format.fragment import write_fragments
from lance_format.scanner import apply_filter

from .config import LanceSettings, MergeOptions, SchemaMode, WriteMode
from .lineage import COMMIT_MESSAGE, CommitInfo, read_commit
from .partitions import PartitionSlice
from .reader import open_dataset
from .schema_modes import SchemaPlan, align_to_schema, plan_schema

ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader
#: Writer options that cut data files (the others apply to a new dataset only).
FILE_OPTIONS = ("max_rows_per_file", "max_rows_per_group", "max_bytes_per_file")

__all__ = ["ArrowData", "WriteResult", "align_to_schema", "commit_arrow", "commit_fragments"]


@dataclass(frozen=True)
class WriteResult:
    """Outcome of one write.

    Attributes:
        uri: dataset URI.
        mode: the write mode that was asked for.
        dataset: the dataset opened at the version the write produced (or found, when skipped).
        commit: what that version's transaction records.
        previous_version: version before the write (``None`` if the dataset did not exist).
        previous_rows: row count before the write (0 if the dataset did not exist).
        rows_deleted: rows a partition replacement or merge removed (``None`` when not applicable).
        predicate: the partition filter the write replaced (``None`` for a whole-table write).
        skipped: ``mode="ignore"`` found existing rows and committed nothing.
    """

    uri: str
    mode: WriteMode
    dataset: LanceDataset
    commit: CommitInfo
    previous_version: int | None
    previous_rows: int = 0
    rows_deleted: int | None = None
    predicate: str | None = None
    skipped: bool = False

    @property
    def version(self) -> int:
        """The version this write created (the existing version when skipped)."""
        return int(self.dataset.version)


def _try_open(settings: LanceSettings, uri: str) -> LanceDataset | None:
    try:
        return open_dataset(settings, uri)
    except DatasetNotFoundError:
        return None


def open_target(settings: LanceSettings, uri: str, mode: WriteMode, expr: pc.Expression | None,
                partition: PartitionSlice | None, where: str
                ) -> tuple[LanceDataset | None, _Before, WriteResult | None]:
    """The dataset a write goes to (``None`` if it does not exist yet), its state before the write,
    and, for ``mode="ignore"`` over rows that exist, the result of skipping the write.

    Raises:
        DatasetAlreadyExistsError: ``mode="error"`` and the target (the partition, if any) has rows.
    """
    existing = _try_open(settings, uri)
    before = _Before.of(existing)
    if existing is not None and mode in ("error", "ignore"):
        target = existing.count_rows(filter=expr) if expr is not None else existing.count_rows()
        if target and mode == "error":
            slice_text = f" partition {list(partition.keys)}" if partition is not None else ""
            raise DatasetAlreadyExistsError(f"{where}: mode 'error' and{slice_text} of {uri} already has "
                                            f"{target} rows (version {existing.version})")
        if target:
            return existing, before, _describe(existing, uri, mode, before, skipped=True)
    return existing, before, None


@dataclass(frozen=True)
class WriteTarget:
    """What a write goes to, planned once for local and distributed writes alike.

    Attributes:
        where: what is written, for error messages.
        expr: the partition's filter (``None``: the whole table).
        existing: the dataset (``None`` if it does not exist yet).
        before: its state before the write.
        keys: the merge keys (``mode="merge"``), else empty.
        plan: the schema change the schema mode allows.
    """

    where: str
    expr: pc.Expression | None
    existing: LanceDataset | None
    before: _Before
    keys: tuple[str, ...]
    plan: SchemaPlan


def plan_target(settings: LanceSettings, uri: str, schema: pa.Schema, *, mode: WriteMode, schema_mode: SchemaMode,
                partition: PartitionSlice | None, merge: MergeOptions | None, where: str | None
                ) -> WriteTarget | WriteResult:
    """Open the target and plan the write's partition filter, merge keys and schema change.

    Returns:
        The target, or the result of skipping the write (``mode="ignore"`` over existing rows).

    Raises:
        DatasetAlreadyExistsError: ``mode="error"`` and the target has rows.
        SchemaError: bad merge keys or a schema change the schema mode refuses.
    """
    where = where or uri
    expr = partition.expression(schema, where=where) if partition is not None else None
    existing, before, skipped = open_target(settings, uri, mode, expr, partition, where)
    if skipped is not None:
        return skipped
    keys = _merge_keys(existing, schema, merge or MergeOptions(), where) if mode == "merge" else ()
    plan = plan_schema(existing, schema, schema_mode=schema_mode, mode=mode, where=where,
                       partitioned=partition is not None)
    return WriteTarget(where, expr, existing, before, tuple(keys), plan)


def checked_batches(batches: Iterator[pa.RecordBatch], expr: pc.Expression, *,
                    where: str) -> Iterator[pa.RecordBatch]:
    """Pass ``batches`` through, failing on the first batch with a row outside ``expr``.

    A row outside its partition would survive the next replacement of that partition and be
    doubled, so it is refused; a row whose partition column is null counts as outside.

    Raises:
        InvalidInputError: naming how many rows fall outside the partition filter.
    """
    for batch in batches:
        inside = apply_filter(batch, expr).num_rows
        if inside != batch.num_rows:
            raise InvalidInputError(f"{where}: {batch.num_rows - inside} of {batch.num_rows} rows are outside "
                                    f"the partition being written ({expr})")
        yield batch


def _checked(data: ArrowData, expr: pc.Expression, where: str) -> ArrowData:
    if isinstance(data, pa.Table):
        for _ in checked_batches(iter(data.to_batches()), expr, where=where):
            pass
        return data
    return pa.RecordBatchReader.from_batches(data.schema, checked_batches(iter(data), expr, where=where))


def commit_arrow(
    settings: LanceSettings,
    uri: str,
    data: ArrowData,
    *,
    mode: WriteMode,
    properties: Mapping[str, str],
    commit_message: str | None = None,
    schema_mode: SchemaMode = "strict",
    partition: PartitionSlice | None = None,
    merge: MergeOptions | None = None,
    where: str | None = None,
    writer: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Write ``data`` to the dataset at ``uri`` as exactly one Lance commit.

    Every mode creates the dataset when it does not exist yet. With ``partition`` the write is
    confined to the partition's rows: ``overwrite`` replaces exactly them (one ``Update`` commit),
    ``append`` adds rows to it, ``error`` / ``ignore`` look only at it. The data must lie inside the
    partition. Retries on commit conflicts happen inside ``lance_format`` only.

    Args:
        settings: storage settings (storage options, data storage version).
        uri: dataset URI.
        data: the rows to write, as an Arrow table or a stream of batches.
        mode: see :data:`lance_dagster.config.WriteMode`.
        properties: transaction properties (Dagster lineage) stored with the commit.
        commit_message: optional human-readable message stored with the commit.
        schema_mode: see :data:`lance_dagster.config.SchemaMode`.
        partition: the partition slice written (``None``: the whole table).
        merge: upsert options for ``mode="merge"``.
        where: what is written, for error messages (default: the URI).
        writer: writer options (:mod:`lance_dagster.commit_options`) for the new data files of a
            whole-table write or a partition replacement (a merge writes with the defaults).

    Raises:
        InvalidInputError: bad partition data or options.
        SchemaError: a schema change the schema mode does not allow, or a missing partition column.
        DatasetAlreadyExistsError: ``mode="error"`` and the target already has rows.
    """
    target = plan_target(settings, uri, data.schema, mode=mode, schema_mode=schema_mode, partition=partition,
                         merge=merge, where=where)
    if isinstance(target, WriteResult):
        return target  # mode="ignore" over rows that exist
    where, expr, existing, before, keys, plan = (target.where, target.expr, target.existing, target.before,
                                                 target.keys, target.plan)
    if plan.evolves and isinstance(data, pa.RecordBatchReader):
        data = data.read_all()  # check every row before the schema commits, not after them
    if expr is not None:
        data = _checked(data, expr, where)
    if existing is not None and plan.cast_to is not None:
        # A table is converted here, so a value that does not fit fails before any commit.
        data = align_to_schema(data, plan.cast_to, where=where)
    if plan.evolves:
        assert existing is not None
        existing = _evolve(existing, plan, properties)
    files = {k: v for k, v in (writer or {}).items() if k in FILE_OPTIONS}
    if mode == "merge" and existing is not None:
        return _merge(existing, uri, data, keys, merge or MergeOptions(), expr, properties, commit_message,
                      before, files)
    if expr is not None and existing is not None and mode != "append":
        if files:
            return _replace_with_options(existing, uri, data, expr, files, properties, commit_message, before, mode)
        # the rows were checked against ``expr`` above (with the partition wording): not again
        replaced = replace_where(existing, expr, data, transaction_properties=properties,
                                 commit_message=commit_message, check_data=False)
        return _describe(replaced.dataset, uri, mode, before, rows_deleted=replaced.rows_deleted,
                         predicate=str(expr))
    # Left here: a new table, an append (to the table or into a partition), or a whole-table write.
    lance_mode = "create" if existing is None else "append" if mode == "append" else "overwrite"
    if lance_mode == "create" and (writer or {}).get("enable_stable_row_ids") is not None:
        files["enable_stable_row_ids"] = bool((writer or {})["enable_stable_row_ids"])
    ds = lance_format.write_dataset(
        data,
        uri,
        mode=cast(Any, lance_mode),
        storage_options=settings.options,
        data_storage_version=cast(Any, (writer or {}).get("data_storage_version", settings.data_storage_version)),
        commit_message=commit_message,
        transaction_properties=dict(properties),
        **files,
    )
    return _describe(ds, uri, mode, before, predicate=None if expr is None else str(expr))


@dataclass(frozen=True)
class _Before:
    version: int | None
    rows: int

    @classmethod
    def of(cls, ds: LanceDataset | None) -> _Before:
        return cls(None, 0) if ds is None else cls(int(ds.version), int(ds.count_rows()))


def _evolve(ds: LanceDataset, plan: SchemaPlan, properties: Mapping[str, str]) -> LanceDataset:
    """Widen the promoted columns, then add the new columns and struct fields (all null).

    Each is one commit carrying the run's lineage, so none is mistaken for an outside commit.
    Widening rewrites only the promoted columns (pylance's ``alter_columns``); added columns are
    schema-only (old rows read them as null).
    """
    if plan.promotions:
        ds.alter_columns(*[{"path": name, "data_type": typ} for name, typ in plan.promotions],
                         transaction_properties=dict(properties))
    if plan.new_columns:
        ds.add_columns(pa.schema(list(plan.new_columns)), transaction_properties=dict(properties))
    return ds.checkout_latest()


def _replace_with_options(ds: LanceDataset, uri: str, data: ArrowData, expr: pc.Expression,
                          files: Mapping[str, Any], properties: Mapping[str, str], commit_message: str | None,
                          before: _Before, mode: WriteMode) -> WriteResult:
    """A partition replacement whose new files are cut by ``files`` (writer options): the files are
    written first, then one ``Update`` deletes the partition's old rows and adds them."""
    frags = write_fragments(data, ds, mode="append", **files)
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    replaced = replace_with_fragments(ds, expr, frags, transaction_properties=props)
    return _describe(replaced.dataset, uri, mode, before, rows_deleted=replaced.rows_deleted, predicate=str(expr))


def _merge_keys(existing: LanceDataset | None, data: pa.Schema, options: MergeOptions,
                where: str) -> tuple[str, ...]:
    keys = options.on
    if keys is None and existing is not None:
        keys = tuple(primary_key(existing))
    if not keys:
        if existing is None:
            return ()  # the first merge creates the table; there is nothing to match yet
        raise SchemaError(f"{where}: mode 'merge' needs metadata 'merge_on' (key columns) because the table "
                          "has no unenforced primary key")
    schemas = [("data", data)] + ([("table", existing.schema)] if existing is not None else [])
    for name, schema in schemas:
        missing = [k for k in keys if k not in schema.names]
        if missing:
            raise SchemaError(f"{where}: merge_on column(s) {missing} are not in the {name}'s columns "
                              f"{schema.names}")
    return keys


def _merge(ds: LanceDataset, uri: str, data: ArrowData, keys: Sequence[str], options: MergeOptions,
           expr: pc.Expression | None, properties: Mapping[str, str], commit_message: str | None,
           before: _Before, files: Mapping[str, int] | None = None) -> WriteResult:
    builder = ds.merge_insert(list(keys))
    if options.when_matched_update:
        builder = builder.when_matched_update_all()
    if options.when_not_matched_insert:
        builder = builder.when_not_matched_insert_all()
    if options.when_not_matched_by_source_delete:
        # Confined to the partition being written: rows of other partitions are not "absent".
        builder = builder.when_not_matched_by_source_delete(expr)
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    # writer options cut the merge's new files too (pylance's merge_insert has no such knob)
    stats = builder.execute(data, transaction_properties=props, file_limits=files or None)
    removed = int(stats.get("num_deleted_rows", 0)) + int(stats.get("num_updated_rows", 0))
    return _describe(ds, uri, "merge", before, rows_deleted=removed, predicate=None if expr is None else str(expr))


def commit_fragments(
    settings: LanceSettings,
    uri: str,
    fragments: Sequence[lance_format.FragmentMetadata],
    *,
    mode: WriteMode,
    schema: pa.Schema,
    properties: Mapping[str, str],
    read_version: int | None = None,
    commit_message: str | None = None,
) -> WriteResult:
    """Commit fragments whose data files were written elsewhere as exactly one Lance commit.

    For engines that write files in parallel (``lance_format.write_fragments`` on Spark executors):
    the driver gathers the ``FragmentMetadata`` and commits them here with the same lineage
    properties and metadata as :func:`commit_arrow`.

    Args:
        settings: storage settings.
        uri: dataset URI.
        fragments: ``lance_format.FragmentMetadata`` of the new data files.
        mode: ``"append"`` adds the fragments; ``"overwrite"`` makes them the whole table.
        schema: Arrow schema of the fragments (the table schema after an overwrite).
        properties: transaction properties (Dagster lineage).
        read_version: version the fragments were written against (default: the latest).
        commit_message: optional message stored with the commit.
    """
    existing = _try_open(settings, uri)
    before = _Before.of(existing)
    if read_version is None:
        read_version = int(existing.version) if existing is not None else 0
    op: lance_format.LanceOperation.BaseOperation
    if mode == "append" and existing is not None:
        op = lance_format.LanceOperation.Append(list(fragments))
    else:
        op = lance_format.LanceOperation.Overwrite(schema, list(fragments))
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    txn = lance_format.Transaction(read_version, op, transaction_properties=props)
    ds = lance_format.LanceDataset.commit(uri, txn, storage_options=settings.options)
    return _describe(ds, uri, mode, before)


def _describe(ds: LanceDataset, uri: str, mode: WriteMode, before: _Before, *,
              rows_deleted: int | None = None, predicate: str | None = None,
              skipped: bool = False) -> WriteResult:
    return WriteResult(
        uri=uri,
        mode=mode,
        dataset=ds,
        commit=read_commit(ds, int(ds.version)),
        previous_version=before.version,
        previous_rows=before.rows,
        rows_deleted=rows_deleted,
        predicate=predicate,
        skipped=skipped,
    )
