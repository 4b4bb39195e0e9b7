"""Commits made outside Dagster become asset observations (sensor and observable source asset)."""

import pyarrow as pa
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    asset,
    build_sensor_context,
    materialize,
)

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.observe import build_lance_observation_sensor, lance_observable_source_asset


@asset(metadata={"mode": "append"})
def metrics() -> pa.Table:
    return pa.table({"m": [1, 2]})


def test_sensor_observes_each_outside_commit_once(root: str, io_manager: LanceIOManager,
                                                  instance: DagsterInstance) -> None:
    uri = f"{root}/metrics.lance"
    materialize([metrics], resources={"io_manager": io_manager}, instance=instance)  # v1, by Dagster
    lance_format.write_dataset(pa.table({"m": [3, 4, 5]}), uri, mode="append")  # v2, outside
    ds = lance_format.dataset(uri)
    ds.delete("m = 1")  # v3, outside
    sensor_def = build_lance_observation_sensor(["metrics"], root_uri=root)
    defs = Definitions(assets=[metrics], sensors=[sensor_def], resources={"io_manager": io_manager})

    first = sensor_def(build_sensor_context(instance=instance, definitions=defs))
    obs = first.asset_events
    assert [o.tags["dagster/data_version"] for o in obs] == ["2", "3"]
    assert all(o.asset_key == AssetKey("metrics") for o in obs)
    md = [{k: v.value for k, v in o.metadata.items()} for o in obs]
    assert (md[0]["lance/operation"], md[0]["lance/rows_added"], md[0]["dagster/row_count"]) == ("Append", 3, 5)
    assert (md[1]["lance/operation"], md[1]["lance/rows_removed"], md[1]["dagster/row_count"]) == ("Delete", 1, 4)

    materialize([metrics], resources={"io_manager": io_manager}, instance=instance)  # v4, by Dagster
    lance_format.write_dataset(pa.table({"m": [9]}), uri, mode="append")  # v5, outside
    second = sensor_def(build_sensor_context(instance=instance, definitions=defs, cursor=first.cursor))
    assert [o.tags["dagster/data_version"] for o in second.asset_events] == ["5"]
    third = sensor_def(build_sensor_context(instance=instance, definitions=defs, cursor=second.cursor))
    assert third.asset_events == []

    for event in obs:  # the events are valid observations for the instance
        instance.report_runless_asset_event(event)
    latest = instance.fetch_observations(AssetKey("metrics"), limit=10).records
    assert {r.asset_observation.tags["dagster/data_version"] for r in latest} == {"2", "3"}


def test_sensor_skips_datasets_not_written_yet(root: str, instance: DagsterInstance) -> None:
    sensor_def = build_lance_observation_sensor({"ghost": f"{root}/nowhere.lance"})
    result = sensor_def(build_sensor_context(instance=instance))
    assert result.asset_events == []


def test_observable_source_asset_reports_the_latest_version(tmp_path: object, instance: DagsterInstance) -> None:
    uri = f"{tmp_path}/external.lance"
    lance_format.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    lance_format.write_dataset(pa.table({"x": [4]}), uri, mode="append")
    source = lance_observable_source_asset("external", uri=uri)
    defs = Definitions(assets=[source])
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.execute_in_process(instance=instance).success
    record = instance.fetch_observations(AssetKey("external"), limit=1).records[0]
    observed = record.asset_observation
    assert observed.tags["dagster/data_version"] == "2"
    assert observed.metadata["dagster/row_count"].value == 4
    assert observed.metadata["lance/operation"].value == "Append"
