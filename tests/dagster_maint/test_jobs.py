"""build_lance_maintenance_job: compaction → indices → cleanup recorded on the maintained asset."""

from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterConfigMappingFunctionError, DagsterInstance, Definitions, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.maintenance import (
    MAINTENANCE_TAG,
    build_lance_maintenance_job,
    targets_from_job,
)
from lance_dagster.observe import external_commits
from lance_format.cleanup import COMMIT_GRACE_ENV

from .helpers import appending_asset, by_step, observations, values

LOCAL = {"runner": "local"}


def _materialize(assets: list, io_manager: LanceIOManager, instance: DagsterInstance, times: int) -> None:
    for _ in range(times):
        assert materialize(assets, resources={"io_manager": io_manager}, instance=instance).success


def test_compaction_is_recorded_on_the_asset_with_its_metrics(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    _materialize([events], io_manager, instance, 4)
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    result = job.execute_in_process(instance=instance, run_config=LOCAL)
    assert result.success
    steps = by_step(result, "events")
    compaction = values(steps["compaction"])
    ds = lance_format.dataset(f"{root}/events.lance")
    assert steps["compaction"].description == f"Lance v{ds.version} · Compaction · 4 → 1 fragments"
    assert compaction["lance/version"] == str(ds.version)
    assert (compaction["lance/fragments_before"], compaction["lance/fragments_after"]) == (4, 1)
    assert (compaction["lance/files_removed"], compaction["lance/files_added"]) == (4, 1)
    assert compaction["lance/rows_rewritten"] == 12 == ds.count_rows()
    assert compaction["lance/indices_remapped"] == 0
    assert compaction["lance/duration_s"] >= 0
    assert compaction["lance/run"] == f"/runs/{result.run_id}"
    assert "Compaction" in compaction["lance/last_maintenance"]
    # Versions are identifiers (text); only quantities are numbers the UI plots.
    numeric = {k for k, v in steps["compaction"].metadata.items() if type(v).__name__ in ("IntMetadataValue",
                                                                                         "FloatMetadataValue")}
    assert not any("version" in k for k in numeric)
    assert sorted(ds.to_table()["id"].to_pylist()) == [100, 101, 102, 200, 201, 202, 300, 301, 302, 400, 401, 402]
    # the Rewrite commit itself names the maintenance run, as a materialization's commit does
    props = ds.read_transaction(int(compaction["lance/version"])).transaction_properties
    assert props["dagster/run_id"] == result.run_id
    # ... and so does the ReserveFragments commit before it: neither is "outside Dagster"
    reserve = ds.read_transaction(int(compaction["lance/version"]) - 1)
    assert reserve.operation.kind == "reserve_fragments"
    assert reserve.transaction_properties == props
    assert not external_commits(ds, after=4, limit=100)


def test_every_step_is_an_op_in_the_dataset_pool(lance: LanceResource) -> None:
    events, other = appending_asset("events"), appending_asset("other")
    job = build_lance_maintenance_job("maint", assets=[events, other], selection=["events", "other"],
                                      lance=lance)
    pools = {node.name: node.definition.pool for node in job.graph.nodes}
    assert pools == {
        "compact__events": "lance_maintenance_events",
        "optimize_indices__events": "lance_maintenance_events",
        "cleanup__events": "lance_maintenance_events",
        "compact__other": "lance_maintenance_other",
        "optimize_indices__other": "lance_maintenance_other",
        "cleanup__other": "lance_maintenance_other",
    }
    assert job.tags[MAINTENANCE_TAG] == "true"
    assert [t.asset_key for t in targets_from_job(job)] == [AssetKey("events"), AssetKey("other")]


def test_datasets_config_restricts_the_run(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events, other = appending_asset("events"), appending_asset("other")
    _materialize([events, other], io_manager, instance, 3)
    job = build_lance_maintenance_job("maint", assets=[events, other], selection=["events", "other"],
                                      lance=lance)
    result = job.execute_in_process(instance=instance, run_config={**LOCAL, "datasets": ["other"]})
    assert result.success
    assert observations(result, "events") == []
    assert len(lance_format.dataset(f"{root}/events.lance").get_fragments()) == 3
    assert len(lance_format.dataset(f"{root}/other.lance").get_fragments()) == 1
    with pytest.raises(DagsterConfigMappingFunctionError) as err:
        job.execute_in_process(instance=instance, run_config={**LOCAL, "datasets": ["nope"]})
    assert "['nope'] are not maintained by this job" in str(err.value.__cause__)


def test_dry_run_changes_nothing_and_reports_what_a_real_run_does(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")  # versions superseded seconds ago go despite the commit grace
    events = appending_asset()
    _materialize([events], io_manager, instance, 4)
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    config = {**LOCAL, "cleanup": {"older_than": "0s", "retain_versions": 2}}
    before = lance_format.dataset(f"{root}/events.lance")
    dry = job.execute_in_process(instance=instance, run_config={**config, "dry_run": True})
    after_dry = lance_format.dataset(f"{root}/events.lance")
    assert (after_dry.version, len(after_dry.versions())) == (before.version, len(before.versions()))
    planned = values(by_step(dry, "events")["cleanup"])
    assert planned["lance/dry_run"] is True
    assert planned["lance/removed_versions"] == "v1, v2"
    assert by_step(dry, "events")["compaction"].description.endswith("would rewrite 4 of 4 fragments")

    # With compaction off, the real cleanup removes exactly what the dry run listed.
    config["compaction"] = {"enabled": False}
    real = job.execute_in_process(instance=instance, run_config=config)
    done = values(by_step(real, "events")["cleanup"])
    assert done["lance/removed_versions"] == planned["lance/removed_versions"]
    assert done["lance/removed_files"] == planned["lance/removed_files"]
    assert done["lance/bytes_reclaimed"] == planned["lance/bytes_reclaimed"]


def test_job_takes_lance_and_spark_from_definitions(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance) -> None:
    from lance_dagster.maintenance import lance_pyspark_resource

    events = appending_asset()
    _materialize([events], io_manager, instance, 2)
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"])
    defs = Definitions(assets=[events], jobs=[job], resources={
        "io_manager": io_manager, "lance": lance, "lance_pyspark": lance_pyspark_resource("local[1]")})
    result = defs.resolve_job_def("maint").execute_in_process(instance=instance, run_config=LOCAL)
    assert result.success and by_step(result, "events")["compaction"].description.endswith("2 → 1 fragments")


def test_bare_dataset_uris_are_maintained(tmp_path, instance: DagsterInstance) -> None:
    uri = str(tmp_path / "loose.lance")
    from .conftest import batch

    for i in range(3):
        lance_format.write_dataset(batch(i * 10), uri, mode="append" if i else "create")
    job = build_lance_maintenance_job("maint", dataset_uris=[uri], lance=LanceResource(root_uri=str(tmp_path)))
    assert job.execute_in_process(instance=instance, run_config=LOCAL).success
    assert len(lance_format.dataset(uri).get_fragments()) == 1


def test_nothing_selected_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        build_lance_maintenance_job("maint")


def test_indices_are_remapped_or_brought_up_to_date(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    _materialize([events], io_manager, instance, 2)
    lance_format.dataset(f"{root}/events.lance").create_scalar_index("id", "BTREE")
    _materialize([events], io_manager, instance, 2)  # two fragments the index does not cover yet
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    dry = job.execute_in_process(instance=instance, run_config={**LOCAL, "dry_run": True})
    assert by_step(dry, "events")["index"].description.endswith("would update id_idx")
    result = job.execute_in_process(instance=instance, run_config={
        **LOCAL, "compaction": {"defer_index_remap": True}})
    assert result.success
    steps = by_step(result, "events")
    assert values(steps["compaction"])["lance/indices_remapped"] >= 0
    index = values(steps["index"])
    assert steps["index"].description.startswith(f"Lance v{index['lance/version']} · Optimize indices")
    ds = lance_format.dataset(f"{root}/events.lance")
    assert ds.count_rows() == 12
    assert ds.to_table(filter="id = 401")["id"].to_pylist() == [401]
    assert not any(str(i.name) == "__lance_frag_reuse" for i in ds.manifest.indices)
