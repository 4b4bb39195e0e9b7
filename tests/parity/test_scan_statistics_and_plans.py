"""Scan statistics, analyze_plan, io_stats and include_deleted_rows, compared with pylance 14.0.2."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import NotSupportedError

lance = pytest.importorskip("lance")

LIBS = {"lance": lance, "lance_format": lance_format}


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("scan") / "t.lance")
    table = pa.table({"id": list(range(3000)), "s": [f"v{i % 97}" for i in range(3000)]})
    ds = lance.write_dataset(table, path, max_rows_per_file=1000)
    ds.delete("id < 5 OR (id >= 1500 AND id < 1510)")
    return path


@pytest.mark.parametrize("package", ["lance", "lance_format"])
def test_scan_stats_callback_gets_one_statistics_object_after_the_scan(uri: str, package: str) -> None:
    ds = LIBS[package].dataset(uri)
    got: list[Any] = []
    table = ds.scanner(filter="id > 10", scan_stats_callback=got.append).to_table()
    assert table.num_rows == 3000 - 11 - 10
    assert len(got) == 1
    stats = got[0]
    assert type(stats).__name__ == "ScanStatistics"
    for name in ("iops", "requests", "bytes_read", "indices_loaded", "parts_loaded", "index_comparisons",
                 "index_cache_hits", "index_cache_misses"):
        assert isinstance(getattr(stats, name), int), name
    assert stats.bytes_read > 0 and stats.iops > 0
    assert isinstance(stats.all_counts, dict) and isinstance(stats.all_times, dict)
    assert repr(stats).startswith("ScanStatistics(iops=")


def test_callback_errors_do_not_fail_the_scan(uri: str) -> None:
    def boom(_stats: Any) -> None:
        raise RuntimeError("callback failed")

    for package in LIBS:
        assert LIBS[package].dataset(uri).scanner(scan_stats_callback=boom).to_table().num_rows == 2985


def test_stats_callback_on_streamed_batches(uri: str) -> None:
    got: list[Any] = []
    rows = sum(b.num_rows for b in lance_format.dataset(uri).scanner(scan_stats_callback=got.append).to_batches())
    assert rows == 2985 and len(got) == 1 and got[0].all_counts["output_rows"] == rows


@pytest.mark.parametrize("count_rows", [False, True])
def test_analyze_plan_runs_the_scan_and_reports_metrics(uri: str, count_rows: bool) -> None:
    theirs = lance.dataset(uri).scanner(filter="id > 10").analyze_plan(count_rows=count_rows)
    ours = lance_format.dataset(uri).scanner(filter="id > 10").analyze_plan(count_rows=count_rows)
    assert ours.split(",")[0] == theirs.split(",")[0] == "AnalyzeExec verbose=true"
    assert ("AggregateExec" in ours) == ("AggregateExec" in theirs) == count_rows
    assert "LanceRead" in ours and "metrics=[output_rows=2979" in ours


def test_io_stats_snapshot_and_incremental(uri: str) -> None:
    for package in LIBS:
        ds = LIBS[package].dataset(uri)
        ds.to_table()
        snap = ds.io_stats_snapshot()
        assert type(snap).__name__ == "IOStats"
        assert snap.read_iops > 0 and snap.read_bytes > 0 and snap.write_iops == 0
        assert repr(snap).startswith("IOStats(read_iops=")
        first = ds.io_stats_incremental()
        assert (first.read_iops, first.read_bytes) == (snap.read_iops, snap.read_bytes)
        again = ds.io_stats_incremental()
        assert (again.read_iops, again.read_bytes, again.write_iops, again.written_bytes) == (0, 0, 0, 0)


@pytest.mark.parametrize("options", [
    {},
    {"columns": ["id"], "filter": "id < 7"},
    {"with_row_address": True},
    {"limit": 3, "offset": 2},
    {"limit": 20, "offset": 1495},
    {"columns": ["id"], "filter": "s = 'v3'"},
])
def test_include_deleted_rows_returns_them_with_null_row_ids(uri: str, options: dict[str, Any]) -> None:
    theirs = lance.dataset(uri).to_table(include_deleted_rows=True, with_row_id=True, **options)
    ours = lance_format.dataset(uri).to_table(include_deleted_rows=True, with_row_id=True, **options)
    assert ours.equals(theirs)


def test_include_deleted_rows_needs_row_ids(uri: str) -> None:
    with pytest.raises(ValueError, match="with_row_id is false"):
        lance.dataset(uri).to_table(include_deleted_rows=True)
    with pytest.raises(ValueError, match="with_row_id is false"):
        lance_format.dataset(uri).to_table(include_deleted_rows=True)
    with pytest.raises(NotSupportedError):
        lance_format.dataset(uri).scanner(columns={"x": "id * 2"}, include_deleted_rows=True, with_row_id=True)


def test_scanner_dataset_schema_and_to_pandas(uri: str) -> None:
    t_sc, o_sc = lance.dataset(uri).scanner(columns=["id"]), lance_format.dataset(uri).scanner(columns=["id"])
    assert o_sc.dataset_schema == t_sc.dataset_schema
    assert o_sc.to_pandas().equals(t_sc.to_pandas())


@pytest.mark.parametrize("options", [{"include_deleted_rows": True, "with_row_id": True},
                                     {"limit": 7, "offset": 3, "with_row_address": True},
                                     {"columns": ["id"], "filter": "id > 3", "include_deleted_rows": True,
                                      "with_row_id": True}])
def test_fragment_reads_take_pylances_options(uri: str, options: dict[str, Any]) -> None:
    t_frag = lance.dataset(uri).get_fragments()[0]
    o_frag = lance_format.dataset(uri).get_fragments()[0]
    assert o_frag.to_table(**options).equals(t_frag.to_table(**options))
    t_rows = pa.Table.from_batches(list(t_frag.to_batches(**options)))
    o_rows = pa.Table.from_batches(list(o_frag.to_batches(**options)))
    assert o_rows.equals(t_rows)


def test_dataset_to_pandas_and_has_index(uri: str) -> None:
    t_ds, o_ds = lance.dataset(uri), lance_format.dataset(uri)
    options: dict[str, Any] = {"columns": ["s"], "filter": "id < 20", "limit": 9, "with_row_id": True}
    assert o_ds.to_pandas(**options).equals(t_ds.to_pandas(**options))
    assert o_ds.has_index is t_ds.has_index is False
