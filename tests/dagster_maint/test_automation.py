"""The maintenance schedule, the health checks and the health sensor (cursor and cool-down)."""

from __future__ import annotations

import datetime as dt
import json

from dagster import (
    AssetCheckKey,
    DagsterInstance,
    Definitions,
    RunRequest,
    build_schedule_context,
    build_sensor_context,
    materialize,
)

from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.checks import HealthLimits, build_lance_asset_checks
from lance_dagster.maintenance import (
    HealthThresholds,
    build_lance_health_sensor,
    build_lance_maintenance_job,
    build_lance_maintenance_schedule,
)

from .helpers import appending_asset

THRESHOLDS = HealthThresholds(max_fragments=3, max_small_fragments=100, max_deleted_ratio=0.5, max_versions=100)


def _setup(io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, busy: int, calm: int):
    busy_asset, calm_asset = appending_asset("busy"), appending_asset("calm")
    for asset_def, times in ((busy_asset, busy), (calm_asset, calm)):
        for _ in range(times):
            assert materialize([asset_def], resources={"io_manager": io_manager}, instance=instance).success
    job = build_lance_maintenance_job("maint", assets=[busy_asset, calm_asset], selection=["busy", "calm"],
                                      lance=lance)
    return busy_asset, calm_asset, job


def test_schedule_runs_the_job_nightly_with_valid_config(lance: LanceResource) -> None:
    job = build_lance_maintenance_job("maint", assets=[appending_asset()], selection=["events"], lance=lance)
    schedule = build_lance_maintenance_schedule(job, cron_schedule="0 2 * * *", execution_timezone="Europe/Berlin",
                                                run_config={"cleanup": {"older_than": "14d"}})
    assert (schedule.cron_schedule, schedule.execution_timezone, schedule.job_name) == (
        "0 2 * * *", "Europe/Berlin", "maint")
    request = schedule.evaluate_tick(build_schedule_context(
        scheduled_execution_time=dt.datetime(2026, 1, 1, 2, tzinfo=dt.UTC))).run_requests[0]
    assert request.run_config == {"cleanup": {"older_than": "14d"}}
    Definitions(jobs=[job], schedules=[schedule]).resolve_job_def("maint")  # config validated at load


def test_sensor_requests_only_unhealthy_datasets_then_cools_down(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance) -> None:
    _, _, job = _setup(io_manager, lance, instance, busy=5, calm=1)
    sensor = build_lance_health_sensor(job, thresholds=THRESHOLDS, cooldown=dt.timedelta(hours=1))
    context = build_sensor_context(instance=instance)
    first = sensor.evaluate_tick(context)
    assert len(first.run_requests) == 1
    request: RunRequest = first.run_requests[0]
    assert request.run_config["datasets"] == ["busy"]
    assert "5 fragments > 3" in request.tags["lance/health_reasons"]
    cursor = json.loads(first.cursor)
    assert set(cursor) == {"busy"}
    # Within the cool-down the same dataset is not requested again, even though it is still unhealthy.
    second = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=first.cursor))
    assert not second.run_requests and isinstance(second.skip_message, str)
    # After the cool-down it is.
    old = json.dumps({"busy": cursor["busy"] - 7200})
    third = sensor.evaluate_tick(build_sensor_context(instance=instance, cursor=old))
    assert [r.run_config["datasets"] for r in third.run_requests] == [["busy"]]
    # The request runs: the maintenance job maintains only the unhealthy dataset.
    result = job.execute_in_process(instance=instance, run_config={**request.run_config, "runner": "local"})
    assert result.success
    after = sensor.evaluate_tick(build_sensor_context(instance=instance))
    assert isinstance(after.skip_message, str) or not after.run_requests


def test_sensor_reads_the_health_check_metrics(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance) -> None:
    busy, calm, job = _setup(io_manager, lance, instance, busy=3, calm=1)
    checks = build_lance_asset_checks([busy, calm], root_uri=lance.root_uri, schema=None,
                                      health=HealthLimits(max_fragments=3, max_small_fragment_ratio=1.0))
    sensor = build_lance_health_sensor(job, thresholds=THRESHOLDS)
    defs = Definitions(assets=[busy, calm], asset_checks=checks, jobs=[job], sensors=[sensor],
                       resources={"io_manager": io_manager, "lance": lance})
    result = materialize([busy, calm, *checks], resources={"io_manager": io_manager, "lance": lance},
                         instance=instance)
    evaluations = {e.asset_check_key: e for e in result.get_asset_check_evaluations()}
    health = evaluations[AssetCheckKey(busy.key, "lance_maintenance")]
    assert health.passed is False and health.metadata["lance/fragment_count"].value == 4
    assert evaluations[AssetCheckKey(calm.key, "lance_maintenance")].passed is True
    # Compaction fixes the dataset, but the sensor goes by the latest check result until it runs again.
    assert job.execute_in_process(instance=instance, run_config={"runner": "local", "datasets": ["busy"]}).success
    repo = defs.get_repository_def()
    tick = sensor.evaluate_tick(build_sensor_context(instance=instance, repository_def=repo))
    assert [r.run_config["datasets"] for r in tick.run_requests] == [["busy"]]
