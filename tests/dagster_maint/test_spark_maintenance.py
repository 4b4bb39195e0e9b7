"""The maintenance job's rewrite and delete tasks run on a real local Spark session."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.maintenance import build_lance_maintenance_job, lance_pyspark_resource
from lance_format.cleanup import COMMIT_GRACE_ENV

from .helpers import appending_asset, by_step, values

pytestmark = pytest.mark.slow


def test_maintenance_runs_on_spark(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")  # versions superseded seconds ago go despite the commit grace
    pytest.importorskip("pyspark")
    events = appending_asset()
    for _ in range(4):
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    spark = lance_pyspark_resource("local[2]")
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance, pyspark=spark)
    result = job.execute_in_process(instance=instance, run_config={
        "runner": "spark", "compaction": {"target_rows_per_fragment": 6},
        "cleanup": {"older_than": "0s", "retain_versions": 1}})
    assert result.success
    session = spark.spark_session
    try:
        steps = by_step(result, "events")
        compaction = values(steps["compaction"])
        # Four 3-row fragments, 6 rows per output fragment: two Spark tasks, two new fragments.
        assert (compaction["lance/fragments_before"], compaction["lance/fragments_after"]) == (4, 2)
        assert values(steps["cleanup"])["lance/files_removed"] > 0
        ds = lance_format.dataset(f"{root}/events.lance")
        assert ds.count_rows() == 12 and [int(v["version"]) for v in ds.versions()] == [int(ds.version)]
        assert session.sparkContext.master == "local[2]"
    finally:
        session.stop()
