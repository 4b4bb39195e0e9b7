"""``build_lance_maintenance_schedule``: run a maintenance job on a cron schedule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import DefaultScheduleStatus, JobDefinition, ScheduleDefinition


def build_lance_maintenance_schedule(
    job: JobDefinition,
    *,
    cron_schedule: str = "0 3 * * *",
    execution_timezone: str = "UTC",
    name: str | None = None,
    run_config: Mapping[str, Any] | None = None,
    default_status: DefaultScheduleStatus = DefaultScheduleStatus.STOPPED,
    description: str | None = None,
) -> ScheduleDefinition:
    """Schedule ``job`` (built by ``build_lance_maintenance_job``).

    Args:
        job: the maintenance job.
        cron_schedule: when to run (default nightly at 03:00).
        execution_timezone: IANA time zone the cron expression is read in.
        name: schedule name (default ``<job>_schedule``).
        run_config: a :class:`~lance_dagster.maintenance.LanceMaintenanceConfig` as a dict
            (e.g. ``{"cleanup": {"older_than": "14d"}}``); default: the config defaults.
        default_status: whether the schedule starts running when the code location loads.
        description: shown on the Automation page.
    """
    return ScheduleDefinition(
        name=name or f"{job.name}_schedule",
        job=job,
        cron_schedule=cron_schedule,
        execution_timezone=execution_timezone,
        run_config=dict(run_config or {}),
        default_status=default_status,
        description=description or f"Lance maintenance ({job.name}) at '{cron_schedule}' {execution_timezone}",
        tags={"lance/maintenance": "schedule"},
    )
