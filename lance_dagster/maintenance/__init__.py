"""Scheduled Lance maintenance in Dagster: compaction → index optimization → cleanup on Spark.

* :func:`build_lance_maintenance_job` — one op chain per dataset, each op in the dataset's pool.
* :func:`build_lance_maintenance_schedule` — run it on a cron schedule.
* :func:`build_lance_health_sensor` — run it only for datasets past their health thresholds.

Example::

    lance = LanceResource(root_uri="s3://lake")
    job = build_lance_maintenance_job("lance_maintenance", assets=assets, selection=AssetSelection.all(),
                                      lance=lance)            # Spark: lance_pyspark_resource("local[*]")
    defs = Definitions(
        assets=assets, jobs=[job],
        schedules=[build_lance_maintenance_schedule(job, cron_schedule="0 3 * * *",
                                                    execution_timezone="Europe/Berlin")],
        sensors=[build_lance_health_sensor(job)],
        resources={"io_manager": LanceIOManager(root_uri="s3://lake"), "lance": lance})

Run config (typed, :class:`LanceMaintenanceConfig`): ``{"datasets": [...], "runner": "spark",
"dry_run": false, "compaction": {"target_rows_per_fragment": ..., "defer_index_remap": ...},
"cleanup": {"older_than": "7d", "retain_versions": 5}}``. Give the instance one slot per pool
(``concurrency: pools: default_limit: 1`` in ``dagster.yaml``) so two runs never maintain one
dataset at once.
"""

from .config import (
    CleanupConfig,
    CompactionConfig,
    IndexConfig,
    LanceMaintenanceConfig,
    parse_duration,
)
from .engine import CleanupOutcome, CompactionOutcome, IndexOutcome
from .health import DatasetHealth, HealthThresholds
from .jobs import MAINTENANCE_TAG, build_lance_maintenance_job, targets_from_job
from .resources import SPARK_RESOURCE_KEY, lance_pyspark_resource, local_spark_config
from .schedules import build_lance_maintenance_schedule
from .sensors import build_lance_health_sensor
from .targets import PIN_TAG_PREFIX, MaintenanceTarget, pinned_versions, resolve_targets

__all__ = [
    "MAINTENANCE_TAG",
    "PIN_TAG_PREFIX",
    "SPARK_RESOURCE_KEY",
    "CleanupConfig",
    "CleanupOutcome",
    "CompactionConfig",
    "CompactionOutcome",
    "DatasetHealth",
    "HealthThresholds",
    "IndexConfig",
    "IndexOutcome",
    "LanceMaintenanceConfig",
    "MaintenanceTarget",
    "build_lance_health_sensor",
    "build_lance_maintenance_job",
    "build_lance_maintenance_schedule",
    "lance_pyspark_resource",
    "local_spark_config",
    "parse_duration",
    "pinned_versions",
    "resolve_targets",
    "targets_from_job",
]
