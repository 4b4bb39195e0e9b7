"""Health defaults scale with the table and cover index coverage (issue 26 item 7): a small table gets no
compaction advice from the check or the sensor; unindexed rows per index (every kind) are in the check,
the sensor's reasons and the asset's metadata."""

from __future__ import annotations

from typing import Any

import lance as pylance
import numpy as np
import pyarrow as pa
from dagster import AssetSelection, DagsterInstance, Definitions, asset, build_sensor_context, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.checks import HealthLimits, build_lance_asset_checks
from lance_dagster.maintenance import HealthThresholds, build_lance_health_sensor, build_lance_maintenance_job

DATA: dict[str, pa.Table] = {}


@asset(metadata={"mode": "append"})
def tiny() -> pa.Table:
    return DATA["tiny"]


@asset(metadata={"mode": "merge", "merge_on": "id"})
def people() -> pa.Table:
    return DATA["people"]


def _check(result: Any) -> Any:
    return next(e for e in result.get_asset_check_evaluations() if e.check_name == "lance_maintenance")


def _sensor_reasons(job: Any, instance: DagsterInstance, defs: Definitions, **kwargs: Any) -> list[str]:
    sensor = build_lance_health_sensor(job, **kwargs)
    tick = sensor.evaluate_tick(build_sensor_context(instance=instance, definitions=defs))
    return [r.tags["lance/health_reasons"] for r in tick.run_requests]


def test_a_nine_row_table_in_three_fragments_is_healthy_by_default(
        io_manager: LanceIOManager, instance: DagsterInstance, root: str) -> None:
    checks = build_lance_asset_checks([tiny], root_uri=root)
    resources = {"io_manager": io_manager}
    for start in (0, 3, 6):
        DATA["tiny"] = pa.table({"id": list(range(start, start + 3))})
        result = materialize([tiny, *checks], resources=resources, instance=instance)
    check = _check(result)
    assert check.passed, check.description
    assert "9 rows: below the 262,144-row minimum for compaction advice" in check.description
    assert check.metadata["lance/small_fragment_ratio"].value == 1.0  # measured, not advised on
    # a table of at least the minimum still gets the advice
    limits = HealthLimits(min_compaction_rows=9)
    checks = build_lance_asset_checks([tiny], root_uri=root, health=limits)
    again = materialize([tiny, *checks], resources=resources, instance=instance,
                        selection=AssetSelection.checks(*checks))
    assert "small-fragment ratio 1.00 > 0.50" in _check(again).description


def test_one_upsert_of_a_five_row_table_does_not_trigger_maintenance(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance) -> None:
    resources = {"io_manager": io_manager}
    DATA["people"] = pa.table({"id": [1, 2, 3, 4, 5], "name": list("abcde")})
    assert materialize([people], resources=resources, instance=instance).success
    DATA["people"] = pa.table({"id": [1, 2, 3], "name": list("ABC")})
    assert materialize([people], resources=resources, instance=instance).success  # 3 of 8 rows deleted
    job = build_lance_maintenance_job("maint", assets=[people], selection=["people"], lance=lance)
    defs = Definitions(assets=[people], jobs=[job], resources={"io_manager": io_manager})
    assert _sensor_reasons(job, instance, defs) == []
    # the same table counts once the minimum is lowered to its size
    reasons = _sensor_reasons(job, instance, defs, thresholds=HealthThresholds(min_compaction_rows=8))
    assert reasons and "deleted ratio 0.38 > 0.10" in reasons[0]


def test_unindexed_rows_per_index_of_every_kind(io_manager: LanceIOManager, lance: LanceResource,
                                                instance: DagsterInstance, root: str) -> None:
    n = 300
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.random.default_rng(0).random(n * 8, np.float32)), 8)
    DATA["tiny"] = pa.table({"id": list(range(n)), "cat": [str(i % 3) for i in range(n)],
                             "tags": [["a", "b"]] * n, "text": ["hello world"] * n, "vec": vectors})
    resources = {"io_manager": io_manager}
    assert materialize([tiny], resources=resources, instance=instance).success
    uri = f"{root}/tiny.lance"
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    ds.create_scalar_index("tags", "LABEL_LIST")
    theirs = pylance.dataset(uri)  # kinds only pylance builds: full-text and vector
    theirs.create_scalar_index("text", "INVERTED")
    theirs.create_index("vec", "IVF_PQ", num_partitions=1, num_sub_vectors=2)
    DATA["tiny"] = DATA["tiny"].slice(0, 7)
    checks = build_lance_asset_checks([tiny], root_uri=root, health=HealthLimits(max_unindexed_rows=5))
    result = materialize([tiny, *checks], resources=resources, instance=instance)
    names = ("cat_idx", "id_idx", "tags_idx", "text_idx", "vec_idx")
    # the materialization shows the coverage of each index
    mat = result.get_asset_materialization_events()[0].materialization.metadata
    assert mat["lance/unindexed_rows"].value == 7
    assert {name: mat[f"lance/unindexed_rows/{name}"].value for name in names} == dict.fromkeys(names, 7)
    # the check fails naming each index
    check = _check(result)
    assert not check.passed
    for name in names:
        assert f"index '{name}': 7 unindexed rows > 5" in check.description
        assert check.metadata[f"lance/unindexed_rows/{name}"].value == 7
    # the sensor requests maintenance for it (from the check's numbers)
    job = build_lance_maintenance_job("maint", assets=[tiny], selection=["tiny"], lance=lance)
    defs = Definitions(assets=[tiny], asset_checks=checks, jobs=[job], resources=resources)
    reasons = _sensor_reasons(job, instance, defs, thresholds=HealthThresholds(max_unindexed_rows=5))
    assert reasons and "7 unindexed rows > 5" in reasons[0]
    # the maintenance run folds the new rows into every index, pylance's full-text and vector ones
    # included (they gain a delta segment, as pylance's optimize_indices adds one)
    run = job.execute_in_process(instance=instance, run_config={"runner": "local"})
    assert run.success
    left = {k: v.value for k, v in _index_observation(run).items() if k.startswith("lance/unindexed_rows/")}
    assert left == {f"lance/unindexed_rows/{name}": 0 for name in names}
    after = pylance.dataset(uri)
    assert after.to_table(full_text_query="hello").num_rows == n + 7
    assert "ANN" in after.scanner(nearest={"column": "vec", "q": vectors[0].values.to_numpy(), "k": 3}).explain_plan()


def _index_observation(result: Any) -> Any:
    for event in result.all_events:
        if event.event_type_value == "ASSET_OBSERVATION":
            obs = event.event_specific_data.asset_observation
            if obs.metadata.get("lance/maintenance_step") and obs.metadata["lance/maintenance_step"].value == "index":
                return obs.metadata
    raise AssertionError("no index step observation")
