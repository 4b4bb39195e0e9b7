"""Dagster lineage stored in Lance transaction properties, and reading it back from a dataset.

Every commit made by lance_dagster carries string properties (run id, asset key, partition key,
code version) inside its Lance transaction, so a dataset's history can be explained from the
dataset alone, without the Dagster instance that wrote it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lance_format import LanceDataset
from lance_format.errors import LanceError, VersionNotFoundError

RUN_ID = "dagster/run_id"
ASSET_KEY = "dagster/asset_key"
PARTITION_KEY = "dagster/partition_key"
CODE_VERSION = "dagster/code_version"
JOB_NAME = "dagster/job_name"
#: The op (an asset's op, or a maintenance op such as ``compact__events``) that made the commit.
OP = "dagster/op"
WRITE_MODE = "lance_dagster/mode"
#: Set on commits made by a maintenance job ("compaction", "index", ...), so history tells them apart.
MAINTENANCE = "lance_dagster/maintenance"
COMMIT_MESSAGE = "__lance_commit_message"  # reserved by Lance for commit_message=


def transaction_properties(
    *,
    run_id: str | None,
    asset_key: str | None,
    partition_key: str | None = None,
    code_version: str | None = None,
    job_name: str | None = None,
    mode: str | None = None,
    op: str | None = None,
    maintenance: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return the properties to attach to a commit; keys whose value is ``None`` are left out.

    Every commit lance_dagster makes carries at least the run id and the op, and the asset key
    when it has one (materializations, and maintenance of an asset); maintenance commits say which
    step made them (``maintenance="compaction"`` / ``"index"``).
    """
    props = {
        RUN_ID: run_id,
        ASSET_KEY: asset_key,
        PARTITION_KEY: partition_key,
        CODE_VERSION: code_version,
        JOB_NAME: job_name,
        OP: op,
        WRITE_MODE: mode,
        MAINTENANCE: maintenance,
    }
    # The lineage is written last: extra properties never overwrite it.
    out = {str(k): str(v) for k, v in (extra or {}).items()}
    out.update({k: str(v) for k, v in props.items() if v is not None})
    return out


@dataclass(frozen=True)
class CommitInfo:
    """What one Lance version's transaction says about the commit that made it.

    Attributes:
        version: the dataset version the commit produced.
        read_version: the version the writer read before committing (0 for a new dataset).
        operation: the Lance operation name (``"Append"``, ``"Overwrite"``, ...) or ``None`` if unknown.
        rows_added: rows in the fragments the commit added, ``None`` if unknown.
        fragments_added: number of fragments the commit added, ``None`` if unknown.
        bytes_written: bytes of the data files the commit added, ``None`` if unknown.
        properties: the transaction properties (Dagster lineage lives here).
    """

    version: int
    read_version: int | None
    operation: str | None
    rows_added: int | None
    fragments_added: int | None
    bytes_written: int | None
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def run_id(self) -> str | None:
        """Dagster run id that made this version, if it was written by lance_dagster."""
        return self.properties.get(RUN_ID)


@dataclass(frozen=True)
class VersionRecord:
    """One row of a dataset's version history."""

    version: int
    timestamp: dt.datetime | None  # commit time, timezone-aware UTC
    operation: str | None
    rows: int | None
    run_id: str | None
    asset_key: str | None
    partition_key: str | None
    properties: dict[str, str] = field(default_factory=dict)


def _utc(ts: dt.datetime) -> dt.datetime:
    # Lance clients return naive local times; make them explicit UTC so history reads the same anywhere.
    return ts.astimezone(dt.UTC)


def _operation_name(op: Any) -> str | None:
    if op is None:
        return None
    if isinstance(op, str):
        return op
    cls_name = type(op).__name__
    if cls_name.startswith("Unknown"):  # lance_format keeps undecoded operations with their kind
        kind = getattr(op, "kind", None)
        return str(kind) if kind else cls_name
    return cls_name


def _fragment_stats(op: Any) -> tuple[int | None, int | None, int | None]:
    """(rows, fragments, bytes) of the fragments an operation adds; ``None`` when not exposed."""
    frags = getattr(op, "fragments", None)
    if frags is None:
        frags = getattr(op, "new_fragments", None)
    if frags is None:
        return None, None, None
    rows = 0
    size: int | None = 0
    for frag in frags:
        rows += int(getattr(frag, "physical_rows", 0) or 0)
        for data_file in getattr(frag, "files", None) or []:
            nbytes = getattr(data_file, "file_size_bytes", None)
            if nbytes is None or size is None:
                size = None
            else:
                size += int(nbytes)
    return rows, len(frags), size


