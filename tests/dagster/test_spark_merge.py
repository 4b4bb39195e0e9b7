"""Spark DataFrame outputs with mode 'merge' and schema_mode 'merge' (issue 26 item 8): the executors write
the rows, the driver commits one version, and the table ends as a local ``merge_insert`` would leave it."""

from typing import Any

import pytest
from dagster import AssetExecutionContext, DagsterInstance, StaticPartitionsDefinition, asset, materialize

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.lineage import RUN_ID

pytestmark = pytest.mark.slow
pyspark = pytest.importorskip("pyspark")

REGIONS = StaticPartitionsDefinition(["eu", "us"])
ROWS: dict[str, Any] = {}


def _frame(rows: list[tuple], ddl: str) -> Any:  # type: ignore[type-arg]
    return pyspark.sql.SparkSession.getActiveSession().createDataFrame(rows, ddl).repartition(2)


@asset(metadata={"mode": "merge", "merge_on": ["id"]})
def customers() -> Any:
    return _frame(ROWS["customers"], ROWS.get("ddl", "id long, name string"))


@asset(metadata={"mode": "merge", "merge_on": ["region", "id"], "when_matched_update": False})
def first_seen() -> Any:
    return _frame(ROWS["first_seen"], "region string, id long, name string")


@asset(partitions_def=REGIONS, metadata={"partition_expr": "region", "mode": "merge", "merge_on": ["region", "id"],
                                         "when_not_matched_by_source_delete": True})
def members(context: AssetExecutionContext) -> Any:
    return _frame([(context.partition_key, i, f"{context.partition_key}{i}") for i in ROWS["members"]],
                  "region string, id long, name string")


def _run(assets: list[Any], root: str, instance: DagsterInstance, ok: bool = True, **kwargs: Any) -> Any:
    result = materialize(assets, resources={"io_manager": LanceIOManager(root_uri=root)}, instance=instance,
                         raise_on_error=False, **kwargs)
    assert result.success is ok, result.get_step_failure_events()
    return result


def _rows(uri: str) -> list[tuple]:  # type: ignore[type-arg]
    table = lance_format.dataset(uri).to_table()
    lance = pytest.importorskip("lance")
    key = [(n, "ascending") for n in table.column_names]
    assert lance.dataset(uri).to_table().sort_by(key).equals(table.sort_by(key))
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_spark_upsert_is_one_commit(spark: Any, root: str, instance: DagsterInstance) -> None:
    ROWS["customers"] = [(1, "ann"), (2, "bob"), (3, "cid")]
    _run([customers], root, instance)
    ROWS["customers"] = [(2, "BOB"), (4, "dan")]
    result = _run([customers], root, instance)
    uri = f"{root}/customers.lance"
    assert _rows(uri) == [(1, "ann"), (2, "BOB"), (3, "cid"), (4, "dan")]
    ds = lance_format.dataset(uri)
    assert ds.version == 2 and ds.read_transaction(2).transaction_properties[RUN_ID] == result.run_id
    mat = result.get_asset_materialization_events()[0].materialization
    assert mat.metadata["lance/rows_deleted"].value == 1
    ROWS["customers"] = [(5, "eve"), (5, "eva")]
    error = str(_run([customers], root, instance, ok=False).get_step_failure_events()[0].event_specific_data.error)
    assert "found key(s) ['id'] more than once in the data, e.g. [5]" in error
    assert lance_format.dataset(uri).version == 2


def test_spark_schema_merge_adds_columns_and_widens(spark: Any, root: str, instance: DagsterInstance) -> None:
    ROWS["customers"], ROWS["ddl"] = [(1, "ann")], "id long, name string"
    _run([customers], root, instance)
    # a new column, no 'name', and an upsert: schema_mode merge evolves the table first
    ROWS["customers"], ROWS["ddl"] = [(1, 30), (2, 40)], "id long, age int"
    io = LanceIOManager(root_uri=root, schema_mode="merge")
    assert materialize([customers], resources={"io_manager": io}, instance=instance).success
    uri = f"{root}/customers.lance"
    assert lance_format.dataset(uri).schema.names == ["id", "name", "age"]
    assert _rows(uri) == [(1, None, 30), (2, None, 40)]
    ROWS.pop("ddl")


def test_spark_insert_only_and_delete_by_source(spark: Any, root: str, instance: DagsterInstance) -> None:
    ROWS["first_seen"] = [("eu", 1, "a"), ("us", 1, "b")]
    _run([first_seen], root, instance)
    ROWS["first_seen"] = [("eu", 1, "changed"), ("eu", 2, "c")]  # composite key: only (eu, 2) is new
    _run([first_seen], root, instance)
    assert _rows(f"{root}/first_seen.lance") == [("eu", 1, "a"), ("eu", 2, "c"), ("us", 1, "b")]

    for key, ids in (("eu", [1, 2, 3]), ("us", [1, 2]), ("eu", [2, 4])):
        ROWS["members"] = ids
        _run([members], root, instance, partition_key=key)
    # eu: 1 and 3 were absent from the last source, so deleted; us untouched
    assert _rows(f"{root}/members.lance") == [("eu", 2, "eu2"), ("eu", 4, "eu4"), ("us", 1, "us1"),
                                               ("us", 2, "us2")]
