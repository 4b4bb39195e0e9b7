"""build_lance_asset_checks: schema, row-count and maintenance-health checks in real runs."""

from typing import Any

import pyarrow as pa
from dagster import AssetCheckSeverity, AssetKey, AssetSelection, DagsterInstance, asset, materialize

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.checks import HealthLimits, build_lance_asset_checks

DATA: dict[str, pa.Table] = {}


@asset(metadata={"mode": "append", "schema_mode": "merge"})
def readings() -> pa.Table:
    return DATA["readings"]


def _evaluations(result: Any) -> dict[str, Any]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_checks_report_schema_rows_and_health(root: str, io_manager: LanceIOManager,
                                              instance: DagsterInstance) -> None:
    checks = build_lance_asset_checks(
        [readings], root_uri=root, schema="unchanged", min_rows=1, max_rows=5,
        # min_compaction_rows=1: compaction advice for this tiny table too (by default it starts at 10 rows here)
        health=HealthLimits(max_fragments=2, small_fragment_rows=10, max_deleted_ratio=0.2, max_versions=10,
                            min_compaction_rows=1),
    )
    resources = {"io_manager": io_manager}
    DATA["readings"] = pa.table({"v": [1, 2, 3]})
    first = _evaluations(materialize([readings, *checks], resources=resources, instance=instance))
    assert set(first) == {"lance_schema", "lance_row_count", "lance_maintenance"}
    assert all(e.passed for e in first.values())
    health = {k: v.value for k, v in first["lance_maintenance"].metadata.items()}
    assert health == {"lance/fragment_count": 1, "lance/small_fragment_count": 1, "lance/small_fragment_ratio": 1.0,
                      "lance/deleted_ratio": 0.0, "lance/unindexed_rows": 0, "lance/version_count": 1,
                      "lance/physical_rows": 3}

    DATA["readings"] = pa.table({"v": [4, 5, 6], "unit": ["c", "c", "c"]})  # adds a column, 6 rows, 3 fragments
    materialize([readings], resources=resources, instance=instance)
    lance_format.dataset(f"{root}/readings.lance").delete("v < 3")
    second = _evaluations(materialize([readings, *checks], resources=resources, instance=instance,
                                      selection=AssetSelection.checks(*checks)))
    assert not second["lance_schema"].passed  # "unchanged": the added column fails
    assert second["lance_row_count"].passed  # 4 live rows after the delete
    assert second["lance_row_count"].metadata["dagster/row_count"].value == 4
    assert second["lance_row_count"].severity == AssetCheckSeverity.ERROR
    maint = second["lance_maintenance"]
    assert not maint.passed and maint.severity == AssetCheckSeverity.WARN
    assert "deleted-row ratio 0.33 > 0.20" in maint.description  # 2 of 6 physical rows deleted
    assert "small-fragment ratio 1.00 > 0.50" in maint.description
    assert maint.metadata["lance/version_count"].value == lance_format.dataset(f"{root}/readings.lance").version


def test_compatible_schema_allows_added_columns(root: str, io_manager: LanceIOManager,
                                                instance: DagsterInstance) -> None:
    checks = build_lance_asset_checks(["readings"], root_uri=root, schema="compatible")
    DATA["readings"] = pa.table({"v": [1]})
    materialize([readings], resources={"io_manager": io_manager}, instance=instance)
    DATA["readings"] = pa.table({"v": [2], "unit": ["c"]})
    result = materialize([readings, *checks], resources={"io_manager": io_manager}, instance=instance)
    evaluations = _evaluations(result)
    assert evaluations["lance_schema"].passed
    assert evaluations["lance_schema"].metadata["lance/columns_added"].value == "unit"
    assert evaluations["lance_schema"].asset_key == AssetKey("readings")


def test_checks_of_an_unmaterialized_asset_warn(root: str, instance: DagsterInstance) -> None:
    checks = build_lance_asset_checks(["readings"], root_uri=root)
    result = materialize([readings, *checks], resources={"io_manager": LanceIOManager(root_uri=root)},
                         instance=instance, selection=AssetSelection.checks(*checks))
    for evaluation in result.get_asset_check_evaluations():
        assert not evaluation.passed and "not been materialized" in evaluation.description
