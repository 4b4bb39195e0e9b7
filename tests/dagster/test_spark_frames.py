"""Spark DataFrames: executors write the fragments, the IO manager commits once; inputs are read by Spark."""

from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    AssetIn,
    DagsterInstance,
    DailyPartitionsDefinition,
    StaticPartitionsDefinition,
    TableColumn,
    TableSchema,
    TimeWindowPartitionMapping,
    asset,
    materialize,
)
from dg_helpers import materialization, meta

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.lineage import RUN_ID

pytestmark = pytest.mark.slow
pyspark = pytest.importorskip("pyspark")

REGIONS = StaticPartitionsDefinition(["eu", "us"])
SEEN: dict[str, Any] = {}


@asset(partitions_def=REGIONS, metadata={"partition_expr": "region"})
def visits(context: AssetExecutionContext) -> Any:
    spark = pyspark.sql.SparkSession.getActiveSession()
    n = SEEN.get("n", 1)
    rows = [(context.partition_key, i * n) for i in range(4)]
    return spark.createDataFrame(rows, "region string, hits long").repartition(2)


def test_partitioned_spark_writes_are_one_commit_each(spark: Any, root: str, io_manager: LanceIOManager,
                                                      instance: DagsterInstance) -> None:
    resources = {"io_manager": io_manager}
    for n, key in ((1, "eu"), (1, "us"), (10, "eu")):
        SEEN["n"] = n
        result = materialize([visits], partition_key=key, resources=resources, instance=instance)
        assert result.success
    uri = f"{root}/visits.lance"
    ds = lance_format.dataset(uri)
    assert ds.version == 3
    rows = sorted((r["region"], r["hits"]) for r in ds.to_table().to_pylist())
    assert rows == [("eu", 0), ("eu", 10), ("eu", 20), ("eu", 30), ("us", 0), ("us", 1), ("us", 2), ("us", 3)]
    txn = ds.read_transaction(3)
    assert txn.operation.kind == "update" and txn.transaction_properties[RUN_ID] == result.run_id
    assert len(txn.operation.new_fragments) == 2  # one per Spark task
    assert meta(materialization(result, "visits"))["lance/rows_deleted"] == 4
    lance = pytest.importorskip("lance")
    for version in (1, 2, 3):
        a = lance_format.dataset(uri, version=version).to_table().sort_by([("region", "ascending"),
                                                                            ("hits", "ascending")])
        b = lance.dataset(uri, version=version).to_table().sort_by([("region", "ascending"), ("hits", "ascending")])
        assert a.equals(b)


def test_spark_input_prunes_columns_and_filters_the_partition(spark: Any, root: str, io_manager: LanceIOManager,
                                                              instance: DagsterInstance) -> None:
    @asset(partitions_def=REGIONS, ins={"visits": AssetIn(metadata={"columns": ["hits"]})},
           metadata={"partition_expr": "region"})
    def region_hits(context: AssetExecutionContext, visits: pyspark.sql.DataFrame) -> pa.Table:
        SEEN["columns"] = visits.columns
        total = visits.groupBy().sum("hits").collect()[0][0]
        return pa.table({"region": [context.partition_key], "total": [total]})

    resources = {"io_manager": io_manager}
    SEEN["n"] = 1
    for key in ("eu", "us"):
        materialize([visits], partition_key=key, resources=resources, instance=instance)
    result = materialize([visits, region_hits], selection=[region_hits], partition_key="us",
                         resources=resources, instance=instance)
    assert result.success and SEEN["columns"] == ["hits"]
    assert lance_format.dataset(f"{root}/region_hits.lance").to_table().to_pylist() == [{"region": "us",
                                                                                          "total": 6}]


def test_spark_rows_outside_the_partition_write_nothing(spark: Any, root: str, io_manager: LanceIOManager,
                                                        instance: DagsterInstance) -> None:
    @asset(name="visits", partitions_def=REGIONS, metadata={"partition_expr": "region"})
    def leaky(context: AssetExecutionContext) -> Any:
        return spark.createDataFrame([("eu", 1), ("us", 2)], "region string, hits long")

    result = materialize([leaky], partition_key="eu", resources={"io_manager": io_manager}, instance=instance,
                         raise_on_error=False)
    assert not result.success
    assert "1 rows are outside the partition" in str(result.get_step_failure_events()[0].event_specific_data.error)
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(f"{root}/visits.lance")


DAYS_SPARK = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-04")


@asset(partitions_def=DAYS_SPARK,
       ins={"running": AssetIn(partition_mapping=TimeWindowPartitionMapping(
           start_offset=-1, end_offset=-1))},
       metadata={"partition_expr": "day",
                 "dagster/column_schema": TableSchema(columns=[
                     TableColumn("day", "string"),
                     TableColumn("total", "int64")])})
def running(context: AssetExecutionContext, running: pyspark.sql.DataFrame) -> pyspark.sql.DataFrame:
    """A self-dependent Spark asset: yesterday's total plus one."""
    SEEN.setdefault("running", []).append((running.count(), running.schema.simpleString()))
    rows = running.collect()
    before = rows[0]["total"] if rows else 0
    spark = pyspark.sql.SparkSession.getActiveSession()
    return spark.createDataFrame([(context.partition_key, before + 1)], "day string, total long")


def test_self_dependent_spark_asset_first_partition_reads_an_empty_frame(spark: Any, root: str,
                                                                         io_manager: LanceIOManager,
                                                                         instance: DagsterInstance) -> None:
    SEEN.pop("running", None)
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        assert materialize([running], partition_key=day, resources={"io_manager": io_manager},
                           instance=instance).success
    seen = SEEN["running"]
    # first partition: nothing written yet, an empty DataFrame of the declared schema; then yesterday's row
    assert seen[0] == (0, "struct<day:string,total:bigint>")
    assert [count for count, _ in seen[1:]] == [1, 1]
    table = lance_format.dataset(f"{root}/running.lance").to_table().sort_by("day")
    assert table.column("total").to_pylist() == [1, 2, 3]
