"""Writes whose data files are written by an engine's workers (Spark executors), committed once here.

The workers write uncommitted fragments (:meth:`SparkHandler.write_fragments`); this module checks
everything that can be refused before they start, and makes the single commit with the Dagster
lineage properties: ``Append`` / ``Overwrite`` for whole-table writes, and for a partition
replacement one ``Update`` that deletes the partition's old rows (deletion vectors) and adds the new
fragments, as :func:`lance_format.evolution.replace.replace_where` does for local data.

An upsert (``mode="merge"``) works the same way: the workers write the source rows (only the matched
or unmatched ones for update-only / insert-only merges) and send back every source key; the driver
commits one ``Update`` deleting the target rows the source replaces (and, with
``when_not_matched_by_source_delete``, those of the partition it lacks) and adding the new
fragments. With ``schema_mode="merge"`` the table gains the new columns (and safe type promotions)
before the workers write, and the workers fill the columns a DataFrame lacks with nulls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset import LanceDataset
from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution.replace import replace_with_fragments
from lance_format.fragment import FragmentMetadata
from lance_format.spark.options import WriteOptions as SparkWriteOptions
from lance_format.spark.writer import WritePlan, commit_fragments, plan_write
from lance_format.write import DEFAULT_MAX_ROWS_PER_FILE

from .config import LanceSettings, MergeOptions, SchemaMode, WriteMode
from .lineage import COMMIT_MESSAGE
from .merge_keys import MergeSpec, key_expression, key_values, non_null
from .partitions import PartitionSlice
from .reader import open_dataset
from .writer import WriteResult, _describe, _evolve, plan_target


class DistributedHandler(Protocol):
    """What a frame handler whose workers write the data files provides (see ``SparkHandler``)."""

    def arrow_schema(self, obj: Any) -> pa.Schema:
        """Arrow schema of the batches the workers write."""

    def rows_outside(self, obj: Any, expr: pc.Expression) -> int:
        """Rows that do not satisfy ``expr`` (computed by the workers)."""

    def write_fragments(self, obj: Any, plan: Any) -> list[FragmentMetadata]:
        """Write ``obj`` as uncommitted fragments according to a ``lance_format.spark.writer.WritePlan``."""

    def write_merge(self, obj: Any, plan: Any, merge: Any) -> tuple[list[FragmentMetadata], pa.Array | None]:
        """Write the rows of an upsert and return every source key (see ``SparkHandler.write_merge``)."""


def commit_distributed(
    settings: LanceSettings,
    uri: str,
    handler: DistributedHandler,
    obj: Any,
    *,
    mode: WriteMode,
    properties: Mapping[str, str],
    commit_message: str | None = None,
    schema_mode: SchemaMode = "strict",
    partition: PartitionSlice | None = None,
    where: str | None = None,
    merge: MergeOptions | None = None,
    writer: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Have the workers write ``obj`` and commit the result as exactly one Lance version.

    Supports every write mode (``merge`` upserts on the keys) and schema mode; schema changes
    allowed by ``schema_mode="merge"`` are their own commits before the data's, as for local data.

    Raises:
        InvalidInputError: rows outside the partition.
        SchemaError: a schema change the schema mode refuses, bad merge keys, or duplicate source keys.
        DatasetAlreadyExistsError: ``mode="error"`` and the target already has rows.
    """
    schema = handler.arrow_schema(obj)
    target = plan_target(settings, uri, schema, mode=mode, schema_mode=schema_mode, partition=partition,
                         merge=merge, where=where)
    if isinstance(target, WriteResult):
        return target  # mode="ignore" over rows that exist
    where, expr, existing, before, keys, planned = (target.where, target.expr, target.existing, target.before,
                                                    target.keys, target.plan)
    merge = merge or MergeOptions()
    if expr is not None:
        outside = handler.rows_outside(obj, expr)
        if outside:
            raise InvalidInputError(f"{where}: {outside} rows are outside the partition being written ({expr})")
    if existing is not None and planned.evolves:
        existing = _evolve(existing, planned, properties)
    whole_overwrite = existing is None or (mode not in ("append", "merge") and expr is None)
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    writer = writer or {}
    options = SparkWriteOptions(uri, "overwrite" if whole_overwrite else "append",
                                data_storage_version=writer.get("data_storage_version", settings.data_storage_version),
                                max_rows_per_file=writer.get("max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE),
                                enable_stable_row_ids=bool(writer.get("enable_stable_row_ids", False)),
                                transaction_properties=props, storage_options=settings.options or {})
    plan = plan_write(options, schema)
    if mode == "merge" and existing is not None:
        return _upsert(handler, obj, plan, existing, uri, keys, merge, expr, props, before, where)
    fragments = handler.write_fragments(obj, plan)
    if existing is None or expr is None or mode == "append":
        return _committed(settings, uri, plan, fragments, mode, before, expr)
    # One Update: deletion vectors for the partition's old rows plus the executors' fragments (the
    # commit half of replace_where; it deletes the fragments' files if the commit fails).
    replaced = replace_with_fragments(existing, expr, fragments, conflict_retries=5, transaction_properties=props)
    return _describe(replaced.dataset, uri, mode, before, rows_deleted=replaced.rows_deleted, predicate=str(expr))


def _committed(settings: LanceSettings, uri: str, plan: WritePlan, fragments: list[FragmentMetadata],
               mode: WriteMode, before: Any, expr: pc.Expression | None) -> WriteResult:
    manifest = commit_fragments(plan, fragments)  # deletes the files if the commit fails
    ds = open_dataset(settings, uri, int(manifest.version))
    return _describe(ds, uri, mode, before, predicate=None if expr is None else str(expr))


def _upsert(handler: DistributedHandler, obj: Any, plan: WritePlan, existing: LanceDataset, uri: str,
            keys: tuple[str, ...], merge: MergeOptions, scope: pc.Expression | None, props: Mapping[str, str],
            before: Any, where: str) -> WriteResult:
    """Workers write the rows to insert or update; one commit deletes what they replace (and, with
    ``when_not_matched_by_source_delete``, the scope's rows the source lacks) and adds them."""
    if not (merge.when_matched_update or merge.when_not_matched_insert or merge.when_not_matched_by_source_delete):
        raise InvalidInputError(f"{where}: mode 'merge' with every when_* clause off writes nothing")
    target: pa.Array | None = None
    if merge.when_matched_update != merge.when_not_matched_insert:
        # Update-only keeps the source rows whose key the table has, insert-only the others.
        target = non_null(key_values(existing.to_table(columns=list(keys)), keys))
    elif not merge.when_matched_update:  # delete-by-source only: no source row is written
        target = pa.array([], pa.string())
    spec = MergeSpec(keys, target, keep_matched=merge.when_matched_update)
    fragments, source = handler.write_merge(obj, plan, spec)
    assert source is not None
    counts = pc.value_counts(non_null(source))
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):
        raise SchemaError(f"{where}: mode 'merge' found key(s) {list(keys)} more than once in the data, e.g. "
                          f"{repeated.field('values')[:3].to_pylist()}; each target row may be matched once")
    key = key_expression(keys)
    found = non_null(source)
    if len(keys) == 1:
        found = found.cast(existing.schema.field(keys[0]).type)
    parts = []
    if merge.when_matched_update:
        parts.append(key.isin(found))
    if merge.when_not_matched_by_source_delete:
        absent = ~key.isin(found)
        parts.append(absent if scope is None else scope & absent)
    if not parts:  # insert-only: the new rows are an append
        return _committed_append(plan, fragments, existing, uri, before, scope)
    deletion = parts[0] if len(parts) == 1 else parts[0] | parts[1]
    replaced = replace_with_fragments(existing, deletion, fragments, conflict_retries=5,
                                      transaction_properties=dict(props))
    return _describe(replaced.dataset, uri, "merge", before, rows_deleted=replaced.rows_deleted,
                     predicate=None if scope is None else str(scope))


def _committed_append(plan: WritePlan, fragments: list[FragmentMetadata], existing: LanceDataset, uri: str,
                      before: Any, scope: pc.Expression | None) -> WriteResult:
    manifest = commit_fragments(plan, fragments)
    ds = existing.checkout_version(int(manifest.version))
    return _describe(ds, uri, "merge", before, rows_deleted=0, predicate=None if scope is None else str(scope))
