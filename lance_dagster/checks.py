"""``build_lance_asset_checks``: schema, row-count and maintenance-health checks for Lance-backed assets.

Each check opens the asset's dataset (found as the IO manager finds it) and reports what it measured
as check metadata. The health check's numbers use the keys the maintenance health sensor reads
(:mod:`lance_dagster.maintenance.health`): ``lance/fragment_count``, ``lance/small_fragment_count``,
``lance/deleted_ratio``, ``lance/version_count``, ``lance/physical_rows``, ``lance/unindexed_rows`` (and
``lance/unindexed_rows/<index>`` per index), plus ``lance/small_fragment_ratio``.

Compaction advice (small fragments, deleted rows) scales with the table: below
``HealthLimits.min_compaction_rows`` rows every fragment is small and compaction would gain at most a
few file opens, so only the absolute limits (fragments, versions, unindexed rows) apply.

No postponed annotations here: Dagster reads the check functions' annotations at definition time.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
from dagster import (
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    AssetsDefinition,
    MetadataValue,
    asset_check,
)

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, VersionNotFoundError

from .config import LanceSettings, make_settings
from .coverage import UNINDEXED_ROWS, coverage_metadata, unindexed_rows
from .lineage import read_commit
from .reader import open_dataset

FRAGMENT_COUNT = "lance/fragment_count"
SMALL_FRAGMENT_COUNT = "lance/small_fragment_count"
SMALL_FRAGMENT_RATIO = "lance/small_fragment_ratio"
DELETED_RATIO = "lance/deleted_ratio"
VERSION_COUNT = "lance/version_count"
PHYSICAL_ROWS = "lance/physical_rows"
ROW_COUNT = "dagster/row_count"

SchemaRule = Literal["unchanged", "compatible"]


@dataclass(frozen=True)
class HealthLimits:
    """When the maintenance-health check fails (any one limit passed), and how loudly.

    Attributes:
        max_fragments: more fragments than this.
        small_fragment_rows: a fragment with fewer live rows is small.
        max_small_fragment_ratio: small fragments / fragments above this.
        max_deleted_ratio: deleted rows / physical rows above this.
        max_unindexed_rows: rows an index does not cover yet, above this (any index, any kind).
        max_versions: more versions than this.
        severity: ``WARN`` (default) or ``ERROR``.
        min_compaction_rows: below this many physical rows the small-fragment and deleted-row
            limits do not apply (``None``: ``small_fragment_rows``, i.e. less than one full
            fragment of data is never worth a compaction on its own).
    """

    max_fragments: int = 64
    small_fragment_rows: int = 256 * 1024
    max_small_fragment_ratio: float = 0.5
    max_deleted_ratio: float = 0.1
    max_unindexed_rows: int = 100_000
    max_versions: int = 100
    severity: AssetCheckSeverity = AssetCheckSeverity.WARN
    min_compaction_rows: int | None = None

    @property
    def compaction_rows(self) -> int:
        """The table size (physical rows) from which compaction advice is given."""
        return self.small_fragment_rows if self.min_compaction_rows is None else self.min_compaction_rows


@dataclass(frozen=True)
class Health:
    """Maintenance numbers of one dataset version."""

    fragment_count: int
    small_fragment_count: int
    deleted_ratio: float
    unindexed_rows: int
    version_count: int
    physical_rows: int = 0
    unindexed_by_index: dict[str, int] = field(default_factory=dict)

    @property
    def small_fragment_ratio(self) -> float:
        """Small fragments / fragments (0 for an empty table)."""
        return self.small_fragment_count / self.fragment_count if self.fragment_count else 0.0

    def problems(self, t: HealthLimits) -> list[str]:
        """The limits this dataset passes, as sentences (empty when healthy)."""
        out = []
        if self.fragment_count > t.max_fragments:
            out.append(f"{self.fragment_count} fragments > {t.max_fragments}")
        large = self.physical_rows >= t.compaction_rows
        # One small fragment has nothing to be compacted with: the ratio counts from two on.
        if large and self.small_fragment_count > 1 and self.small_fragment_ratio > t.max_small_fragment_ratio:
            out.append(f"small-fragment ratio {self.small_fragment_ratio:.2f} > {t.max_small_fragment_ratio:.2f}")
        if large and self.deleted_ratio > t.max_deleted_ratio:
            out.append(f"deleted-row ratio {self.deleted_ratio:.2f} > {t.max_deleted_ratio:.2f}")
        for name, rows in sorted(self.unindexed_by_index.items()):
            if rows > t.max_unindexed_rows:
                out.append(f"index {name!r}: {rows} unindexed rows > {t.max_unindexed_rows}")
        if self.version_count > t.max_versions:
            out.append(f"{self.version_count} versions > {t.max_versions}")
        return out

    def metadata(self) -> dict[str, Any]:
        """Check metadata (the keys the maintenance health sensor reads)."""
        return {
            FRAGMENT_COUNT: MetadataValue.int(self.fragment_count),
            SMALL_FRAGMENT_COUNT: MetadataValue.int(self.small_fragment_count),
            SMALL_FRAGMENT_RATIO: MetadataValue.float(round(self.small_fragment_ratio, 4)),
            DELETED_RATIO: MetadataValue.float(round(self.deleted_ratio, 4)),
            UNINDEXED_ROWS: MetadataValue.int(self.unindexed_rows),
            VERSION_COUNT: MetadataValue.int(self.version_count),
            PHYSICAL_ROWS: MetadataValue.int(self.physical_rows),
            **coverage_metadata(self.unindexed_by_index),
        }

    def description(self, t: HealthLimits) -> str:
        """The check's one-line result: the limits passed, or why the table is healthy."""
        problems = self.problems(t)
        if problems:
            return "; ".join(problems)
        if self.physical_rows < t.compaction_rows:
            return (f"within maintenance thresholds ({self.physical_rows:,} rows: below the {t.compaction_rows:,}-row "
                    "minimum for compaction advice)")
        return "within maintenance thresholds"


