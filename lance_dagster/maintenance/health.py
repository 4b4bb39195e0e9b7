"""Dataset health: the numbers that say a dataset needs maintenance, and the thresholds.

The health sensor reads them from the latest asset-check evaluations of the maintained asset
(``lance/fragment_count``, ``lance/small_fragment_count``, ``lance/deleted_ratio``,
``lance/version_count``, ``lance/physical_rows`` and ``lance/unindexed_rows`` in the check metadata,
as ``lance_dagster.checks.build_lance_asset_checks`` reports them) and measures whatever the checks
did not report directly from the dataset's latest manifest.

As the check does, it gives compaction reasons (small fragments, deleted rows) only for tables of at
least ``min_compaction_rows`` rows: one upsert into a five-row table deletes a large share of its
rows, and compacting it gains nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lance_format import LanceDataset

from ..checks import fragment_numbers
from ..coverage import UNINDEXED_ROWS, unindexed_rows, unmaintained_indices

FRAGMENT_COUNT = "lance/fragment_count"
SMALL_FRAGMENT_COUNT = "lance/small_fragment_count"
DELETED_RATIO = "lance/deleted_ratio"
VERSION_COUNT = "lance/version_count"
PHYSICAL_ROWS = "lance/physical_rows"


class HealthThresholds(dg.Model):
    """When a dataset needs maintenance (any one threshold passed is enough).

    A frozen Dagster (pydantic) model, so the YAML component's ``health`` settings extend it
    instead of repeating its fields.

    Attributes:
        max_fragments: more fragments than this.
        max_small_fragments: more fragments smaller than ``small_fragment_rows`` than this.
        small_fragment_rows: what counts as a small fragment (rows).
        max_deleted_ratio: deleted rows / physical rows above this.
        max_versions: more retained versions than this.
        max_unindexed_rows: more live rows than this that some index (any kind) does not cover.
        min_compaction_rows: below this many physical rows, small fragments and deleted rows are
            no reason (``None``: ``small_fragment_rows``).
    """

    max_fragments: int = 64
    max_small_fragments: int = 8
    small_fragment_rows: int = 256 * 1024
    max_deleted_ratio: float = 0.1
    max_versions: int = 100
    max_unindexed_rows: int = 100_000
    min_compaction_rows: int | None = None

    model_config = {"frozen": True}

    @property
    def compaction_rows(self) -> int:
        """The table size (physical rows) from which compaction reasons count."""
        return self.small_fragment_rows if self.min_compaction_rows is None else self.min_compaction_rows


@dataclass(frozen=True)
class DatasetHealth:
    """Health numbers of one dataset and where they came from.

    Attributes:
        fragment_count: fragments in the latest version.
        small_fragment_count: fragments below the small-fragment size.
        deleted_ratio: deleted rows / physical rows.
        version_count: versions still present.
        physical_rows: rows in the fragments, deleted ones included.
        unindexed_rows: the most live rows any index does not cover.
        from_checks: the metric names taken from asset-check results (the rest were measured).
    """

    fragment_count: int
    small_fragment_count: int
    deleted_ratio: float
    version_count: int
    physical_rows: int = 0
    unindexed_rows: int = 0
    from_checks: tuple[str, ...] = ()

    def reasons(self, t: HealthThresholds) -> tuple[str, ...]:
        """Why the dataset needs maintenance (empty when it does not)."""
        out = []
        if self.fragment_count > t.max_fragments:
            out.append(f"{self.fragment_count} fragments > {t.max_fragments}")
        large = self.physical_rows >= t.compaction_rows
        if large and self.small_fragment_count > t.max_small_fragments:
            out.append(f"{self.small_fragment_count} small fragments > {t.max_small_fragments}")
        if large and self.deleted_ratio > t.max_deleted_ratio:
            out.append(f"deleted ratio {self.deleted_ratio:.2f} > {t.max_deleted_ratio:.2f}")
        if self.version_count > t.max_versions:
            out.append(f"{self.version_count} versions > {t.max_versions}")
        if self.unindexed_rows > t.max_unindexed_rows:
            out.append(f"{self.unindexed_rows} unindexed rows > {t.max_unindexed_rows}")
        return tuple(out)


def measure(ds: LanceDataset, *, small_fragment_rows: int) -> DatasetHealth:
    """Measure health from the dataset's latest manifest and version list (as the health check does)."""
    count, small, deleted_ratio = fragment_numbers(ds, small_fragment_rows=small_fragment_rows)
    return DatasetHealth(fragment_count=count, small_fragment_count=small, deleted_ratio=deleted_ratio,
                         version_count=len(ds.versions()),
                         physical_rows=sum(int(f.physical_rows) for f in ds.manifest.fragments),
                         unindexed_rows=_maintainable_unindexed(ds))


def _maintainable_unindexed(ds: LanceDataset) -> int:
    # Only indices maintenance can extend count as a reason to run it; the rest are reported
    # per index in the check metadata (``lance/unindexed_rows/<index>``).
    skip = set(unmaintained_indices(ds))
    return max((n for name, n in unindexed_rows(ds).items() if name not in skip), default=0)


def _number(value: Any) -> float | None:
    raw = getattr(value, "value", value)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    return float(raw)


_METRICS: tuple[tuple[str, str, type[int] | type[float]], ...] = (
    (FRAGMENT_COUNT, "fragment_count", int),
    (SMALL_FRAGMENT_COUNT, "small_fragment_count", int),
    (DELETED_RATIO, "deleted_ratio", float),
    (VERSION_COUNT, "version_count", int),
    (PHYSICAL_ROWS, "physical_rows", int),
    (UNINDEXED_ROWS, "unindexed_rows", int),
)


def checked_metrics(check_metadata: Mapping[str, Any]) -> dict[str, int | float]:
    """The health numbers the asset checks reported, by :class:`DatasetHealth` field name."""
    out: dict[str, int | float] = {}
    for key, field_name, cast in _METRICS:
        number = _number(check_metadata.get(key))
        if number is not None:
            out[field_name] = cast(number)
    return out


def _health(found: Mapping[str, int | float], fallback: DatasetHealth | None) -> DatasetHealth | None:
    def pick(name: str) -> int | float | None:
        if name in found:
            return found[name]
        return None if fallback is None else getattr(fallback, name)

    values = [pick(name) for _, name, _ in _METRICS]
    if any(v is None for v in values):
        return None
    fragments, small, deleted, versions, physical, unindexed = values
    return DatasetHealth(fragment_count=int(fragments or 0), small_fragment_count=int(small or 0),
                         deleted_ratio=float(deleted or 0.0), version_count=int(versions or 0),
                         physical_rows=int(physical or 0), unindexed_rows=int(unindexed or 0),
                         from_checks=tuple(sorted(found)))


def from_checks(check_metadata: Mapping[str, Any]) -> DatasetHealth | None:
    """Health from the asset checks alone, when they reported every number (no dataset opened)."""
    return _health(checked_metrics(check_metadata), None)


def merge_check_metrics(measured: DatasetHealth, check_metadata: Mapping[str, Any]) -> DatasetHealth:
    """Prefer the numbers the asset checks reported; keep measured ones for the rest."""
    merged = _health(checked_metrics(check_metadata), measured)
    assert merged is not None  # every number has a measured fallback
    return merged
