"""Every commit a maintenance run makes names the run, the asset and the op (issue 26 item 2), so the
observation sensor records none of them as a commit made outside Dagster."""

from __future__ import annotations

import pyarrow as pa
from dagster import DagsterInstance, Definitions, asset, build_sensor_context, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource, build_lance_observation_sensor, version_history
from lance_dagster.lineage import ASSET_KEY, JOB_NAME, MAINTENANCE, OP, RUN_ID
from lance_dagster.maintenance import build_lance_maintenance_job
from lance_dagster.metadata import history_markdown

from .helpers import appending_asset


def test_compaction_and_index_commits_carry_run_asset_and_op(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    resources = {"io_manager": io_manager}
    assert materialize([events], resources=resources, instance=instance).success
    uri = f"{root}/events.lance"
    lance_format.dataset(uri).create_scalar_index("id", "BTREE")  # made outside Dagster (v2)
    for _ in range(3):
        assert materialize([events], resources=resources, instance=instance).success
    sensor = build_lance_observation_sensor(["events"], root_uri=root)
    defs = Definitions(assets=[events], sensors=[sensor], resources=resources)
    before = sensor(build_sensor_context(instance=instance, definitions=defs))
    assert [o.tags["dagster/data_version"] for o in before.asset_events] == ["2"]  # the index build only

    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    result = job.execute_in_process(instance=instance, run_config={"runner": "local"})
    assert result.success
    ds = lance_format.dataset(uri)
    made = {v: ds.read_transaction(v) for v in range(6, ds.version + 1)}
    kinds = [type(t.operation).__name__ for t in made.values()]
    assert "Rewrite" in kinds and "CreateIndex" in kinds, kinds
    for version, txn in made.items():
        props = txn.transaction_properties
        assert props[RUN_ID] == result.run_id, version
        assert props[ASSET_KEY] == "events" and props[JOB_NAME] == "maint"
        step = "index" if type(txn.operation).__name__ == "CreateIndex" else "compaction"
        assert props[MAINTENANCE] == step
        assert props[OP] == ("optimize_indices__events" if step == "index" else "compact__events")
    assert ds.stats.index_stats("id_idx").num_unindexed_rows == 0

    # the sensor attributes them to the maintenance run: nothing new is "outside Dagster"
    after = sensor(build_sensor_context(instance=instance, definitions=defs, cursor=before.cursor))
    assert after.asset_events == []
    # and the history every event shows links them to that run, labelled by step
    history = str(history_markdown(version_history(ds, limit=10)).value)
    assert "external" not in history.split("| v2 |")[0]
    assert f"[{result.run_id[:8]}](/runs/{result.run_id})" in history
    assert "Compaction (reserve ids)" in history and "| Index |" in history


def test_materializations_carry_the_op_too(io_manager: LanceIOManager, lance: LanceResource,
                                           instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    props = lance_format.dataset(f"{root}/events.lance").read_transaction(1).transaction_properties
    assert props[OP] == "events" and props[ASSET_KEY] == "events"

    @asset(name="direct")
    def direct(context) -> None:  # type: ignore[no-untyped-def]
        lance.write("direct", pa.table({"x": [1]}), context=context)

    assert materialize([direct], instance=instance).success
    props = lance_format.dataset(f"{root}/direct.lance").read_transaction(1).transaction_properties
    assert (props[OP], props[ASSET_KEY]) == ("direct", "direct")
