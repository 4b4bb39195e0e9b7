"""Two code locations share a root through a namespace (issue 26 item 8; dagster-iceberg's ``namespace``,
dagster-deltalake's ``schema``): the same asset key is two datasets, and checks, sensors, maintenance and
the YAML component find each location's own."""

import textwrap

import pyarrow as pa
from dagster import AssetSelection, DagsterInstance, Definitions, asset, build_sensor_context, materialize
from dagster.components.testing.utils import component_defs

import lance_format
from lance_dagster import (
    LanceIOManager,
    LanceResource,
    build_lance_asset_checks,
    build_lance_observation_sensor,
)
from lance_dagster.components import LanceDatasetsComponent
from lance_dagster.maintenance import build_lance_maintenance_job

SEEN: list[list[str]] = []


def _location(team: str) -> tuple:  # type: ignore[type-arg]
    @asset(name="events", metadata={"mode": "append"})
    def events() -> pa.Table:
        return pa.table({"team": [team]})

    @asset(name="teams")
    def teams(events: pa.Table) -> pa.Table:
        SEEN.append(events.column("team").to_pylist())
        return events

    return events, teams


def test_same_asset_keys_in_two_namespaces_of_one_root(root: str, instance: DagsterInstance) -> None:
    for team in ("team_a", "team_b", "team_a"):
        events, teams = _location(team)
        io = LanceIOManager(root_uri=root, namespace=f"{team}/prod")
        assert materialize([events, teams], resources={"io_manager": io}, instance=instance).success
    a = lance_format.dataset(f"{root}/team_a/prod/events.lance")
    b = lance_format.dataset(f"{root}/team_b/prod/events.lance")
    assert a.to_table().column("team").to_pylist() == ["team_a", "team_a"]
    assert b.to_table().column("team").to_pylist() == ["team_b"]
    assert SEEN[-1] == ["team_a", "team_a"]  # the downstream load read its own namespace

    # checks, the observation sensor and maintenance look in the namespace too
    events, _ = _location("team_b")
    checks = build_lance_asset_checks([events], root_uri=root, namespace="team_b/prod", min_rows=1)
    result = materialize([events, *checks], selection=AssetSelection.checks(*checks), instance=instance,
                         resources={"io_manager": LanceIOManager(root_uri=root, namespace="team_b/prod")})
    rows = next(e for e in result.get_asset_check_evaluations() if e.check_name == "lance_row_count")
    assert rows.passed and rows.metadata["dagster/row_count"].value == 1
    lance_format.write_dataset(pa.table({"team": ["outside"]}), b.uri, mode="append")
    sensor = build_lance_observation_sensor(["events"], root_uri=root, namespace="team_b/prod")
    observed = sensor(build_sensor_context(instance=instance, definitions=Definitions(sensors=[sensor])))
    assert [o.tags["dagster/data_version"] for o in observed.asset_events] == ["2"]
    lance = LanceResource(root_uri=root, namespace="team_b/prod")
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    assert job.execute_in_process(instance=instance, run_config={"runner": "local"}).success
    assert len(lance_format.dataset(b.uri).manifest.fragments) == 1  # compacted
    assert len(lance_format.dataset(a.uri).manifest.fragments) == 2  # the other namespace untouched


def test_component_namespace(root: str) -> None:
    component = LanceDatasetsComponent.resolve_from_yaml(textwrap.dedent(f"""
        root_uri: {root}
        namespace: team_a
        datasets:
          - asset_key: ref/countries
    """))
    specs = component_defs(component=component).resolve_all_asset_specs()
    assert [s.metadata["dagster/uri"].value for s in specs] == [f"{root}/team_a/ref/countries.lance"]