def read_commit(ds: LanceDataset, version: int) -> CommitInfo:
    """Read the transaction behind ``version`` of a ``lance_format`` dataset.

    Fields the table layer does not expose come back as ``None`` / empty rather than failing, so
    history of datasets written by other tools still renders.
    """
    txn = None
    reader = getattr(ds, "read_transaction", None)
    if reader is not None:
        try:
            txn = reader(version)
        except LanceError:  # a version without a readable transaction (old writers) has no lineage
            txn = None
    if txn is None:
        return CommitInfo(version, None, None, None, None, None, {})
    op = getattr(txn, "operation", None)
    rows, frags, size = _fragment_stats(op)
    props = getattr(txn, "transaction_properties", None) or getattr(txn, "properties", None) or {}
    read_version = getattr(txn, "read_version", None)
    return CommitInfo(
        version=version,
        read_version=int(read_version) if read_version is not None else None,
        operation=_operation_name(op),
        rows_added=rows,
        fragments_added=frags,
        bytes_written=size,
        properties={str(k): str(v) for k, v in dict(props).items()},
    )


def _version_number(entry: Any) -> int:
    if isinstance(entry, Mapping):
        return int(entry.get("version", entry.get("number", 0)))
    return int(getattr(entry, "version", getattr(entry, "number", 0)))


def _version_field(entry: Any, name: str) -> Any:
    if isinstance(entry, Mapping):
        return entry.get(name)
    return getattr(entry, name, None)


def _total_rows(entry: Any) -> int | None:
    meta = _version_field(entry, "metadata") or {}
    value = meta.get("total_rows") if isinstance(meta, Mapping) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _rows_at(ds: LanceDataset, entry: Any, number: int) -> int | None:
    rows = _total_rows(entry)
    if rows is not None:
        return rows
    checkout = getattr(ds, "checkout_version", None)
    if checkout is None:
        return None
    try:
        return int(checkout(number).count_rows())
    except LanceError:  # history rendering must not fail on one unreadable (e.g. cleaned-up) version
        return None


def _manifest_time(ds: LanceDataset) -> dt.datetime | None:
    ts = getattr(getattr(ds, "manifest", None), "timestamp", None)
    return _utc(ts) if isinstance(ts, dt.datetime) else None


def _recent_history(ds: LanceDataset, limit: int) -> list[VersionRecord]:
    # Open only the newest ``limit`` manifests: a long-lived table's full history would cost one
    # object-store read per version on every materialization.
    latest = int(ds.latest_version)
    records = []
    for number in range(latest, max(latest - limit, 0), -1):
        try:
            at = ds.checkout_version(number)
        except VersionNotFoundError:  # removed by cleanup
            continue
        commit = read_commit(at, number)
        records.append(_record(commit, _manifest_time(at), commit.operation, int(at.count_rows())))
    return records


def _record(commit: CommitInfo, timestamp: dt.datetime | None, operation: str | None,
            rows: int | None) -> VersionRecord:
    return VersionRecord(
        version=commit.version,
        timestamp=timestamp,
        operation=operation,
        rows=rows,
        run_id=commit.properties.get(RUN_ID),
        asset_key=commit.properties.get(ASSET_KEY),
        partition_key=commit.properties.get(PARTITION_KEY),
        properties=commit.properties,
    )


def version_history(ds: LanceDataset, *, limit: int | None = None) -> list[VersionRecord]:
    """Return the dataset's versions, newest first, with lineage from transaction properties.

    Args:
        ds: a ``lance_format`` dataset (any version; history is the whole table's).
        limit: keep only the newest ``limit`` versions (reads only their manifests).
    """
    if limit is not None and hasattr(ds, "checkout_version") and hasattr(ds, "manifest"):
        return _recent_history(ds, limit)
    entries = sorted(ds.versions(), key=_version_number, reverse=True)
    if limit is not None:
        entries = entries[:limit]
    records = []
    for entry in entries:
        number = _version_number(entry)
        commit = read_commit(ds, number)
        ts = _version_field(entry, "timestamp")
        records.append(
            _record(
                commit,
                _utc(ts) if isinstance(ts, dt.datetime) else None,
                commit.operation or _version_field(entry, "operation"),
                _rows_at(ds, entry, number),
            )
        )
    return records
