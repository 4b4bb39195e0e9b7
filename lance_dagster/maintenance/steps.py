"""The body of each maintenance op: resolve the dataset, run the step, record the outcome."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dagster import OpExecutionContext

from lance_format import LanceDataset
from lance_format.errors import DatasetNotFoundError, VersionNotFoundError
from lance_format.maintenance.compaction import CompactionOptions
from lance_format.maintenance.runner import Runner

from ..lineage import transaction_properties
from . import engine
from .config import CleanupStepConfig, CompactionStepConfig, IndexStepConfig, RunnerKind, parse_duration
from .events import outcome_event
from .resources import SPARK_RESOURCE_KEY, make_runner
from .targets import PIN_TAG_PREFIX, MaintenanceTarget, pin_tag

T = TypeVar("T")
R = TypeVar("R")


class _LazyRunner:
    """Creates the real runner on the first non-empty ``map``: no tasks, no Spark session."""

    def __init__(self, kind: RunnerKind, spark_resource: Any) -> None:
        self._kind = kind
        self._spark_resource = spark_resource
        self._runner: Runner | None = None

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if not items:
            return []
        if self._runner is None:
            self._runner = make_runner(self._kind, self._spark_resource)
        return self._runner.map(fn, items)


def _locate(context: OpExecutionContext, target: MaintenanceTarget) -> tuple[str, dict[str, str] | None]:
    settings = context.resources.lance.settings()
    if target.uri is not None:
        return target.uri, settings.options
    assert target.asset_key is not None
    return settings.uri_for(list(target.asset_key.path)), settings.options


def _open(context: OpExecutionContext, target: MaintenanceTarget, step: str) -> LanceDataset | None:
    uri, options = _locate(context, target)
    try:
        return engine.open_latest(uri, options)
    except DatasetNotFoundError:
        context.log.warning(f"{step} of {target.label}: no Lance dataset at {uri} yet; nothing to do")
        return None


def lineage(context: OpExecutionContext, target: MaintenanceTarget, step: str) -> dict[str, str]:
    """Transaction properties of a maintenance commit: run, job, op, the maintained asset and the step.

    Every commit a step makes carries them (compaction's ReserveFragments and Rewrite, the index
    step's CreateIndex), so the observation sensor and the version history attribute it to the
    maintenance run, not to a writer outside Dagster.
    """
    asset = target.asset_key.to_user_string() if target.asset_key is not None else None
    return transaction_properties(run_id=context.run_id, asset_key=asset, job_name=context.job_name,
                                  op=context.op_def.name, maintenance=step)


def _record(context: OpExecutionContext, target: MaintenanceTarget, outcome: Any, ds: LanceDataset) -> None:
    latest = ds.checkout_latest()  # the version the step committed (or a newer one), on the open store
    if target.asset_key is not None:
        event = outcome_event(outcome, asset_key=target.asset_key, dataset=latest, run_id=context.run_id)
        context.log_event(event)
        context.log.info(event.description or "")
    else:
        context.log.info(f"{target.label}: {outcome}")


def run_compaction(context: OpExecutionContext, target: MaintenanceTarget, config: CompactionStepConfig) -> None:
    """Compact one dataset and record the new version on its asset."""
    if not config.enabled:
        return
    ds = _open(context, target, "compaction")
    if ds is None:
        return
    compaction = CompactionOptions(
        target_rows_per_fragment=config.target_rows_per_fragment,
        max_rows_per_group=config.max_rows_per_group,
        materialize_deletions=config.materialize_deletions,
        materialize_deletions_threshold=config.materialize_deletions_threshold,
        defer_index_remap=config.defer_index_remap,
    )
    runner = _LazyRunner(config.runner, getattr(context.resources, SPARK_RESOURCE_KEY))
    outcome = engine.compact(ds, options=compaction, runner=runner, dry_run=config.dry_run,
                             transaction_properties=lineage(context, target, "compaction"))
    _record(context, target, outcome, ds)


def run_optimize_indices(context: OpExecutionContext, target: MaintenanceTarget, config: IndexStepConfig) -> None:
    """Bring one dataset's indices up to date and record it on its asset."""
    if not config.enabled:
        return
    ds = _open(context, target, "index optimization")
    if ds is None:
        return
    outcome = engine.optimize_indices(ds, dry_run=config.dry_run,
                                      runner=_LazyRunner(config.runner, getattr(context.resources, SPARK_RESOURCE_KEY)),
                                      transaction_properties=lineage(context, target, "index"))
    _record(context, target, outcome, ds)


def sync_pin_tags(ds: LanceDataset, pinned: frozenset[int], context: OpExecutionContext | None = None) -> None:
    """Make the ``dagster-pin-v*`` tags match the versions asset inputs pin now.

    Lance cleanup never removes a tagged version, so a tag per pinned version protects it; tags
    of pins no longer in the code are removed so their versions can age out.
    """
    existing = {name for name in ds.tags.list() if name.startswith(PIN_TAG_PREFIX)}
    wanted = {pin_tag(v): v for v in pinned}
    for name in sorted(existing - wanted.keys()):
        ds.tags.delete(name)
    for name, version in sorted(wanted.items()):
        if name in existing:
            continue
        try:
            ds.tags.create(name, version)
        except VersionNotFoundError:
            if context is not None:
                context.log.warning(f"{ds.uri}: version {version} is pinned by an asset input but no longer exists")


def run_cleanup(context: OpExecutionContext, target: MaintenanceTarget, config: CleanupStepConfig) -> None:
    """Remove old versions of one dataset (or report exactly what would go) and record it."""
    if not config.enabled:
        return
    ds = _open(context, target, "cleanup")
    if ds is None:
        return
    older_than = parse_duration(config.older_than, where=f"cleanup of {target.label}: older_than")
    grace = None if config.commit_grace is None else parse_duration(
        config.commit_grace, where=f"cleanup of {target.label}: commit_grace")
    # Pins are tagged even in a dry run: tags only protect, and the report must be what a real run does.
    sync_pin_tags(ds, target.pinned_versions, context)
    outcome = engine.cleanup(
        ds,
        older_than=older_than,
        retain_versions=config.retain_versions,
        delete_unverified=config.delete_unverified,
        dry_run=config.dry_run,
        commit_grace=grace,
        runner=_LazyRunner(config.runner, getattr(context.resources, SPARK_RESOURCE_KEY)),
    )
    _record(context, target, outcome, ds)
