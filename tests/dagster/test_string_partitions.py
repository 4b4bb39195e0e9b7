"""Time-window partitions on ISO 8601 string columns (issue 26 item 8): a partition replaces exactly its
rows and a downstream load reads exactly them, as on date and timestamp columns."""

import datetime as dt

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    DagsterInstance,
    DailyPartitionsDefinition,
    HourlyPartitionsDefinition,
    asset,
    materialize,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

import lance_format
from lance_dagster import LanceIOManager

DAYS = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-10")
HOURS = HourlyPartitionsDefinition(start_date="2026-01-01-00:00", end_date="2026-01-01-06:00")
RUNS = {"n": 0}
SEEN: list[list[str]] = []


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def orders(context: AssetExecutionContext) -> pa.Table:
    RUNS["n"] += 1
    days = [w.isoformat() for w in _days(context)]
    # ISO date strings, one of them with a time of day (still inside its day)
    return pa.table({"day": [d for d in days for _ in range(2)],
                     "at": [f"{d}T{h:02d}:30:00" for d in days for h in (0, 23)],
                     "run": [RUNS["n"]] * (2 * len(days))})


def _days(context: AssetExecutionContext) -> list[dt.date]:
    window = context.partition_time_window
    out, day = [], window.start.date()
    while day < window.end.date():
        out.append(day)
        day += dt.timedelta(days=1)
    return out


@asset(partitions_def=DAYS, metadata={"partition_expr": "day"})
def order_days(orders: pa.Table) -> pa.Table:
    SEEN.append(sorted(set(orders.column("day").to_pylist())))
    return orders.select(["day"])


@asset(partitions_def=HOURS, metadata={"partition_expr": "at"})
def pings(context: AssetExecutionContext) -> pa.Table:
    start = context.partition_time_window.start.replace(tzinfo=None)
    return pa.table({"at": pa.array([(start + dt.timedelta(minutes=m)).isoformat() for m in (0, 59)],
                                    pa.large_string())})


def _io(root: str) -> dict[str, LanceIOManager]:
    return {"io_manager": LanceIOManager(root_uri=root)}


def test_daily_partitions_on_an_iso_date_string_column(root: str, instance: DagsterInstance) -> None:
    for day in ("2026-01-01", "2026-01-02", "2026-01-01"):
        assert materialize([orders], partition_key=day, resources=_io(root), instance=instance).success
    uri = f"{root}/orders.lance"
    rows = sorted((r["day"], r["run"]) for r in lance_format.dataset(uri).to_table().to_pylist())
    assert rows == [("2026-01-01", 3), ("2026-01-01", 3), ("2026-01-02", 2), ("2026-01-02", 2)]
    # a backfill range is one commit replacing both days
    version = lance_format.dataset(uri).version
    tags = {ASSET_PARTITION_RANGE_START_TAG: "2026-01-02", ASSET_PARTITION_RANGE_END_TAG: "2026-01-03"}
    assert materialize([orders], tags=tags, resources=_io(root), instance=instance).success
    ds = lance_format.dataset(uri)
    assert ds.version == version + 1 and ds.count_rows() == 6
    # a downstream partition reads only its day
    SEEN.clear()
    assert materialize([orders, order_days], partition_key="2026-01-02", selection=[order_days],
                       resources=_io(root), instance=instance).success
    assert SEEN == [["2026-01-02"]]
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).to_table().sort_by("at").equals(ds.to_table().sort_by("at"))


def test_hourly_partitions_on_an_iso_datetime_string_column(root: str, instance: DagsterInstance) -> None:
    for hour in ("2026-01-01-01:00", "2026-01-01-02:00", "2026-01-01-01:00"):
        assert materialize([pings], partition_key=hour, resources=_io(root), instance=instance).success
    values = sorted(lance_format.dataset(f"{root}/pings.lance").to_table().column("at").to_pylist())
    assert values == ["2026-01-01T01:00:00", "2026-01-01T01:59:00", "2026-01-01T02:00:00", "2026-01-01T02:59:00"]
