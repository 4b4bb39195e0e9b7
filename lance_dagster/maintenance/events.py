"""Maintenance outcomes as Dagster events on the maintained asset's history.

Maintenance is recorded as an ``AssetObservation``, not a materialization: it changes how the data
is stored, never the rows, so it must not mark downstream assets stale or trigger automation. Each
event is labelled (``"Lance v9 · Compaction · 12 → 2 fragments"``) and carries the new Lance
version as text and the step's quantities as numbers the UI plots.
"""

from __future__ import annotations

from typing import Any

from dagster import AssetKey, AssetObservation, MetadataValue

from lance_format import LanceDataset

from ..lineage import version_history
from ..metadata import (
    HISTORY_LIMIT,
    SUMMARY,
    URI,
    VERSION,
    commit_summary,
    dataset_state_metadata,
    history_markdown,
    run_url,
)
from .engine import CleanupOutcome, CompactionOutcome, IndexOutcome

STEP = "lance/maintenance_step"
DRY_RUN = "lance/dry_run"


def _size(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{nbytes} B"  # pragma: no cover


def compaction_label(o: CompactionOutcome) -> tuple[str, str]:
    """(operation, detail) of a compaction, e.g. ``("Compaction", "12 → 2 fragments")``."""
    if o.dry_run:
        return "Compaction (dry run)", f"would rewrite {o.fragments_rewritten} of {o.fragments_before} fragments"
    if o.new_version is None:
        return "Compaction", f"nothing to do ({o.fragments_before} fragments)"
    return "Compaction", f"{o.fragments_before} → {o.fragments_after} fragments"


def compaction_metrics(o: CompactionOutcome) -> dict[str, Any]:
    """Numeric metadata of a compaction (plotted across events)."""
    return {
        "lance/fragments_before": MetadataValue.int(o.fragments_before),
        "lance/fragments_after": MetadataValue.int(o.fragments_after),
        "lance/fragments_rewritten": MetadataValue.int(o.fragments_rewritten),
        "lance/files_added": MetadataValue.int(o.files_added),
        "lance/files_removed": MetadataValue.int(o.files_removed),
        "lance/rows_rewritten": MetadataValue.int(o.rows_rewritten),
        "lance/bytes_written": MetadataValue.int(o.bytes_written),
        "lance/indices_remapped": MetadataValue.int(o.indices_remapped),
        "lance/duration_s": MetadataValue.float(round(o.duration_s, 3)),
    }


def index_label(o: IndexOutcome) -> tuple[str, str]:
    """(operation, detail) of an index optimization."""
    names = ", ".join(o.indices) if o.indices else "no indices"
    if o.dry_run:
        return "Optimize indices (dry run)", f"would update {names}"
    left = f"; left behind (kind not maintained here): {', '.join(o.unmaintained)}" if o.unmaintained else ""
    if o.new_version is None:
        return "Optimize indices", ("indices up to date" if not o.unmaintained else "nothing we can update") + left
    return "Optimize indices", f"{names} (+{o.fragments_indexed} fragments){left}"


def index_metrics(o: IndexOutcome) -> dict[str, Any]:
    """Numeric metadata of an index optimization."""
    return {
        "lance/indices_updated": MetadataValue.int(len(o.indices)),
        "lance/fragments_indexed": MetadataValue.int(o.fragments_indexed),
        "lance/indices_unmaintained": MetadataValue.text(", ".join(o.unmaintained) or "none"),
        "lance/duration_s": MetadataValue.float(round(o.duration_s, 3)),
    }


def cleanup_label(o: CleanupOutcome) -> tuple[str, str]:
    """(operation, detail) of a cleanup."""
    verb = "would remove" if o.dry_run else "removed"
    detail = (f"{verb} {len(o.versions_removed)} versions, {len(o.files_removed)} files, "
              f"{_size(o.bytes_reclaimed)}")
    return ("Cleanup (dry run)" if o.dry_run else "Cleanup"), detail


def cleanup_metrics(o: CleanupOutcome) -> dict[str, Any]:
    """Numeric metadata of a cleanup, and exactly which versions and files go."""
    md: dict[str, Any] = {
        "lance/versions_removed": MetadataValue.int(len(o.versions_removed)),
        "lance/files_removed": MetadataValue.int(len(o.files_removed)),
        "lance/bytes_reclaimed": MetadataValue.int(o.bytes_reclaimed),
        "lance/duration_s": MetadataValue.float(round(o.duration_s, 3)),
        "lance/removed_versions": MetadataValue.text(
            ", ".join(f"v{v}" for v in o.versions_removed) or "none"),
        "lance/protected_versions": MetadataValue.text(
            ", ".join(f"v{v}" for v in o.protected_versions) or "none"),
    }
    if o.files_removed:
        md["lance/removed_files"] = MetadataValue.md(
            "\n".join(f"- `{path}`" for path in o.files_removed))
    return md


def changed(outcome: CompactionOutcome | IndexOutcome | CleanupOutcome) -> bool:
    """Whether the step committed a version or deleted files (a no-op or dry run did not)."""
    if outcome.dry_run:
        return False
    if isinstance(outcome, CleanupOutcome):
        return bool(outcome.files_removed)
    return outcome.new_version is not None


def outcome_event(
    outcome: CompactionOutcome | IndexOutcome | CleanupOutcome,
    *,
    asset_key: AssetKey,
    dataset: LanceDataset,
    run_id: str,
) -> AssetObservation:
    """The observation recording ``outcome`` on ``asset_key``'s history.

    Args:
        outcome: the step's outcome.
        asset_key: the maintained asset.
        dataset: the dataset opened at its latest version after the step.
        run_id: the maintenance run (linked from the event).
    """
    step: str
    if isinstance(outcome, CompactionOutcome):
        (operation, detail), metrics, step = compaction_label(outcome), compaction_metrics(outcome), "compaction"
    elif isinstance(outcome, IndexOutcome):
        (operation, detail), metrics, step = index_label(outcome), index_metrics(outcome), "index"
    else:
        (operation, detail), metrics, step = cleanup_label(outcome), cleanup_metrics(outcome), "cleanup"
    version = int(dataset.version)
    summary = commit_summary(version, operation, detail)
    records = version_history(dataset, limit=HISTORY_LIMIT)
    md: dict[str, Any] = {
        SUMMARY: MetadataValue.text(summary),
        URI: MetadataValue.text(outcome.uri),
        VERSION: MetadataValue.text(str(version)),
        STEP: MetadataValue.text(step),
        DRY_RUN: MetadataValue.bool(outcome.dry_run),
        "dagster/row_count": MetadataValue.int(int(dataset.count_rows())),
        "lance/fragment_count": MetadataValue.int(len(dataset.manifest.fragments)),
        **metrics,
        "lance/run": MetadataValue.url(run_url(run_id)),
    }
    md.update(dataset_state_metadata(dataset, records))
    if changed(outcome):
        md["lance/last_maintenance"] = MetadataValue.text(f"{operation} → v{version} in run {run_id[:8]}")
    md["lance/version_history"] = history_markdown(records)
    return AssetObservation(asset_key=asset_key, description=summary, metadata=md)
