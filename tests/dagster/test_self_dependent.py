"""Self-dependent partitioned assets (issue 26 item 3): the first partition reads its previous
partition, which does not exist, as an empty frame of the declared schema (or of the dataset's
schema once the dataset exists), as Dagster's DbIOManager integrations do."""

import datetime as dt
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    AssetIn,
    DagsterInstance,
    DailyPartitionsDefinition,
    TableColumn,
    TableSchema,
    TimeWindowPartitionMapping,
    asset,
    materialize,
)

import lance_format
from lance_dagster import LanceIOManager

DAYS = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")
PREVIOUS_DAY = TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)
SEEN: list[Any] = []


@asset(partitions_def=DAYS, ins={"totals": AssetIn(partition_mapping=PREVIOUS_DAY)},
       metadata={"partition_expr": "day",
                 "dagster/column_schema": TableSchema(columns=[TableColumn("day", "date32[day]"),
                                                              TableColumn("total", "int64")])})
def totals(context: AssetExecutionContext, totals: pa.Table) -> pa.Table:
    """A running total: yesterday's total plus one."""
    SEEN.append(totals)
    day = dt.date.fromisoformat(context.partition_key)
    before = totals.column("total").to_pylist()[0] if totals.num_rows else 0
    return pa.table({"day": pa.array([day], pa.date32()), "total": pa.array([before + 1], pa.int64())})


@asset(partitions_def=DAYS, ins={"counts": AssetIn(partition_mapping=PREVIOUS_DAY)},
       metadata={"partition_expr": "day"})
def counts(context: AssetExecutionContext, counts: pd.DataFrame) -> pd.DataFrame:
    """The same with pandas and no declared schema."""
    SEEN.append(counts)
    before = int(counts["n"].iloc[0]) if len(counts) else 0
    return pd.DataFrame({"day": [pd.Timestamp(context.partition_key)], "n": [before + 10]})


@asset(partitions_def=DAYS, ins={"lazy": AssetIn(partition_mapping=PREVIOUS_DAY)},
       metadata={"partition_expr": "day",
                 "dagster/column_schema": TableSchema(columns=[TableColumn("day", "timestamp[us]"),
                                                              TableColumn("tags", "list<item: string>")])})
def lazy(context: AssetExecutionContext, lazy: pl.LazyFrame) -> pl.DataFrame:
    """A polars LazyFrame input."""
    frame = lazy.collect()
    SEEN.append(frame)
    day = dt.datetime.fromisoformat(context.partition_key)
    return pl.DataFrame({"day": [day], "tags": [[f"n{frame.height}"]]},
                        schema={"day": pl.Datetime("us"), "tags": pl.List(pl.String)})


def _run(asset_def: Any, day: str, root: str, instance: DagsterInstance) -> Any:
    result = materialize([asset_def], partition_key=day, instance=instance,
                         resources={"io_manager": LanceIOManager(root_uri=root)})
    assert result.success
    return result


def test_first_partition_reads_an_empty_table_of_the_declared_schema(root: str, instance: DagsterInstance) -> None:
    SEEN.clear()
    _run(totals, "2026-01-01", root, instance)
    first = SEEN[-1]
    assert first.num_rows == 0
    assert first.schema == pa.schema([("day", pa.date32()), ("total", pa.int64())])
    _run(totals, "2026-01-02", root, instance)
    _run(totals, "2026-01-03", root, instance)
    assert SEEN[-1].to_pylist() == [{"day": dt.date(2026, 1, 2), "total": 2}]
    table = lance_format.dataset(f"{root}/totals.lance").to_table().sort_by("day")
    assert table.column("total").to_pylist() == [1, 2, 3]
    # rerunning the first partition once the dataset exists: empty, with the dataset's schema
    _run(totals, "2026-01-01", root, instance)
    assert SEEN[-1].num_rows == 0 and SEEN[-1].schema == table.schema


def test_pandas_first_partition_without_a_declared_schema(root: str, instance: DagsterInstance) -> None:
    SEEN.clear()
    _run(counts, "2026-01-01", root, instance)
    assert SEEN[-1].empty and list(SEEN[-1].columns) == []
    _run(counts, "2026-01-02", root, instance)
    assert SEEN[-1]["n"].tolist() == [10]
    _run(counts, "2026-01-01", root, instance)
    assert SEEN[-1].empty and list(SEEN[-1].columns) == ["day", "n"]
    assert str(SEEN[-1]["n"].dtype) == "int64"
    ds = lance_format.dataset(f"{root}/counts.lance")
    assert sorted(ds.to_table().column("n").to_pylist()) == [10, 20]


def test_polars_lazy_first_partition(root: str, instance: DagsterInstance) -> None:
    SEEN.clear()
    _run(lazy, "2026-01-01", root, instance)
    assert SEEN[-1].height == 0 and SEEN[-1].schema == pl.Schema({"day": pl.Datetime("us"),
                                                                   "tags": pl.List(pl.String)})
    _run(lazy, "2026-01-02", root, instance)
    assert SEEN[-1]["tags"].to_list() == [["n0"]]


def test_a_missing_mapped_partition_of_a_missing_dataset_is_still_an_error(root: str,
                                                                          instance: DagsterInstance) -> None:
    result = materialize([totals], partition_key="2026-01-03", instance=instance, raise_on_error=False,
                         resources={"io_manager": LanceIOManager(root_uri=root)})
    assert not result.success
    assert "materialize the upstream asset first" in str(result.get_step_failure_events()[0].event_specific_data
                                                         .error)


def test_a_declared_type_that_is_no_arrow_name_is_named(root: str, instance: DagsterInstance) -> None:
    @asset(name="odd", partitions_def=DAYS, ins={"odd": AssetIn(partition_mapping=PREVIOUS_DAY)},
           metadata={"partition_expr": "day",
                     "dagster/column_schema": TableSchema(columns=[TableColumn("day", "a calendar day")])})
    def odd(odd: pa.Table) -> pa.Table:
        return odd

    result = materialize([odd], partition_key="2026-01-01", instance=instance, raise_on_error=False,
                         resources={"io_manager": LanceIOManager(root_uri=root)})
    assert not result.success
    message = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert "declared column 'day' has type 'a calendar day'" in message


@pytest.mark.parametrize("text,typ", [("int32", pa.int32()), ("timestamp[ms, tz=Europe/Berlin]",
                                                                pa.timestamp("ms", "Europe/Berlin")),
                                      ("decimal128(12, 3)", pa.decimal128(12, 3))])
def test_declared_arrow_type_names(text: str, typ: pa.DataType) -> None:
    from lance_dagster.reader import arrow_type

    assert arrow_type(text) == typ
