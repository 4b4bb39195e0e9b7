"""Writes whose data files are written by an engine's workers (Spark executors), committed once here.

The workers write uncommitted fragments (:meth:`SparkHandler.write_fragments`); this module checks
everything that can be refused before they start, and makes the single commit with the Dagster
lineage properties: ``Append`` / ``Overwrite`` for whole-table writes, and for a partition
replacement one ``Update`` that deletes the partition's old rows (deletion vectors) and adds the new
fragments, as :func:`lance_format.evolution.replace.replace_where` does for local data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetAlreadyExistsError, DatasetNotFoundError, InvalidInputError
from lance_format.evolution import rowops
from lance_format.fragment import FragmentMetadata, matching_offsets
from lance_format.spark.options import WriteOptions as SparkWriteOptions
from lance_format.spark.writer import commit_fragments, delete_files, plan_write

from .config import LanceSettings, SchemaMode, WriteMode
from .lineage import COMMIT_MESSAGE
from .partitions import PartitionSlice
from .reader import open_dataset
from .schema_modes import plan_schema
from .writer import WriteResult, _Before, _describe


class DistributedHandler(Protocol):
    """What a frame handler whose workers write the data files provides (see ``SparkHandler``)."""

    def arrow_schema(self, obj: Any) -> pa.Schema:
        """Arrow schema of the batches the workers write."""

    def rows_outside(self, obj: Any, expr: pc.Expression) -> int:
        """Rows that do not satisfy ``expr`` (computed by the workers)."""

    def write_fragments(self, obj: Any, plan: Any) -> list[FragmentMetadata]:
        """Write ``obj`` as uncommitted fragments according to a ``lance_format.spark.writer.WritePlan``."""


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
) -> WriteResult:
    """Have the workers write ``obj`` and commit the result as exactly one Lance version.

    Supports the modes ``overwrite`` (of the table, or of the partition), ``append``, ``error`` and
    ``ignore``, and the schema modes ``strict`` and ``overwrite``.

    Raises:
        InvalidInputError: ``mode="merge"``, ``schema_mode="merge"``, or rows outside the partition.
        SchemaError: a schema change under ``strict``.
        DatasetAlreadyExistsError: ``mode="error"`` and the target already has rows.
    """
    where = where or uri
    if mode == "merge" or schema_mode == "merge":
        raise InvalidInputError(f"{where}: mode 'merge' and schema_mode 'merge' are not supported for "
                                "DataFrames written by Spark executors; convert to Arrow or use overwrite/append")
    try:
        existing: LanceDataset | None = open_dataset(settings, uri)
    except DatasetNotFoundError:
        existing = None
    before = _Before.of(existing)
    schema = handler.arrow_schema(obj)
    expr = partition.expression(schema, where=where) if partition is not None else None
    if existing is not None and mode in ("error", "ignore"):
        target = existing.count_rows(filter=expr) if expr is not None else existing.count_rows()
        if target and mode == "error":
            raise DatasetAlreadyExistsError(f"{where}: mode 'error' and {uri} already has {target} rows in the "
                                            f"target (version {existing.version})")
        if target:
            return _describe(existing, uri, mode, before, skipped=True)
    plan_schema(existing, schema, schema_mode=schema_mode, mode=mode, where=where,
                partitioned=partition is not None)
    if expr is not None:
        outside = handler.rows_outside(obj, expr)
        if outside:
            raise InvalidInputError(f"{where}: {outside} rows are outside the partition being written ({expr})")
    whole_overwrite = existing is None or (mode != "append" and expr is None)
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    options = SparkWriteOptions(uri, "overwrite" if whole_overwrite else "append",
                                data_storage_version=settings.data_storage_version,
                                transaction_properties=props, storage_options=dict(settings.storage_options))
    plan = plan_write(options, schema)
    fragments = handler.write_fragments(obj, plan)
    if existing is None or expr is None or mode == "append":
        manifest = commit_fragments(plan, fragments)  # deletes the files if the commit fails
        ds = open_dataset(settings, uri, int(manifest.version))
        return _describe(ds, uri, mode, before, predicate=None if expr is None else str(expr))
    try:
        replaced = _replace_with(existing, expr, fragments, props)
    except BaseException:
        delete_files(options, fragments)
        raise
    return _describe(replaced, uri, mode, before, rows_deleted=before.rows + sum(f.physical_rows for f in fragments)
                     - replaced.count_rows(), predicate=str(expr))


def _replace_with(ds: LanceDataset, expr: pc.Expression, fragments: Sequence[FragmentMetadata],
                  props: dict[str, str]) -> LanceDataset:
    # One Update: deletion vectors for the partition's old rows plus the executors' fragments. The
    # data files belong to every attempt, so only the deletion files are an attempt's to discard.
    def attempt(current: LanceDataset) -> Any:
        parts = [(np.uint64(fid) << np.uint64(32)) | offs.astype(np.uint64) for fid, offs in
                 matching_offsets(current, expr)]
        addresses = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        updated, removed, keys = rowops.delete_addresses(current, addresses)
        changes = rowops.RowChanges(tuple(updated), tuple(removed), tuple(fragments), tuple(keys))
        return rowops.commit_changes(current, changes, fields_for_preserving_frag_bitmap=(), properties=props)

    manifest = rowops.with_retries(ds, attempt, conflict_retries=5)
    return ds.checkout_version(int(manifest.version))
