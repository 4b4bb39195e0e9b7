"""Custom commit properties and writer options from the IO manager config and from output metadata
(issue 26 item 8; dagster-deltalake's ``custom_metadata`` and ``writer_properties``)."""

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest
from dagster import (
    AssetExecutionContext,
    DagsterInstance,
    DailyPartitionsDefinition,
    Output,
    asset,
    materialize,
)

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.commit_options import LanceWriterOptions
from lance_dagster.lineage import ASSET_KEY, RUN_ID

DAYS = DailyPartitionsDefinition(start_date="2026-01-01", end_date="2026-01-05")


@asset
def ledger() -> Output[pa.Table]:
    return Output(pa.table({"id": list(range(7))}),
                  metadata={"commit_properties": {"ticket": "T-1", "rows": 7},
                            "writer_options": {"max_rows_per_file": 3}})


@asset(partitions_def=DAYS, metadata={"partition_expr": "day", "writer_options": {"max_rows_per_file": 2},
                                      "commit_properties": {"source": "daily"}})
def daily_ledger(context: AssetExecutionContext) -> pa.Table:
    day = dt.date.fromisoformat(context.partition_key)
    return pa.table({"day": pa.array([day] * 5, pa.date32()), "n": list(range(5))})


def _rows_per_fragment(uri: str) -> list[int]:
    return sorted(f.physical_rows for f in lance_format.dataset(uri).manifest.fragments)


def test_config_and_output_metadata_properties_and_writer_options(root: str, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=root, commit_properties={"team": "growth", "ticket": "none"},
                        writer_options=LanceWriterOptions(max_rows_per_file=2, enable_stable_row_ids=True))
    result = materialize([ledger], resources={"io_manager": io}, instance=instance)
    assert result.success
    uri = f"{root}/ledger.lance"
    ds = lance_format.dataset(uri)
    props = ds.read_transaction(ds.version).transaction_properties
    # config, then output metadata key by key; the lineage beside them
    assert (props["team"], props["ticket"], props["rows"]) == ("growth", "T-1", "7")
    assert props[RUN_ID] == result.run_id and props[ASSET_KEY] == "ledger"
    assert _rows_per_fragment(uri) == [1, 3, 3]  # output metadata's max_rows_per_file wins over config's 2
    assert ds.has_stable_row_ids  # from config, for the new dataset
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).to_table().equals(ds.to_table())


def test_partition_replacement_honours_writer_options(root: str, instance: DagsterInstance) -> None:
    resources = {"io_manager": LanceIOManager(root_uri=root)}
    for day in ("2026-01-01", "2026-01-02", "2026-01-01"):
        assert materialize([daily_ledger], partition_key=day, resources=resources, instance=instance).success
    uri = f"{root}/daily_ledger.lance"
    ds = lance_format.dataset(uri)
    assert ds.count_rows() == 10 and ds.version == 3
    txn = ds.read_transaction(3)
    assert type(txn.operation).__name__ == "Update" and txn.transaction_properties["source"] == "daily"
    live = [f.physical_rows - f.num_deletions for f in ds.manifest.fragments]
    assert sorted(n for n in live if n) == [1, 1, 2, 2, 2, 2]  # each write cut into files of 2 rows


def _error(result: Any) -> str:
    return str(result.get_step_failure_events()[0].event_specific_data.error)


def test_reserved_properties_and_unknown_writer_options_are_refused(root: str, instance: DagsterInstance) -> None:
    @asset(name="ledger", metadata={"commit_properties": {"dagster/run_id": "forged"}})
    def forged() -> pa.Table:
        return pa.table({"id": [1]})

    @asset(name="ledger", metadata={"writer_options": {"rows_per_file": 2}})
    def typo() -> pa.Table:
        return pa.table({"id": [1]})

    resources = {"io_manager": LanceIOManager(root_uri=root)}
    first = materialize([forged], resources=resources, instance=instance, raise_on_error=False)
    assert "commit property 'dagster/run_id' is reserved for the Dagster lineage" in _error(first)
    second = materialize([typo], resources=resources, instance=instance, raise_on_error=False)
    assert "unknown writer option 'rows_per_file'; known: max_rows_per_file" in _error(second)
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(f"{root}/ledger.lance")


def test_resource_writes_take_them_too(root: str, instance: DagsterInstance) -> None:
    lance = LanceResource(root_uri=root, commit_properties={"team": "ops"},
                          writer_options=LanceWriterOptions(max_rows_per_file=4))

    @asset(name="direct")
    def direct(context: AssetExecutionContext) -> None:
        lance.write("direct", pa.table({"x": list(range(9))}), context=context, properties={"why": "backfill"},
                    writer_options={"max_rows_per_file": 5})

    assert materialize([direct], instance=instance).success
    ds = lance_format.dataset(f"{root}/direct.lance")
    props = ds.read_transaction(1).transaction_properties
    assert (props["team"], props["why"], props[ASSET_KEY]) == ("ops", "backfill", "direct")
    assert _rows_per_fragment(f"{root}/direct.lance") == [4, 5]


@asset(metadata={"mode": "merge", "merge_on": "id", "writer_options": {"max_rows_per_file": 4}})
def merged_ledger(context: AssetExecutionContext) -> pa.Table:
    start = 0 if context.run.tags.get("round") == "1" else 5
    return pa.table({"id": list(range(start, start + 10)), "v": [start] * 10})


def test_merges_honour_writer_options(root: str, instance: DagsterInstance) -> None:
    resources = {"io_manager": LanceIOManager(root_uri=root)}
    for round_ in ("1", "2"):
        assert materialize([merged_ledger], resources=resources, instance=instance, tags={"round": round_}).success
    uri = f"{root}/merged_ledger.lance"
    ds = lance_format.dataset(uri)
    assert type(ds.read_transaction(ds.version).operation).__name__ == "Update"
    table = ds.to_table().sort_by("id")
    assert table.column("id").to_pylist() == list(range(15))
    assert table.column("v").to_pylist() == [0] * 5 + [5] * 10
    # the merge's 10 new rows (5 updated, 5 inserted) went into files of at most 4 rows
    live = sorted(f.physical_rows - f.num_deletions for f in ds.manifest.fragments if f.physical_rows > f.num_deletions)
    assert max(live) <= 4 and sum(live) == 15
    lance = pytest.importorskip("lance")
    assert lance.dataset(uri).to_table().sort_by("id").equals(table)
