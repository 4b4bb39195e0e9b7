"""Dagster metadata for Lance materializations, observations and loads.

Only quantities (rows, fragments, bytes, ratios) are numeric metadata, so the Dagster UI plots
exactly those across events; versions are identifiers and are emitted as text. Every event carries
a one-line summary (``"Lance v6 · Append · +1,887 rows"``), and the recent history is a markdown
table whose run ids link to the runs in the UI.
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

from lance_format import LanceDataset
from lance_format.errors import LanceError

from .coverage import coverage_metadata, unindexed_rows
from .lineage import MAINTENANCE, VersionRecord, version_history
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
SUMMARY = "lance/summary"
RUN = "lance/run"
TAGS = "lance/tags"
LAST_MAINTENANCE = "lance/last_maintenance"
# Keys of a load (LOADED_INPUT and the observation Dagster makes of it on the upstream asset).
INPUT_SUMMARY = "lance/input_summary"
INPUT_URI = "lance/input_uri"
INPUT_VERSION = "lance/input_version"
INPUT_LATEST_VERSION = "lance/input_latest_version"
#: What the input asked for, by ``ReadSpec`` field: a pinned version or tag, a row filter.
INPUT_REQUEST_KEYS = {"version": "lance/input_pinned_version", "tag": "lance/input_pinned_tag",
                      "filter": "lance/input_filter"}

#: Operations written by maintenance rather than by a data write (compaction rewrites fragments).
MAINTENANCE_OPERATIONS = frozenset({"Rewrite", "ReserveFragments", "CreateIndex", "DataReplacement"})


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
    """Render version records (newest first) as a ``MetadataValue.table`` (versions as text)."""
    schema = TableSchema(
        columns=[
            TableColumn("version", "string"),
            TableColumn("time", "string"),
            TableColumn("operation", "string"),
            TableColumn("rows", "int"),
            TableColumn("run_id", "string"),
        ]
    )
    rows = [
        TableRecord(
            {
                "version": f"v{r.version}",
                "time": r.timestamp.isoformat(sep=" ", timespec="seconds") if r.timestamp else None,
                "operation": operation_label(r),
                "rows": r.rows,
                "run_id": r.run_id,
            }
        )
        for r in records
    ]
    return MetadataValue.table(rows, schema=schema)


def run_url(run_id: str) -> str:
    """Path of a run's page in the Dagster UI (relative, so it works behind any host name)."""
    return f"/runs/{run_id}"


def operation_label(record: VersionRecord) -> str:
    """The operation as a reader knows it: maintenance commits say which maintenance made them."""
    kind = record.properties.get(MAINTENANCE)
    if kind and record.operation == "ReserveFragments":  # compaction's first commit: ids for new fragments
        return f"{kind.capitalize()} (reserve ids)"
    if kind:
        return kind.capitalize()
    if record.operation == "Rewrite":
        return "Compaction"
    return record.operation or "?"


def history_markdown(records: list[VersionRecord]) -> MetadataValue:
    """Recent versions (newest first) as a markdown table; each run id links to its run page."""
    lines = [
        "| version | time (UTC) | operation | rows | partition | run |",
        "|---|---|---|---:|---|---|",
    ]
    for r in records:
        when = r.timestamp.strftime("%Y-%m-%d %H:%M:%S") if r.timestamp else ""
        rows = "" if r.rows is None else f"{r.rows:,}"
        run = f"[{r.run_id[:8]}]({run_url(r.run_id)})" if r.run_id else _unlinked(r)
        lines.append(f"| v{r.version} | {when} | {operation_label(r)} | {rows} | {r.partition_key or ''} | {run} |")
    return MetadataValue.md("\n".join(lines))


def _unlinked(record: VersionRecord) -> str:
    # Every commit lance_dagster makes carries its run id (maintenance ones too), so a commit without
    # one came from outside Dagster, whatever its operation (an index built in a notebook included).
    return "maintenance" if record.properties.get(MAINTENANCE) else "external"


def commit_summary(version: int, operation: str, detail: str | None = None) -> str:
    """The one-line label of an event, e.g. ``"Lance v6 · Append · +1,887 rows"``."""
    parts = [f"Lance v{version}", operation]
    if detail:
        parts.append(detail)
    return " · ".join(parts)


def rows_detail(operation: str, rows_added: int | None, total_rows: int) -> str:
    """``"+1,887 rows"`` for an append, ``"1,887 rows"`` (the new total) for anything else."""
    if operation == "Append" and rows_added is not None:
        return f"+{rows_added:,} rows"
    return f"{total_rows:,} rows"


def tags_text(ds: LanceDataset) -> str | None:
    """The dataset's Lance tags as ``"gold → v3, nightly → v9"`` (``None`` when it has none)."""
    try:
        tags = ds.tags.list()
    except (AttributeError, LanceError):  # other clients' datasets may lack tags; a bad tag file is skipped
        return None
    if not tags:
        return None
    items = sorted((name, _tag_version(tag)) for name, tag in tags.items())
    return ", ".join(f"{name} → v{version}" for name, version in items)


def _tag_version(tag: Any) -> int:
    if isinstance(tag, Mapping):
        return int(tag["version"])
    return int(tag.version)


