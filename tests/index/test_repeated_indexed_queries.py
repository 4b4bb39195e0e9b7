"""Indexed queries asked again (a long-lived process) return pylance 14.0.2's rows: the parsed
filter and its index plan are remembered per (text, schema, indices) and a BTREE on integers
picks its pages by binary search; the answers stay those of pylance on 2.0 and 2.2 files, with
deletions, nulls, bounds outside the values, and the same filter text over another schema."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import fastplan
from lance_format.table import scan as table_scan


def _table(n: int, start: int = 0) -> pa.Table:
    i = np.arange(start, start + n)
    return pa.table({"id": pa.array(i, pa.int64()),
                     "k": pa.array((i * 7919) % 1009 - 300, pa.int64(), mask=i % 29 == 0),
                     "n": pa.array(i % 500, pa.int32()),  # no nulls: the binary-search page path
                     "cat": pa.array([f"c{v % 11}" for v in i], pa.string())})


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path_factory.mktemp(f"{engine}{request.param}") / "q.lance")
        lance.write_dataset(_table(6000), uri, max_rows_per_file=2000, data_storage_version=request.param)
        lance.dataset(uri).delete("id % 31 = 0 OR (id >= 2500 AND id < 2600)")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("k", "BTREE")
        handle.create_scalar_index("n", "BTREE")
        handle.create_scalar_index("cat", "BITMAP")
        out.append(uri)
    return out[0], out[1]


FILTERS = ["k = 5", "k = -300", "k = 708", "k = 709", "k = -301", "k < -250", "k <= -300", "k > 650",
           "k >= 708", "k BETWEEN 10 AND 20", "k BETWEEN 20 AND 10", "k IN (1, 2, 300, 5000)", "k IS NULL",
           "n = 0", "n = 499", "n = 500", "n < 3", "n > 496", "n BETWEEN 100 AND 102", "n >= 2147483647",
           "n < -5", "n IN (4, 40, 400)", "n IS NULL", "cat = 'c3'", "k > 100 AND n < 20",
           "n = 7 AND cat = 'c7'", "10 < n AND n <= 12"]


@pytest.mark.parametrize("flt", FILTERS)
def test_repeated_queries_return_pylances_rows(both: tuple[str, str], flt: str) -> None:
    ours, theirs = both
    want = lance.dataset(theirs).to_table(columns=["id"], filter=flt).column("id").to_pylist()
    count = lance.dataset(theirs).count_rows(filter=flt)
    ds = lance_format.dataset(ours)
    for handle in (ds, ds, lance_format.dataset(ours)):  # the second and third ask again
        assert handle.to_table(columns=["id"], filter=flt).column("id").to_pylist() == want
        assert handle.count_rows(filter=flt) == count


def test_point_query_plan_uses_the_index(both: tuple[str, str]) -> None:
    ours, _ = both
    plan = lance_format.dataset(ours).scanner(filter="n = 3").explain_plan()
    assert "ScalarIndexQuery" in plan


def test_same_filter_text_over_another_schema_is_parsed_again(tmp_path: object) -> None:
    ints = str(tmp_path) + "/ints.lance"  # type: ignore[operator]
    strs = str(tmp_path) + "/strs.lance"  # type: ignore[operator]
    lance.write_dataset(pa.table({"v": pa.array([1, 2, 3], pa.int64())}), ints)
    lance.write_dataset(pa.table({"v": pa.array([1.5, 2.0, 3.5])}), strs)
    for uri in (ints, strs, ints, strs):
        got = lance_format.dataset(uri).to_table(filter="v >= 2").column("v").to_pylist()
        assert got == lance.dataset(uri).to_table(filter="v >= 2").column("v").to_pylist()


def test_parsed_filters_stay_bounded_and_correct_after_eviction(both: tuple[str, str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = both
    monkeypatch.setattr(table_scan, "_MAX_PARSED", 4)
    monkeypatch.setattr(fastplan, "_MAX_PLANS", 4)
    ds = lance_format.dataset(ours)
    flts = [f"n = {v}" for v in range(12)] + ["n = 0", "n = 1"]
    for flt in flts:
        want = lance.dataset(theirs).count_rows(filter=flt)
        assert ds.count_rows(filter=flt) == want
        assert ds.to_table(filter=flt).num_rows == want
    assert len(table_scan._PARSED) <= 4 and len(fastplan._PLANS) <= 4


def test_a_new_index_changes_the_remembered_plan(tmp_path: object) -> None:
    uri = str(tmp_path) + "/grow.lance"  # type: ignore[operator]
    lance.write_dataset(_table(3000), uri, max_rows_per_file=1000)
    ds = lance_format.dataset(uri)
    flt = "n = 17"
    want = lance.dataset(uri).count_rows(filter=flt)
    assert ds.count_rows(filter=flt) == want
    assert "ScalarIndexQuery" not in ds.scanner(filter=flt).explain_plan()
    ds.create_scalar_index("n", "BTREE")
    ds = lance_format.dataset(uri)
    assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan()
    assert ds.count_rows(filter=flt) == want
    assert ds.to_table(filter=flt).num_rows == want


def test_a_take_from_a_2_0_file_returns_pylances_values_and_keeps_no_page_buffers(tmp_path: object) -> None:
    from lance_format.file import LanceFileReader

    uri = str(tmp_path) + "/z.lance"  # type: ignore[operator]
    field = pa.field("v", pa.int64(), metadata={"lance-encoding:compression": "zstd"})
    table = pa.table({"v": pa.array(np.arange(50_000, dtype=np.int64) * 3)}, schema=pa.schema([field]))
    lance.write_dataset(table, uri, data_storage_version="2.0")
    frag = lance.dataset(uri).get_fragments()[0]
    path = uri + "/data/" + frag.data_files()[0].path
    reader = LanceFileReader(path)
    rows = [3, 4000, 4001, 49_999]
    assert reader.take_rows(rows).to_table().column("v").to_pylist() == [r * 3 for r in rows]
    assert all(r.pages._cache == {} for r in reader._decoder.readers)  # type: ignore[attr-defined]
    got = lance.dataset(uri).take(rows).column("v").to_pylist()
    assert lance_format.dataset(uri).take(rows).column("v").to_pylist() == got


@pytest.mark.parametrize("limit", [None, 37])
def test_scattered_candidates_taken_together_come_in_pylances_batches_and_rows(
        both: tuple[str, str], limit: int | None) -> None:
    ours, theirs = both
    flt = "n IN (3, 77, 150, 222, 499)"  # ~60 scattered rows in 2,000-row fragments: taken, not read
    want = lance.dataset(theirs).to_table(columns=["id", "cat"], filter=flt, limit=limit)
    batches = list(lance_format.dataset(ours).to_batches(columns=["id", "cat"], filter=flt, limit=limit,
                                                        batch_size=4))
    assert all(b.num_rows <= 4 for b in batches)
    assert pa.Table.from_batches(batches).to_pydict() == want.to_pydict()


def test_reopening_a_version_decodes_its_manifest_once(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_format.table import versions

    uri = str(tmp_path) + "/m.lance"  # type: ignore[operator]
    lance.write_dataset(_table(100), uri)
    decoded: list[str] = []
    real = versions.decode_manifest

    def counting(data: bytes, where: str, **kw: object) -> object:
        decoded.append(where)
        return real(data, where, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(versions, "decode_manifest", counting)
    for _ in range(3):
        assert lance_format.dataset(uri).count_rows() == 100
    assert len(decoded) <= 1
    lance.write_dataset(_table(50, 100), uri, mode="append")  # another process's commit: new bytes
    assert lance_format.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 150
    assert lance_format.dataset(uri, version=1).count_rows() == 100


@pytest.mark.parametrize("stable", [False, True])
def test_scanned_row_ids_and_addresses_equal_pylances(tmp_path: object, stable: bool) -> None:
    uri = str(tmp_path) + "/r.lance"  # type: ignore[operator]
    lance.write_dataset(_table(5000), uri, max_rows_per_file=2000, enable_stable_row_ids=stable)
    lance.dataset(uri).delete("id % 7 = 0 OR (id >= 2100 AND id < 2300)")
    theirs = lance.dataset(uri).to_table(columns=["id"], with_row_id=True, with_row_address=True)
    for batch_size in (100, 3000):
        got = lance_format.dataset(uri).to_table(columns=["id"], with_row_id=True, with_row_address=True,
                                                 batch_size=batch_size)
        assert got.to_pydict() == theirs.to_pydict()
