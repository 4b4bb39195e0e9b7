"""Partitioned assets: each materialization replaces exactly its partitions' rows in one commit."""

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    AssetIn,
    BackfillPolicy,
    DagsterInstance,
    DailyPartitionsDefinition,
    DynamicPartitionsDefinition,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
    materialize,
)
from dg_helpers import materialization, meta

import lance_format
from lance_dagster import LanceIOManager

REGIONS = StaticPartitionsDefinition(["a", "b", "c"])
DAYS = DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-08")
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
RUNS = {"n": 0}


def _rows(region: str, n: int, tag: int) -> pa.Table:
    return pa.table({"region": [region] * n, "value": pa.array([tag * 100 + i for i in range(n)], pa.int64())})


@asset(partitions_def=REGIONS, metadata={"partition_expr": "region"})
def sales(context: AssetExecutionContext) -> pa.Table:
    RUNS["n"] += 1
    return _rows(context.partition_key, {"a": 2, "b": 3, "c": 1}[context.partition_key], RUNS["n"])


def _assert_pylance_reads_every_version(uri: str) -> None:
    lance = pytest.importorskip("lance")
    ours = lance_format.dataset(uri)
    theirs = lance.dataset(uri)
    assert theirs.version == ours.version
    for version in range(1, ours.version + 1):
        a = lance_format.dataset(uri, version=version).to_table()
        b = lance.dataset(uri, version=version).to_table()
        keys = [(n, "ascending") for n in a.schema.names]
        a, b = a.sort_by(keys), b.sort_by(keys)
        assert a.equals(b), f"version {version} differs"


