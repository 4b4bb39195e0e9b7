"""Loads do not pass for materializations (issue 26 item 5): the metadata of a LOADED_INPUT event, which
Dagster also records as an observation of the upstream asset (or partition), uses ``lance/input_*`` keys
only, so the asset's state in the UI (summary, version, URI) stays the materialization's."""

import datetime as dt
from typing import Any

import pyarrow as pa
from dagster import (
    AssetIn,
    AssetKey,
    DagsterInstance,
    DailyPartitionsDefinition,
    asset,
    materialize,
)

from lance_dagster import LanceIOManager

DAYS = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-03")
MATERIALIZATION_KEYS = {"lance/summary", "lance/version", "lance/read_version", "dagster/uri",
                        "lance/latest_version", "lance/operation"}


@asset(partitions_def=DAYS, metadata={"partition_expr": "day", "mode": "overwrite"})
def visits(context) -> pa.Table:  # type: ignore[no-untyped-def]
    day = dt.date.fromisoformat(context.partition_key)
    return pa.table({"day": pa.array([day] * 2, pa.date32()), "n": [1, 2]})


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def visit_totals(visits: pa.Table) -> pa.Table:
    return visits.group_by("day").aggregate([("n", "sum")])


@asset(metadata={"mode": "append"})
def signups() -> pa.Table:
    return pa.table({"id": [1, 2]})


@asset(ins={"signups": AssetIn(metadata={"version": 1})})
def first_signups(signups: pa.Table) -> pa.Table:
    return signups


def _observations(result: Any, key: str) -> list[Any]:
    """The observations of ``key`` a run stored (Dagster makes one of each load's metadata)."""
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
            and e.event_specific_data.asset_observation.asset_key == AssetKey(key)]


def test_loaded_input_uses_input_keys_and_leaves_the_partition_state_alone(root: str,
                                                                           instance: DagsterInstance) -> None:
    resources = {"io_manager": LanceIOManager(root_uri=root)}
    materialize([visits], partition_key="2026-01-01", resources=resources, instance=instance)
    materialize([visits], partition_key="2026-01-02", resources=resources, instance=instance)
    result = materialize([visits, visit_totals], partition_key="2026-01-01", selection=[visit_totals],
                         resources=resources, instance=instance)
    loaded = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    md = {k: v.value for k, v in loaded[0].event_specific_data.metadata.items()}
    assert not MATERIALIZATION_KEYS & set(md)
    assert md["lance/input_version"] == "2" and md["lance/input_latest_version"] == "2"
    assert md["lance/input_summary"] == "Read v2 (latest)"
    assert md["lance/input_uri"] == f"{root}/visits.lance"
    # Dagster records the load as an observation of the upstream partition: it names the read only
    observed = _observations(result, "visits")
    assert [o.partition for o in observed] == ["2026-01-01"]
    assert not MATERIALIZATION_KEYS & set(observed[0].metadata)
    # the partition's materialization still tells its state
    latest = instance.get_latest_materialization_event(AssetKey("visits"))
    assert latest is not None and latest.asset_materialization is not None
    assert latest.asset_materialization.metadata["lance/summary"].value.startswith("Lance v2 ·")


def test_a_pinned_load_is_labelled_as_pinned(root: str, instance: DagsterInstance) -> None:
    resources = {"io_manager": LanceIOManager(root_uri=root)}
    for _ in range(2):
        materialize([signups], resources=resources, instance=instance)
    result = materialize([signups, first_signups], selection=[first_signups], resources=resources,
                         instance=instance)
    loaded = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    md = {k: v.value for k, v in loaded[0].event_specific_data.metadata.items()}
    assert md["lance/input_summary"] == "Read v1 of 2 (pinned)"
    assert md["lance/input_pinned_version"] == "1"
    assert not MATERIALIZATION_KEYS & set(md)
    observed = _observations(result, "signups")
    assert len(observed) == 1 and not MATERIALIZATION_KEYS & set(observed[0].metadata)