def fragment_numbers(ds: LanceDataset, *, small_fragment_rows: int) -> tuple[int, int, float]:
    """``(fragments, small fragments, deleted-row ratio)`` of ``ds``'s manifest.

    Shared by the health check and the maintenance sensor's fallback measurement.
    """
    frags = ds.manifest.fragments
    physical = sum(f.physical_rows for f in frags)
    deleted = sum(f.num_deletions for f in frags)
    small = sum(1 for f in frags if f.num_rows < small_fragment_rows)
    return len(frags), small, deleted / physical if physical else 0.0


def measure_health(ds: LanceDataset, *, small_fragment_rows: int) -> Health:
    """Measure the maintenance numbers of ``ds`` from its manifest (index coverage too) and version list."""
    count, small, deleted_ratio = fragment_numbers(ds, small_fragment_rows=small_fragment_rows)
    by_index = unindexed_rows(ds)
    physical = sum(int(f.physical_rows) for f in ds.manifest.fragments)
    return Health(count, small, deleted_ratio, max(by_index.values(), default=0), len(ds.versions()),
                  physical, by_index)


@dataclass(frozen=True)
class SchemaDiff:
    """How a schema differs from a baseline."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def passes(self, rule: SchemaRule) -> bool:
        """``unchanged``: no difference; ``compatible``: columns may only be added."""
        if rule == "unchanged":
            return not (self.added or self.removed or self.changed)
        return not (self.removed or self.changed)


def schema_diff(baseline: pa.Schema, schema: pa.Schema) -> SchemaDiff:
    """Columns added, removed and changed (type or nullability) from ``baseline`` to ``schema``."""
    added = tuple(n for n in schema.names if n not in baseline.names)
    removed = tuple(n for n in baseline.names if n not in schema.names)
    changed = tuple(n for n in schema.names if n in baseline.names
                    and not schema.field(n).equals(baseline.field(n), check_metadata=False))
    return SchemaDiff(added, removed, changed)


def _keys(assets: Iterable[AssetsDefinition | AssetKey | str]) -> list[AssetKey]:
    keys: list[AssetKey] = []
    for item in assets:
        if isinstance(item, AssetsDefinition):
            keys.extend(item.keys)
        else:
            keys.append(item if isinstance(item, AssetKey) else AssetKey.from_user_string(item))
    return keys


def _open(settings: LanceSettings, key: AssetKey) -> LanceDataset | None:
    try:
        return open_dataset(settings, settings.uri_for(list(key.path)))
    except DatasetNotFoundError:
        return None


def _missing() -> AssetCheckResult:
    return AssetCheckResult(passed=False, severity=AssetCheckSeverity.WARN,
                            description="the dataset has not been materialized yet")


#: How far back the schema check looks for the previous materialization.
SCHEMA_LOOKBACK = 50


def _previous_materialization(ds: LanceDataset) -> LanceDataset | None:
    """The newest version written by an earlier Dagster run than the latest one (``None``: none).

    A write may take several commits (``schema_mode="merge"`` adds columns, then writes) and outside
    commits may follow it, so the schema is compared with the previous run's result, not with the
    version just before.
    """
    latest_run: str | None = None
    for number in range(ds.version, max(ds.version - SCHEMA_LOOKBACK, 0), -1):
        try:
            at = ds.checkout_version(number)
        except VersionNotFoundError:  # removed by cleanup
            continue
        run_id = read_commit(at, number).run_id
        if run_id is None:
            continue
        if latest_run is None:
            latest_run = run_id
        elif run_id != latest_run:
            return at
    return None


def _schema_check(key: AssetKey, settings: LanceSettings, rule: SchemaRule, expected: pa.Schema | None,
                  severity: AssetCheckSeverity) -> AssetChecksDefinition:
    def lance_schema() -> AssetCheckResult:
        ds = _open(settings, key)
        if ds is None:
            return _missing()
        baseline = expected
        against = "the expected schema"
        if baseline is None:
            previous = _previous_materialization(ds)
            if previous is None:
                return AssetCheckResult(passed=True, description="no earlier materialization to compare with")
            baseline = previous.schema
            against = f"version {previous.version}"
        diff = schema_diff(baseline, ds.schema)
        passed = diff.passes(rule)
        return AssetCheckResult(
            passed=passed, severity=severity,
            description=f"schema {rule} vs {against}" if passed else
            f"schema not {rule} vs {against}: added {list(diff.added)}, removed {list(diff.removed)}, "
            f"changed {list(diff.changed)}",
            metadata={"lance/version": MetadataValue.text(str(ds.version)),
                      "lance/columns_added": MetadataValue.text(", ".join(diff.added)),
                      "lance/columns_removed": MetadataValue.text(", ".join(diff.removed)),
                      "lance/columns_changed": MetadataValue.text(", ".join(diff.changed))})

    return asset_check(asset=key, name="lance_schema", blocking=False,
                       description=f"The table's schema is {rule} (vs the previous materialization or an expected "
                       "schema).",
                       )(lance_schema)


def _row_count_check(key: AssetKey, settings: LanceSettings, min_rows: int | None, max_rows: int | None,
                     severity: AssetCheckSeverity) -> AssetChecksDefinition:
    def lance_row_count() -> AssetCheckResult:
        ds = _open(settings, key)
        if ds is None:
            return _missing()
        rows = int(ds.count_rows())
        passed = (min_rows is None or rows >= min_rows) and (max_rows is None or rows <= max_rows)
        return AssetCheckResult(passed=passed, severity=severity,
                                description=f"{rows} rows; bounds [{min_rows}, {max_rows}]",
                                metadata={ROW_COUNT: MetadataValue.int(rows),
                                          "lance/version": MetadataValue.text(str(ds.version))})

    return asset_check(asset=key, name="lance_row_count", blocking=False,
                       description=f"Row count within [{min_rows}, {max_rows}].")(lance_row_count)


def _health_check(key: AssetKey, settings: LanceSettings, limits: HealthLimits) -> AssetChecksDefinition:
    def lance_maintenance() -> AssetCheckResult:
        ds = _open(settings, key)
        if ds is None:
            return _missing()
        health = measure_health(ds, small_fragment_rows=limits.small_fragment_rows)
        return AssetCheckResult(passed=not health.problems(limits), severity=limits.severity,
                                description=health.description(limits), metadata=health.metadata())

    return asset_check(asset=key, name="lance_maintenance", blocking=False,
                       description="Fragments, small fragments, deleted rows (tables of at least "
                       f"{limits.compaction_rows:,} rows), unindexed rows per index and versions vs. thresholds "
                       "(read by the maintenance health sensor).")(lance_maintenance)


def build_lance_asset_checks(
    assets: Iterable[AssetsDefinition | AssetKey | str],
    *,
    root_uri: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    schema: SchemaRule | None = "compatible",
    expected_schema: pa.Schema | None = None,
    schema_severity: AssetCheckSeverity = AssetCheckSeverity.ERROR,
    min_rows: int | None = None,
    max_rows: int | None = None,
    row_count_severity: AssetCheckSeverity = AssetCheckSeverity.ERROR,
    health: HealthLimits | None = None,
    namespace: str | None = None,
) -> list[AssetChecksDefinition]:
    """Asset checks for Lance-backed assets: ``lance_schema``, ``lance_row_count``, ``lance_maintenance``.

    Args:
        assets: the assets (definitions, keys or key strings); datasets are found under
            ``root_uri`` as the IO manager finds them.
        root_uri: the IO manager's root (default: the IO manager's default).
        storage_options: storage options for ``lance_format``.
        schema: ``"unchanged"`` or ``"compatible"`` (columns may only be added) vs. the previous
            version or ``expected_schema``; ``None`` for no schema check.
        expected_schema: compare with this schema instead of the previous version.
        schema_severity: severity of a failed schema check.
        min_rows: lower row-count bound (a row-count check is built when either bound is set).
        max_rows: upper row-count bound.
        row_count_severity: severity of a failed row-count check.
        health: maintenance thresholds (default ``HealthLimits()``).
        namespace: the IO manager's ``namespace``.
    """
    settings = make_settings(root_uri, storage_options, "overwrite", None, namespace=namespace)
    limits = health or HealthLimits()
    checks: list[AssetChecksDefinition] = []
    for key in _keys(assets):
        if schema is not None:
            checks.append(_schema_check(key, settings, schema, expected_schema, schema_severity))
        if min_rows is not None or max_rows is not None:
            checks.append(_row_count_check(key, settings, min_rows, max_rows, row_count_severity))
        checks.append(_health_check(key, settings, limits))
    return checks
