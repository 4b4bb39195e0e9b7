"""The code location the browser test serves: an append-only and a daily-partitioned Lance asset, a
partitioned asset reading the latter, their health checks, the maintenance job (local runner), its
schedule, the health sensor and the observation sensor.

Datasets live under ``$LANCE_UI_ROOT``.
"""

import datetime as dt
import os

import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    DailyPartitionsDefinition,
    DefaultScheduleStatus,
    Definitions,
    asset,
)

from lance_dagster import LanceIOManager, LanceResource, build_lance_observation_sensor
from lance_dagster.checks import HealthLimits, build_lance_asset_checks
from lance_dagster.maintenance import (
    HealthThresholds,
    build_lance_health_sensor,
    build_lance_maintenance_job,
    build_lance_maintenance_schedule,
)

ROOT = os.environ.get("LANCE_UI_ROOT", "/tmp/lance_ui")
DAYS = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")
THRESHOLDS = HealthThresholds(max_fragments=3)


@asset(metadata={"mode": "append"}, group_name="ui", kinds={"lance"})
def clicks(context: AssetExecutionContext) -> pa.Table:
    """Click events; each run appends one batch."""
    seed = sum(context.run_id.encode()) % 1000
    return pa.table({"id": pa.array(range(seed * 10, seed * 10 + 629), pa.int64()),
                     "page": [f"/p/{i % 7}" for i in range(629)]})


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"}, group_name="ui", kinds={"lance"})
def daily_visits(context: AssetExecutionContext) -> pa.Table:
    """Visits of one day (a partition replaces exactly its day's rows)."""
    day = dt.date.fromisoformat(context.partition_key)
    return pa.table({"day": pa.array([day] * 50, pa.date32()), "visits": pa.array(range(50), pa.int64())})


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"}, group_name="ui", kinds={"lance"})
def visit_totals(daily_visits: pa.Table) -> pa.Table:
    """Each day's total visits (reads exactly its day of ``daily_visits``)."""
    return daily_visits.group_by("day").aggregate([("visits", "sum")])


lance = LanceResource(root_uri=ROOT)
observer = build_lance_observation_sensor(["clicks", "daily_visits"], root_uri=ROOT)
maintenance = build_lance_maintenance_job("lance_maintenance", assets=[clicks, daily_visits],
                                          selection=["clicks", "daily_visits"], lance=lance)
defs = Definitions(
    assets=[clicks, daily_visits, visit_totals],
    # clicks: tight limits (fragments, unindexed rows); daily_visits: the defaults (a small table)
    asset_checks=[*build_lance_asset_checks([clicks], root_uri=ROOT, health=HealthLimits(
                      max_fragments=3, max_small_fragment_ratio=1.0, max_unindexed_rows=100)),
                  *build_lance_asset_checks([daily_visits], root_uri=ROOT)],
    jobs=[maintenance],
    schedules=[build_lance_maintenance_schedule(maintenance, cron_schedule="0 3 * * *",
                                                default_status=DefaultScheduleStatus.RUNNING)],
    sensors=[build_lance_health_sensor(maintenance, thresholds=THRESHOLDS), observer],
    resources={"io_manager": LanceIOManager(root_uri=ROOT), "lance": lance},
)