def last_maintenance_text(records: list[VersionRecord]) -> str | None:
    """Describe the newest maintenance commit among ``records`` (newest first), if any."""
    for r in records:
        if r.properties.get(MAINTENANCE) or r.operation in MAINTENANCE_OPERATIONS:
            when = r.timestamp.strftime("%Y-%m-%d %H:%M UTC") if r.timestamp else "unknown time"
            run = f" in run {r.run_id[:8]}" if r.run_id else ""
            return f"{operation_label(r)} → v{r.version} at {when}{run}"
    return None


def dataset_state_metadata(ds: LanceDataset, records: list[VersionRecord]) -> dict[str, Any]:
    """Tags (pinned versions), last maintenance and index coverage (``lance/unindexed_rows``, and
    ``lance/unindexed_rows/<index>`` per index), shown on the asset page with each event."""
    md: dict[str, Any] = coverage_metadata(unindexed_rows(ds))
    tags = tags_text(ds)
    if tags:
        md[TAGS] = MetadataValue.text(tags)
    last = last_maintenance_text(records)
    if last:
        md[LAST_MAINTENANCE] = MetadataValue.text(last)
    return md


def table_name(uri: str) -> str:
    """The dataset's name as shown in Dagster: the last path component without ``.lance``."""
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return name[: -len(".lance")] if name.endswith(".lance") else name


def write_metadata(result: WriteResult, *, history_limit: int = HISTORY_LIMIT) -> dict[str, Any]:
    """Metadata for the materialization that made ``result``'s commit.

    Starts with the one-line summary (``"Lance v6 · Append · +1,887 rows"``), then the standard
    ``dagster/uri``, ``dagster/table_name``, ``dagster/column_schema`` and ``dagster/row_count``
    (whole table), the Lance version (text) and operation, what the commit added, a link to the
    run, the dataset's tags and last maintenance, and a table of its recent versions.
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
    operation = commit.operation or result.mode.capitalize()
    md: dict[str, Any] = {
        SUMMARY: MetadataValue.text(
            commit_summary(result.version, operation, rows_detail(operation, rows_added, total_rows))
        ),
        URI: MetadataValue.text(result.uri),
        TABLE_NAME: MetadataValue.text(table_name(result.uri)),
        COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(ds.schema)),
        ROW_COUNT: MetadataValue.int(total_rows),
        STORAGE_KIND: MetadataValue.text("lance"),
        VERSION: MetadataValue.text(str(result.version)),
        READ_VERSION: MetadataValue.text(str(int(read_version))),
        OPERATION: MetadataValue.text(operation),
        MODE: MetadataValue.text(result.mode),
        ROWS_ADDED: MetadataValue.int(int(rows_added)),
        FRAGMENT_COUNT: MetadataValue.int(len(fragments)),
    }
    if commit.fragments_added is not None:
        md[FRAGMENTS_ADDED] = MetadataValue.int(commit.fragments_added)
    if commit.bytes_written is not None:
        md[BYTES_WRITTEN] = MetadataValue.int(commit.bytes_written)
    if commit.run_id:
        md[RUN] = MetadataValue.url(run_url(commit.run_id))
    records = version_history(ds, limit=history_limit)
    md.update(dataset_state_metadata(ds, records))
    md[VERSION_HISTORY] = history_markdown(records)
    return md


def input_version_key(asset_key: str) -> str:
    """Metadata key recording which version of upstream ``asset_key`` a step read."""
    return INPUT_VERSION_PREFIX + asset_key


def input_versions_metadata(reads: Mapping[str, int]) -> dict[str, Any]:
    """``lance/input_version/<asset>`` entries (text: versions are identifiers, not quantities)."""
    return {input_version_key(asset): MetadataValue.text(str(int(v))) for asset, v in reads.items()}


def load_metadata(uri: str, version: int, latest_version: int, pin: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata for a load (attached to the LOADED_INPUT event and an observation of the upstream).

    Its keys are all ``lance/input_*``: Dagster records input metadata as an observation of the
    upstream asset, and the UI shows an asset's (or partition's) state from the newest event's
    metadata, so a load must not reuse the keys of a materialization (``lance/summary``,
    ``lance/version``, ``dagster/uri``), or a read would pass for the asset's newest version.
    """
    md: dict[str, Any] = {
        INPUT_SUMMARY: MetadataValue.text(read_summary(version, latest_version)),
        INPUT_URI: MetadataValue.text(uri),
        INPUT_VERSION: MetadataValue.text(str(version)),
        INPUT_LATEST_VERSION: MetadataValue.text(str(latest_version)),
    }
    for key, value in pin.items():
        if value is not None:
            md[INPUT_REQUEST_KEYS.get(key, f"lance/input_{key}")] = MetadataValue.text(str(value))
    return md


def read_summary(version: int, latest_version: int) -> str:
    """The label of a load, e.g. ``"Read v3 of 5 (pinned)"`` or ``"Read v5 (latest)"``."""
    if version == latest_version:
        return f"Read v{version} (latest)"
    return f"Read v{version} of {latest_version} (pinned)"


def materialize_result(result: WriteResult, *, history_limit: int = HISTORY_LIMIT) -> Any:
    """A ``MaterializeResult`` for a write made through ``LanceResource.write``.

    Carries the same metadata the IO manager attaches and ``data_version`` = the Lance version.
    """
    from dagster import DataVersion, MaterializeResult

    return MaterializeResult(
        metadata=write_metadata(result, history_limit=history_limit),
        data_version=DataVersion(str(result.version)),
    )
