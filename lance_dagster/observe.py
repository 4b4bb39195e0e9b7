"""Commits made outside Dagster, recorded as asset observations.

A Lance dataset may be written by a notebook, a Spark job or another service as well as by Dagster.
Every commit lance_dagster makes carries its run id, op and asset key as transaction properties
(materializations, schema evolution, and each maintenance commit: compaction's ReserveFragments and
Rewrite, index optimization's CreateIndex), and is recorded by its run (a materialization or a
maintenance observation). A version whose transaction carries no ``dagster/run_id`` was made outside
Dagster; the sensor built by :func:`build_lance_observation_sensor` records each such version as an
``AssetObservation`` whose data version is the Lance version, with the operation and row counts, so
the asset's history in the UI shows every commit, whoever made it.
:func:`lance_observable_source_asset` declares a dataset written entirely elsewhere as an observable
source asset (its observation reports the latest version).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    DataVersion,
    DefaultSensorStatus,
    MetadataValue,
    ObserveResult,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SourceAsset,
    observable_source_asset,
    sensor,
)

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, VersionNotFoundError

from .config import make_settings
from .lineage import RUN_ID, read_commit
from .metadata import commit_summary, rows_detail
from .reader import open_dataset

# Dagster reads an observation's data version from this tag (dagster._core.definitions.data_version
# DATA_VERSION_TAG); the constant is not exported, the tag name is part of the event format.
DATA_VERSION_TAG = "dagster/data_version"

#: Observation metadata keys.
VERSION = "lance/version"
OPERATION = "lance/operation"
ROW_COUNT = "dagster/row_count"
ROWS_ADDED = "lance/rows_added"
ROWS_REMOVED = "lance/rows_removed"
COMMITTED_AT = "lance/committed_at"
URI = "dagster/uri"
SUMMARY = "lance/summary"


@dataclass(frozen=True)
class ExternalCommit:
    """One version made outside Dagster.

    Attributes:
        version: the Lance version.
        operation: the transaction's operation (``"Append"``, ``"Delete"``, ...), ``None`` if unknown.
        rows: live rows at this version.
        rows_added: rows in the fragments the commit added (``None`` if unknown).
        rows_removed: rows the commit removed (rows before + added - rows after), ``None`` for the first.
        committed_at: commit time (UTC), ``None`` if unknown.
        properties: the transaction properties.
    """

    version: int
    operation: str | None
    rows: int
    rows_added: int | None
    rows_removed: int | None
    committed_at: dt.datetime | None
    properties: Mapping[str, str]


def external_commits(ds: LanceDataset, *, after: int, limit: int) -> list[ExternalCommit]:
    """Versions newer than ``after`` (oldest first, at most ``limit`` examined) with no Dagster run id.

    Versions removed by cleanup are skipped.
    """
    out: list[ExternalCommit] = []
    latest = int(ds.latest_version)
    prev_rows: int | None = None
    for number in range(after + 1, min(latest, after + limit) + 1):
        try:
            at = ds.checkout_version(number)
        except VersionNotFoundError:
            prev_rows = None
            continue
        rows = int(at.count_rows())
        commit = read_commit(at, number)
        if RUN_ID not in commit.properties:
            if prev_rows is None and number > 1:
                prev_rows = _rows_of(ds, number - 1)
            removed = None
            if prev_rows is not None:
                removed = max(prev_rows + (commit.rows_added or 0) - rows, 0)
            ts = at.manifest.timestamp
            out.append(ExternalCommit(number, commit.operation, rows, commit.rows_added, removed,
                                      ts.astimezone(dt.UTC) if isinstance(ts, dt.datetime) else None,
                                      dict(commit.properties)))
        prev_rows = rows
    return out


def _rows_of(ds: LanceDataset, version: int) -> int | None:
    try:
        return int(ds.checkout_version(version).count_rows())
    except VersionNotFoundError:
        return None


def observation_metadata(uri: str, commit: ExternalCommit) -> dict[str, Any]:
    """Metadata of the observation of one outside commit."""
    op = commit.operation or "Unknown"
    md: dict[str, Any] = {
        SUMMARY: MetadataValue.text(commit_summary(commit.version, op, rows_detail(op, commit.rows_added,
                                                                                   commit.rows))
                                    + " · outside Dagster"),
        URI: MetadataValue.text(uri),
        VERSION: MetadataValue.text(str(commit.version)),
        OPERATION: MetadataValue.text(op),
        ROW_COUNT: MetadataValue.int(commit.rows),
    }
    if commit.rows_added is not None:
        md[ROWS_ADDED] = MetadataValue.int(commit.rows_added)
    if commit.rows_removed is not None:
        md[ROWS_REMOVED] = MetadataValue.int(commit.rows_removed)
    if commit.committed_at is not None:
        md[COMMITTED_AT] = MetadataValue.timestamp(commit.committed_at)
    return md


def observation(key: AssetKey, uri: str, commit: ExternalCommit) -> AssetObservation:
    """The ``AssetObservation`` of one outside commit (data version = Lance version)."""
    return AssetObservation(asset_key=key, metadata=observation_metadata(uri, commit),
                            tags={DATA_VERSION_TAG: str(commit.version)})


def _keys(assets: Sequence[AssetKey | str | Sequence[str]] | Mapping[Any, str]) -> list[AssetKey]:
    return [k if isinstance(k, AssetKey) else AssetKey.from_user_string(k) if isinstance(k, str) else AssetKey(k)
            for k in assets]


def build_lance_observation_sensor(
    assets: Sequence[AssetKey | str | Sequence[str]] | Mapping[AssetKey | str, str],
    *,
    root_uri: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    name: str = "lance_external_commits",
    minimum_interval_seconds: int = 60,
    max_versions_per_tick: int = 200,
    default_status: DefaultSensorStatus = DefaultSensorStatus.STOPPED,
    namespace: str | None = None,
) -> SensorDefinition:
    """A sensor that records every Lance version made outside Dagster as an ``AssetObservation``.

    Its cursor holds the last version examined per asset, so each version is observed once; a
    first evaluation walks the existing history. Versions written by Dagster (their transaction
    carries ``dagster/run_id``) already have a materialization and are skipped.

    Args:
        assets: asset keys (datasets found as the IO manager finds them under ``root_uri``), or a
            mapping of asset key -> dataset URI.
        root_uri: the IO manager's root (default: the IO manager's default).
        storage_options: storage options for ``lance_format``.
        name: the sensor's name.
        minimum_interval_seconds: time between evaluations.
        max_versions_per_tick: versions examined per asset and evaluation (the rest next tick).
        default_status: whether the sensor starts running.
        namespace: the IO manager's ``namespace``.
    """
    settings = make_settings(root_uri, storage_options, "overwrite", None, namespace=namespace)
    if isinstance(assets, Mapping):
        targets = {k: str(v) for k, v in zip(_keys(list(assets)), assets.values(), strict=True)}
    else:
        targets = {k: settings.uri_for(list(k.path)) for k in _keys(assets)}

    @sensor(name=name, minimum_interval_seconds=minimum_interval_seconds, default_status=default_status,
            description="Records Lance commits made outside Dagster as asset observations.")
    def lance_external_commits(context: SensorEvaluationContext) -> SensorResult:
        cursor: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
        events: list[AssetObservation] = []
        for key, uri in targets.items():
            try:
                ds = open_dataset(settings, uri)
            except DatasetNotFoundError:
                continue  # not written yet
            label = key.to_user_string()
            after = int(cursor.get(label, 0))
            commits = external_commits(ds, after=after, limit=max_versions_per_tick)
            events.extend(observation(key, uri, c) for c in commits)
            cursor[label] = min(int(ds.latest_version), after + max_versions_per_tick)
        return SensorResult(asset_events=events, cursor=json.dumps(cursor, sort_keys=True))

    return lance_external_commits


def lance_observable_source_asset(
    key: AssetKey | str | Sequence[str],
    *,
    uri: str | None = None,
    root_uri: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    description: str | None = None,
    group_name: str | None = None,
    namespace: str | None = None,
) -> SourceAsset:
    """An observable source asset for a dataset written entirely outside Dagster.

    Each observation reports the latest Lance version as the data version, with its operation and
    row counts. Pair it with :func:`build_lance_observation_sensor` on the same key to record every
    version rather than the latest at each observation.

    Args:
        key: the asset key.
        uri: the dataset URI (default: found under ``root_uri`` as the IO manager would).
        root_uri: the IO manager's root, when ``uri`` is not given.
        storage_options: storage options for ``lance_format``.
        description: shown in the UI.
        group_name: the asset group.
        namespace: the IO manager's ``namespace``, when ``uri`` is not given.
    """
    asset_key = _keys([key])[0]
    settings = make_settings(root_uri, storage_options, "overwrite", None, namespace=namespace)
    target = uri or settings.uri_for(list(asset_key.path))

    def observe() -> ObserveResult:
        ds = open_dataset(settings, target)
        commit = read_commit(ds, int(ds.version))
        latest = ExternalCommit(int(ds.version), commit.operation, int(ds.count_rows()), commit.rows_added,
                                None, None, dict(commit.properties))
        return ObserveResult(data_version=DataVersion(str(ds.version)),
                             metadata=observation_metadata(target, latest))

    decorate = observable_source_asset(
        key=asset_key, description=description or f"Lance dataset at {target}", group_name=group_name,
        metadata={"dagster/uri": target, "dagster/storage_kind": "lance"})
    return decorate(observe)
