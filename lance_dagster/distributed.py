"""Writes whose data files are written by an engine's workers (Spark executors), committed once here.

The workers write uncommitted fragments (:meth:`SparkHandler.write_fragments`); this module checks
everything that can be refused before they start, and makes the single commit with the Dagster
lineage properties: ``Append`` / ``Overwrite`` for whole-table writes, and for a partition
replacement one ``Update`` that deletes the partition's old rows (deletion vectors) and adds the new
fragments, as :func:`lance_format.evolution.replace.replace_where` does for local data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.evolution.replace import replace_with_fragments
from lance_format.fragment import FragmentMetadata
from lance_format.spark.options import WriteOptions as SparkWriteOptions
from lance_format.spark.writer import commit_fragments, plan_write

from .config import LanceSettings, SchemaMode, WriteMode
from .lineage import COMMIT_MESSAGE
from .partitions import PartitionSlice
from .reader import open_dataset
from .schema_modes import plan_schema
from .writer import WriteResult, _describe, open_target


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
    schema = handler.arrow_schema(obj)
    expr = partition.expression(schema, where=where) if partition is not None else None
    existing, before, skipped = open_target(settings, uri, mode, expr, partition, where)
    if skipped is not None:
        return skipped
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
                                transaction_properties=props, storage_options=settings.options or {})
    plan = plan_write(options, schema)
    fragments = handler.write_fragments(obj, plan)
    if existing is None or expr is None or mode == "append":
        manifest = commit_fragments(plan, fragments)  # deletes the files if the commit fails
        ds = open_dataset(settings, uri, int(manifest.version))
        return _describe(ds, uri, mode, before, predicate=None if expr is None else str(expr))
    # One Update: deletion vectors for the partition's old rows plus the executors' fragments (the
    # commit half of replace_where; it deletes the fragments' files if the commit fails).
    replaced = replace_with_fragments(existing, expr, fragments, conflict_retries=5, transaction_properties=props)
    return _describe(replaced.dataset, uri, mode, before, rows_deleted=replaced.rows_deleted, predicate=str(expr))
