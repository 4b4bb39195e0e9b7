"""The health sensor: request maintenance only for datasets past their thresholds.

Each evaluation reads the latest asset-check results of every maintained asset (measuring from the
dataset what the checks did not report), and requests one run of the maintenance job restricted to
the unhealthy datasets. The cursor remembers when each dataset was last requested, so a dataset is
not requested again within the cool-down, however long its maintenance takes to show.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetCheckKey,
    DefaultSensorStatus,
    JobDefinition,
    RunRequest,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from lance_format.errors import DatasetNotFoundError

from ..resource import LanceResource
from .health import DatasetHealth, HealthThresholds, from_checks, measure, merge_check_metrics
from .jobs import MAINTENANCE_TAG, bound_lance_resource, targets_from_job
from .targets import MaintenanceTarget


def _check_metadata(context: SensorEvaluationContext, target: MaintenanceTarget) -> dict[str, Any]:
    """Metadata of the latest evaluation of every check on the target's asset, merged."""
    if target.asset_key is None or context.repository_def is None:
        return {}
    keys: list[AssetCheckKey] = [
        k for k in context.repository_def.asset_graph.asset_check_keys if k.asset_key == target.asset_key
    ]
    if not keys:
        return {}
    records = context.instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    merged: dict[str, Any] = {}
    for record in records.values():
        entry = getattr(record, "event", None)
        evaluation = getattr(getattr(entry, "dagster_event", None), "event_specific_data", None)
        merged.update(getattr(evaluation, "metadata", None) or {})
    return merged


def _health(context: SensorEvaluationContext, target: MaintenanceTarget, lance: LanceResource,
            thresholds: HealthThresholds) -> DatasetHealth | None:
    import lance_format

    settings = lance.settings()
    if target.uri is not None:
        uri = target.uri
    else:
        assert target.asset_key is not None
        uri = settings.uri_for(list(target.asset_key.path))
    checks = _check_metadata(context, target)
    reported = from_checks(checks)
    if reported is not None:  # the checks said everything: no need to open the dataset
        return reported
    try:
        ds = lance_format.dataset(uri, storage_options=settings.options)
    except DatasetNotFoundError:
        return None
    measured = measure(ds, small_fragment_rows=thresholds.small_fragment_rows)
    return merge_check_metrics(measured, checks)


def _load_cursor(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def build_lance_health_sensor(
    job: JobDefinition,
    *,
    name: str | None = None,
    thresholds: HealthThresholds | None = None,
    cooldown: dt.timedelta = dt.timedelta(hours=6),
    minimum_interval_seconds: int = 300,
    run_config: Mapping[str, Any] | None = None,
    default_status: DefaultSensorStatus = DefaultSensorStatus.STOPPED,
) -> SensorDefinition:
    """Build a sensor that runs ``job`` for the datasets whose health is past ``thresholds``.

    Args:
        job: a job built by ``build_lance_maintenance_job``.
        name: sensor name (default ``<job>_health``).
        thresholds: when a dataset needs maintenance.
        cooldown: minimum time between two requests for one dataset.
        minimum_interval_seconds: how often the sensor evaluates.
        run_config: extra maintenance config merged into each request (``datasets`` is set here).
        default_status: whether the sensor runs when the code location loads.
    """
    limits = thresholds or HealthThresholds()
    targets = targets_from_job(job)
    bound = bound_lance_resource(job)

    @sensor(
        name=name or f"{job.name}_health",
        job=job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        # The job's own ``lance`` resource, else the code location's: the datasets the job maintains.
        required_resource_keys=set() if bound is not None else {"lance"},
        description="Requests Lance maintenance for datasets past their health thresholds "
        f"(cool-down {cooldown}).",
    )
    def _sensor(context: SensorEvaluationContext) -> Any:
        now = context.evaluation_time if hasattr(context, "evaluation_time") else None
        now_ts = (now or dt.datetime.now(dt.UTC)).timestamp()
        last = _load_cursor(context.cursor)
        due: dict[str, tuple[str, ...]] = {}
        for target in targets:
            if now_ts - last.get(target.name, float("-inf")) < cooldown.total_seconds():
                continue
            health = _health(context, target, bound or context.resources.lance, limits)
            if health is None:
                continue
            reasons = health.reasons(limits)
            if reasons:
                due[target.name] = reasons
        if not due:
            return SkipReason("every maintained dataset is within its thresholds or cooling down")
        for name_ in due:
            last[name_] = now_ts
        context.update_cursor(json.dumps(last, sort_keys=True))
        config = {**dict(run_config or {}), "datasets": sorted(due)}
        why = "; ".join(f"{n}: {', '.join(r)}" for n, r in sorted(due.items()))
        context.log.info(f"requesting maintenance: {why}")
        return RunRequest(
            run_key=f"lance-health-{'-'.join(sorted(due))}-{int(now_ts)}",
            run_config=config,
            tags={MAINTENANCE_TAG: "health", "lance/health_reasons": why[:1000]},
        )

    return _sensor