def _by_region(uri: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for row in lance_format.dataset(uri).to_table().to_pylist():
        out.setdefault(row["region"], []).append(row["value"])
    return {k: sorted(v) for k, v in sorted(out.items())}


def test_partition_a_then_b_then_a_keeps_b(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    RUNS["n"] = 0
    for key in ("a", "b", "a"):
        assert materialize([sales], partition_key=key, resources={"io_manager": io_manager}, instance=instance).success
    uri = f"{root}/sales.lance"
    ds = lance_format.dataset(uri)
    assert ds.version == 3  # one commit per materialization
    assert _by_region(uri) == {"a": [300, 301], "b": [200, 201, 202]}
    assert [ds.read_transaction(v).operation.kind for v in (2, 3)] == ["update", "update"]
    _assert_pylance_reads_every_version(uri)


def test_rerun_of_a_partition_is_idempotent(root: str, io_manager: LanceIOManager,
                                            instance: DagsterInstance) -> None:
    RUNS["n"] = 0
    resources = {"io_manager": io_manager}
    materialize([sales], partition_key="b", resources=resources, instance=instance)
    materialize([sales], partition_key="c", resources=resources, instance=instance)
    result = materialize([sales], partition_key="b", resources=resources, instance=instance)
    uri = f"{root}/sales.lance"
    assert _by_region(uri) == {"b": [300, 301, 302], "c": [200]}
    md = meta(materialization(result, "sales"))
    assert md["lance/rows_deleted"] == 3 and md["lance/rows_added"] == 3 and md["dagster/row_count"] == 4
    assert "region" in md["lance/partition_filter"]
    _assert_pylance_reads_every_version(uri)


@asset(partitions_def=DAYS, metadata={"partition_expr": "ts"}, backfill_policy=BackfillPolicy.single_run())
def ticks(context: AssetExecutionContext) -> pa.Table:
    window = context.partition_time_window
    days = (window.end - window.start).days
    stamps = [window.start + dt.timedelta(days=d, hours=h) for d in range(days) for h in (1, 13)]
    return pa.table({"ts": pa.array(stamps, pa.timestamp("us", tz="UTC")),
                     "run": pa.array([RUNS["n"]] * len(stamps), pa.int64())})


def test_time_window_backfill_is_one_commit(root: str, io_manager: LanceIOManager,
                                            instance: DagsterInstance) -> None:
    resources = {"io_manager": io_manager}
    RUNS["n"] = 1
    materialize([ticks], partition_key="2024-01-03", resources=resources, instance=instance)
    RUNS["n"] = 2
    result = materialize([ticks], resources=resources, instance=instance,
                         tags={RANGE_START: "2024-01-02", RANGE_END: "2024-01-04"})
    assert result.success
    uri = f"{root}/ticks.lance"
    ds = lance_format.dataset(uri)
    assert ds.version == 2  # the three-day backfill is a single commit
    table = ds.to_table()
    assert table.num_rows == 6 and set(table.column("run").to_pylist()) == {2}
    RUNS["n"] = 3
    materialize([ticks], partition_key="2024-01-05", resources=resources, instance=instance)
    RUNS["n"] = 4
    materialize([ticks], partition_key="2024-01-03", resources=resources, instance=instance)
    runs = {r["ts"].day: r["run"] for r in lance_format.dataset(uri).to_table().to_pylist()}
    assert runs == {2: 2, 3: 4, 4: 2, 5: 3}


def test_partitioned_load_reads_only_its_rows(root: str, io_manager: LanceIOManager,
                                              instance: DagsterInstance) -> None:
    seen: list[int] = []

    @asset(partitions_def=DAYS, ins={"ticks": AssetIn()})
    def day_count(ticks: pa.Table) -> pa.Table:
        seen.append(ticks.num_rows)
        return pa.table({"rows": [ticks.num_rows]})

    resources = {"io_manager": LanceIOManager(root_uri=root)}
    materialize([ticks], resources=resources, instance=instance,
                tags={RANGE_START: "2024-01-01", RANGE_END: "2024-01-05"})
    result = materialize([ticks, day_count], partition_key="2024-01-02", selection=[day_count],
                         resources={"io_manager": LanceIOManager(root_uri=root)}, instance=instance,
                         raise_on_error=False)
    # day_count itself has no partition_expr: its write is refused, but the load already happened.
    assert seen == [2]
    loaded = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    md = loaded[0].event_specific_data.metadata
    assert md["lance/input_version"].value == "1" and "ts" in md["lance/input_filter"].value


def test_multi_partitions_map_each_dimension_to_a_column(root: str, io_manager: LanceIOManager,
                                                        instance: DagsterInstance) -> None:
    multi = MultiPartitionsDefinition({"day": DAYS, "region": StaticPartitionsDefinition(["eu", "us"])})

    @asset(partitions_def=multi, metadata={"partition_expr": {"day": "day", "region": "region"}})
    def orders(context: AssetExecutionContext) -> pa.Table:
        keys = context.partition_key.keys_by_dimension
        day = dt.date.fromisoformat(keys["day"])
        return pa.table({"day": pa.array([day, day], pa.date32()), "region": [keys["region"]] * 2,
                         "run": [RUNS["n"]] * 2})

    resources = {"io_manager": io_manager}
    for n, key in enumerate(["2024-01-01|eu", "2024-01-01|us", "2024-01-02|eu", "2024-01-01|eu"]):
        RUNS["n"] = n
        assert materialize([orders], partition_key=key, resources=resources, instance=instance).success
    rows = lance_format.dataset(f"{root}/orders.lance").to_table().to_pylist()
    got = sorted((r["day"].isoformat(), r["region"], r["run"]) for r in rows)
    assert got == [("2024-01-01", "eu", 3)] * 2 + [("2024-01-01", "us", 1)] * 2 + [("2024-01-02", "eu", 2)] * 2
    _assert_pylance_reads_every_version(f"{root}/orders.lance")


def test_dynamic_partitions(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    tenants = DynamicPartitionsDefinition(name="tenants")
    instance.add_dynamic_partitions("tenants", ["t1", "t2"])

    @asset(partitions_def=tenants, metadata={"partition_expr": "tenant"})
    def usage(context: AssetExecutionContext) -> pa.Table:
        return pa.table({"tenant": [context.partition_key], "run": [RUNS["n"]]})

    resources = {"io_manager": io_manager}
    for n, key in enumerate(["t1", "t2", "t1"]):
        RUNS["n"] = n
        materialize([usage], partition_key=key, resources=resources, instance=instance)
    rows = sorted((r["tenant"], r["run"]) for r in lance_format.dataset(f"{root}/usage.lance").to_table().to_pylist())
    assert rows == [("t1", 2), ("t2", 1)]


def _failure(result: Any) -> str:
    return str(result.get_step_failure_events()[0].event_specific_data.error)


def test_partitioned_asset_without_partition_expr_is_refused(root: str, io_manager: LanceIOManager,
                                                             instance: DagsterInstance) -> None:
    @asset(name="sales", partitions_def=REGIONS)
    def no_expr(context: AssetExecutionContext) -> pa.Table:
        return _rows(context.partition_key, 1, 0)

    materialize([sales], partition_key="a", resources={"io_manager": io_manager}, instance=instance)
    result = materialize([no_expr], partition_key="b", resources={"io_manager": io_manager}, instance=instance,
                         raise_on_error=False)
    assert not result.success
    assert "no 'partition_expr' metadata" in _failure(result)
    assert lance_format.dataset(f"{root}/sales.lance").version == 1


def test_rows_outside_the_partition_are_refused(root: str, io_manager: LanceIOManager,
                                                instance: DagsterInstance) -> None:
    @asset(name="sales", partitions_def=REGIONS, metadata={"partition_expr": "region"})
    def leaky(context: AssetExecutionContext) -> pa.RecordBatchReader:
        table = pa.concat_tables([_rows(context.partition_key, 2, 0), _rows("c", 1, 0)])
        return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2))

    materialize([sales], partition_key="a", resources={"io_manager": io_manager}, instance=instance)
    before = sorted(p.name for p in (io_manager_root(root) / "data").iterdir())
    result = materialize([leaky], partition_key="b", resources={"io_manager": io_manager}, instance=instance,
                         raise_on_error=False)
    assert not result.success
    assert "1 of 1 rows are outside the partition" in _failure(result)
    assert lance_format.dataset(f"{root}/sales.lance").version == 1
    assert sorted(p.name for p in (io_manager_root(root) / "data").iterdir()) == before  # no orphan files


def io_manager_root(root: str) -> Any:
    from pathlib import Path

    return Path(root) / "sales.lance"


def test_error_and_ignore_look_at_the_partition_only(root: str, io_manager: LanceIOManager,
                                                     instance: DagsterInstance) -> None:
    @asset(name="sales", partitions_def=REGIONS, metadata={"partition_expr": "region", "mode": "error"})
    def once(context: AssetExecutionContext) -> pa.Table:
        return _rows(context.partition_key, 1, 7)

    @asset(name="sales", partitions_def=REGIONS, metadata={"partition_expr": "region", "mode": "ignore"})
    def keep(context: AssetExecutionContext) -> pa.Table:
        return _rows(context.partition_key, 1, 9)

    resources = {"io_manager": io_manager}
    assert materialize([once], partition_key="a", resources=resources, instance=instance).success
    assert materialize([once], partition_key="b", resources=resources, instance=instance).success
    failed = materialize([once], partition_key="a", resources=resources, instance=instance, raise_on_error=False)
    assert not failed.success and "mode 'error'" in _failure(failed)
    kept = materialize([keep], partition_key="a", resources=resources, instance=instance)
    assert meta(materialization(kept, "sales"))["lance/skipped"] is True
    assert materialize([keep], partition_key="c", resources=resources, instance=instance).success
    assert _by_region(f"{root}/sales.lance") == {"a": [700], "b": [700], "c": [900]}
    assert lance_format.dataset(f"{root}/sales.lance").version == 3


def test_unpartitioned_downstream_reads_every_partition(root: str, io_manager: LanceIOManager,
                                                        instance: DagsterInstance) -> None:
    @asset
    def all_sales(sales: pa.Table) -> pa.Table:
        return sales

    RUNS["n"] = 0
    resources = {"io_manager": io_manager}
    for key in ("a", "c"):
        materialize([sales], partition_key=key, resources=resources, instance=instance)
    assert materialize([sales, all_sales], selection=[all_sales], resources=resources, instance=instance).success
    assert _by_region(f"{root}/all_sales.lance") == {"a": [100, 101], "c": [200]}
