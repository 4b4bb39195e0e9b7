"""The YAML component's maintenance settings are its job's run config defaults (issue 26 item 6): a run
launched by hand, without run config, maintains as the schedule and the health sensor do."""

from __future__ import annotations

import textwrap

import pyarrow as pa
import pytest
from dagster import DagsterInstance, build_schedule_context
from dagster.components.testing.utils import component_defs

import lance_format
from lance_dagster.components import LanceDatasetsComponent
from lance_dagster.maintenance import build_lance_maintenance_job

from .helpers import by_step, values


def _component(root: str, commit_grace: str = "0s") -> LanceDatasetsComponent:
    return LanceDatasetsComponent.resolve_from_yaml(textwrap.dedent(f"""
        root_uri: {root}
        datasets:
          - asset_key: clicks
        maintenance:
          runner: local
          compaction:
            target_rows_per_fragment: 1000
          cleanup:
            older_than: 0s
            retain_versions: 2
            commit_grace: {commit_grace}
    """))


def _seed(root: str, appends: int = 4) -> str:
    uri = f"{root}/clicks.lance"
    for i in range(appends):
        lance_format.write_dataset(pa.table({"id": [i]}), uri, mode="append" if i else "create")
    return uri


def test_a_run_launched_without_config_uses_the_yaml_settings(root: str, instance: DagsterInstance) -> None:
    uri = _seed(root)
    defs = component_defs(component=_component(root))
    job = defs.resolve_job_def("lance_maintenance")
    result = job.execute_in_process(instance=instance)  # as launched by hand: no run config
    assert result.success
    run = instance.get_run_by_id(result.run_id)
    assert run is not None and not run.run_config.get("cleanup")
    steps = by_step(result, "clicks")
    assert values(steps["compaction"])["lance/fragments_after"] == 1  # 4 small fragments → one
    cleanup = values(steps["cleanup"])
    ds = lance_format.dataset(uri)
    # retain_versions 2, older_than 0s, commit grace 0s: everything but the newest two versions goes
    assert [v["version"] for v in ds.versions()] == [ds.version - 1, ds.version]
    assert cleanup["lance/versions_removed"] == ds.version - 2
    # the schedule and the health sensor send the same settings
    schedule = defs.resolve_schedule_def("lance_maintenance_schedule")
    tick = schedule.evaluate_tick(build_schedule_context(instance=instance))
    assert tick.run_requests and tick.run_requests[0].run_config["cleanup"]["retain_versions"] == 2


def test_the_launchpad_defaults_are_the_yaml_settings(root: str) -> None:
    job = component_defs(component=_component(root, commit_grace="90s")).resolve_job_def("lance_maintenance")
    fields = job.run_config_schema.config_type.fields  # type: ignore[attr-defined]
    assert fields["runner"].default_value == "local"
    cleanup = fields["cleanup"].config_type.fields
    assert (cleanup["older_than"].default_value, cleanup["retain_versions"].default_value,
            cleanup["commit_grace"].default_value) == ("0s", 2, "90s")
    assert fields["compaction"].config_type.fields["target_rows_per_fragment"].default_value == 1000


def test_explicit_run_config_still_wins_and_bad_defaults_fail_at_load(root: str, instance: DagsterInstance) -> None:
    uri = _seed(root, appends=3)
    job = component_defs(component=_component(root)).resolve_job_def("lance_maintenance")
    result = job.execute_in_process(instance=instance, run_config={"cleanup": {"retain_versions": 10}})
    assert result.success
    assert len(lance_format.dataset(uri).versions()) == 5  # 3 appends + reserve + rewrite, all kept
    with pytest.raises(Exception, match="retain_versions"):
        build_lance_maintenance_job("bad", dataset_uris=[uri], config_defaults={"cleanup": {"retain_versions": 0}})


def test_cleanup_commit_grace_keeps_recent_versions(root: str, instance: DagsterInstance) -> None:
    uri = _seed(root)
    job = component_defs(component=_component(root)).resolve_job_def("lance_maintenance")
    # the job's default grace is the YAML's 0s; a run asking for the library default keeps them all
    result = job.execute_in_process(instance=instance, run_config={"cleanup": {"commit_grace": "5m"}})
    assert result.success
    assert values(by_step(result, "clicks")["cleanup"])["lance/versions_removed"] == 0
    assert len(lance_format.dataset(uri).versions()) == 6
