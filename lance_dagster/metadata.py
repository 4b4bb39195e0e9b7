"""Dagster metadata for Lance materializations and loads.

Counts are emitted as ``MetadataValue.int`` so the Dagster UI plots them across materializations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from dagster import (
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableRecord,
    TableSchema,
)

from .lineage import VersionRecord, version_history
from .writer import WriteResult

#: How many recent versions the history table in each materialization shows.
HISTORY_LIMIT = 10

# Dagster's standard keys (the UI shows them in the asset's table panel).
URI = "dagster/uri"
TABLE_NAME = "dagster/table_name"
COLUMN_SCHEMA = "dagster/column_schema"
ROW_COUNT = "dagster/row_count"
STORAGE_KIND = "dagster/storage_kind"

VERSION = "lance/version"
READ_VERSION = "lance/read_version"
OPERATION = "lance/operation"
MODE = "lance/mode"
ROWS_ADDED = "lance/rows_added"
FRAGMENT_COUNT = "lance/fragment_count"
FRAGMENTS_ADDED = "lance/fragments_added"
BYTES_WRITTEN = "lance/bytes_written"
VERSION_HISTORY = "lance/version_history"
INPUT_VERSION_PREFIX = "lance/input_version/"


def column_schema(schema: pa.Schema) -> TableSchema:
    """Describe an Arrow schema as a Dagster ``TableSchema`` (Arrow type names, nullability)."""
    return TableSchema(
        columns=[
            TableColumn(
                name=f.name,
                type=str(f.type),
                constraints=TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema
        ]
    )


def history_table(records: list[VersionRecord]) -> MetadataValue:
    """Render version records (newest first) as a ``MetadataValue.table``."""
    schema = TableSchema(
        columns=[
            TableColumn("version", "int"),
            TableColumn("time", "string"),
            TableColumn("operation", "string"),
            TableColumn("rows", "int"),
            TableColumn("run_id", "string"),
        ]
    )
    rows = [
        TableRecord(
            {
                "version": r.version,
                "time": r.timestamp.isoformat(sep=" ", timespec="seconds") if r.timestamp else None,
                "operation": r.operation,
                "rows": r.rows,
                "run_id": r.run_id,
            }
        )
        for r in records
    ]
    return MetadataValue.table(rows, schema=schema)


def table_name(uri: str) -> str:
    """The dataset's name as shown in Dagster: the last path component without ``.lance``."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return name[: -len(".lance")] if name.endswith(".lance") else name


def write_metadata(result: WriteResult, *, history_limit: int = HISTORY_LIMIT) -> dict[str, Any]:
    """Metadata for the materialization that made ``result``'s commit.

    Includes the standard ``dagster/uri``, ``dagster/table_name``, ``dagster/column_schema`` and
    ``dagster/row_count`` (whole table), the Lance version and operation, what the commit added,
    and a table of the dataset's recent versions.
    """
    ds = result.dataset
    commit = result.commit
    total_rows = int(ds.count_rows())
    fragments = list(ds.get_fragments())
    rows_added = commit.rows_added
    if rows_added is None:
        rows_added = total_rows - (result.previous_rows if result.mode == "append" else 0)
    read_version = commit.read_version
    if read_version is None:
        read_version = result.previous_version or 0
    md: dict[str, Any] = {
        URI: MetadataValue.text(result.uri),
        TABLE_NAME: MetadataValue.text(table_name(result.uri)),
        COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(ds.schema)),
        ROW_COUNT: MetadataValue.int(total_rows),
        STORAGE_KIND: MetadataValue.text("lance"),
        VERSION: MetadataValue.int(result.version),
        READ_VERSION: MetadataValue.int(int(read_version)),
        OPERATION: MetadataValue.text(commit.operation or result.mode.capitalize()),
        MODE: MetadataValue.text(result.mode),
        ROWS_ADDED: MetadataValue.int(int(rows_added)),
        FRAGMENT_COUNT: MetadataValue.int(len(fragments)),
    }
    if commit.fragments_added is not None:
        md[FRAGMENTS_ADDED] = MetadataValue.int(commit.fragments_added)
    if commit.bytes_written is not None:
        md[BYTES_WRITTEN] = MetadataValue.int(commit.bytes_written)
    md[VERSION_HISTORY] = history_table(version_history(ds, limit=history_limit))
    return md


def input_version_key(asset_key: str) -> str:
    """Metadata key recording which version of upstream ``asset_key`` a step read."""
    return INPUT_VERSION_PREFIX + asset_key


def load_metadata(uri: str, version: int, latest_version: int, pin: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata for a load (attached to the LOADED_INPUT event and an observation of the upstream)."""
    md: dict[str, Any] = {
        URI: MetadataValue.text(uri),
        VERSION: MetadataValue.int(version),
        "lance/latest_version": MetadataValue.int(latest_version),
    }
    for key, value in pin.items():
        if value is not None:
            md[f"lance/read_{key}"] = MetadataValue.text(str(value))
    return md


def materialize_result(result: WriteResult, *, history_limit: int = HISTORY_LIMIT) -> Any:
    """A ``MaterializeResult`` for a write made through ``LanceResource.write``.

    Carries the same metadata the IO manager attaches and ``data_version`` = the Lance version.
    """
    from dagster import DataVersion, MaterializeResult

    return MaterializeResult(
        metadata=write_metadata(result, history_limit=history_limit),
        data_version=DataVersion(str(result.version)),
    )
