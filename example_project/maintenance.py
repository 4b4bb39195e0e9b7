"""Nightly maintenance of every example dataset, and the health sensor that runs it on demand."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from dagster import (
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    JobDefinition,
    ScheduleDefinition,
    SensorDefinition,
)

from lance_dagster import LanceResource
from lance_dagster.maintenance import (
    HealthThresholds,
    build_lance_health_sensor,
    build_lance_maintenance_job,
    build_lance_maintenance_schedule,
)

#: The run config the schedule uses: keep a week of history, and always the last five versions.
NIGHTLY_CONFIG = {
    "compaction": {"target_rows_per_fragment": 1_000_000},
    "cleanup": {"older_than": "7d", "retain_versions": 5},
}


def maintenance_definitions(assets: Sequence[AssetsDefinition], lance: LanceResource, pyspark: object
                            ) -> tuple[JobDefinition, ScheduleDefinition, SensorDefinition]:
    """The maintenance job over all Lance assets, its nightly schedule and the health sensor."""
    job = build_lance_maintenance_job(
        "lance_maintenance",
        assets=assets,
        selection=AssetSelection.all(),
        lance=lance,
        pyspark=pyspark,
        description="Nightly compaction → index optimization → cleanup of every example dataset (Spark).",
        config_defaults=NIGHTLY_CONFIG,  # a run launched by hand maintains as the schedule does
    )
    schedule = build_lance_maintenance_schedule(
        job, cron_schedule="0 3 * * *", execution_timezone="Europe/Berlin", run_config=NIGHTLY_CONFIG,
        default_status=DefaultScheduleStatus.RUNNING)
    sensor = build_lance_health_sensor(
        job,
        thresholds=HealthThresholds(max_fragments=16, max_small_fragments=8, small_fragment_rows=10_000,
                                    max_deleted_ratio=0.2, max_versions=50),
        cooldown=dt.timedelta(hours=6),
        minimum_interval_seconds=600,
        run_config={k: v for k, v in NIGHTLY_CONFIG.items()},
    )
    return job, schedule, sensor
