"""ZONEMAP and BLOOMFILTER answers reach the scan as row ranges (one pair of bounds per run of zones,
no row address per row): filtered scans, counts, projections, limit / offset, row ids and addresses
equal pylance 14.0.2's on storage 2.0 and 2.2 with deletions, nulls, several fragments and a fragment
no index covers; ``explain_plan`` still names the index; a count reads only the filter's columns."""

from __future__ import annotations

from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import range_scan, scan, zonemap
from lance_format.index.predicates import Range
from lance_format.index.row_ranges import RowRanges, ZoneSpans, combine
from lance_format.index.store import IndexDir
from lance_format.table.read import FragmentScan


def _table(n: int, start: int = 0) -> pa.Table:
    i = np.arange(start, start + n)
    rng = np.random.default_rng(start + 1)
    return pa.table({"id": pa.array(i, pa.int64()),
                     "ts": pa.array(i * 10, pa.int64(), mask=i % 37 == 5),
                     "key": pa.array(rng.integers(0, 300, n), pa.int64(), mask=i % 23 == 0),
                     "name": pa.array([f"n{v % 97}" if v % 11 else None for v in i], pa.string()),
                     "x": pa.array(i * 0.25, pa.float64())})


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def paths(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The same data indexed by us and by pylance (small zones: many per fragment)."""
    out = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path_factory.mktemp(engine) / "z.lance")
        lance.write_dataset(_table(5000), uri, max_rows_per_file=1700, data_storage_version=request.param)
        lance.dataset(uri).delete("id % 17 = 3 OR (id >= 1200 AND id < 1500)")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("ts", "ZONEMAP", rows_per_zone=256)
        handle.create_scalar_index("key", "BLOOMFILTER", number_of_items=512)
        lance.write_dataset(_table(600, 5000), uri, mode="append")  # no index covers this fragment
        out.append(uri)
    return out[0], out[1]


FILTERS = ["ts >= 12000 AND ts < 19000", "ts = 30010", "ts > 45000", "ts < 900 OR ts > 52000",
           "ts IS NULL", "key = 42", "key IN (7, 150, 299)", "key IS NULL", "key = 42 OR ts < 2000",
           "key = 42 AND ts > 20000", "ts >= 8000 AND ts <= 8000", "ts = -1", "key = 100 AND name = 'n5'"]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True),
                  key=lambda r: tuple((v is None, v) for v in r))


@pytest.mark.parametrize("flt", FILTERS)
def test_scans_and_counts_match_pylance(paths: tuple[str, str], flt: str) -> None:
    theirs = lance.dataset(paths[1])
    want = theirs.to_table(columns=["id", "name", "x"], filter=flt, with_row_id=True, with_row_address=True)
    for path in paths:  # our index and pylance's, both read by us
        ours = lance_format.dataset(path)
        got = ours.to_table(columns=["id", "name", "x"], filter=flt, with_row_id=True, with_row_address=True)
        assert got.schema.equals(want.schema)
        assert _rows(got) == _rows(want)
        assert ours.count_rows(filter=flt) == theirs.count_rows(filter=flt) == want.num_rows
        assert ours.scanner(columns=["id", "name", "ts", "key"], filter=flt).count_rows() == want.num_rows


@pytest.mark.parametrize("flt", ["ts >= 12000 AND ts < 19000", "key IN (7, 150, 299)", "key IS NULL"])
def test_the_plan_holds_ranges_and_names_the_index(paths: tuple[str, str], flt: str) -> None:
    ours = lance_format.dataset(paths[0])
    sc = ours.scanner(columns=["id"], filter=flt)
    plan = scan.index_plan(sc._ctx, flt)
    assert plan is not None and plan.ranges is not None and plan.addrs.size == 0
    assert plan.hit == frozenset(plan.ranges.fragments())
    text = sc.explain_plan()
    assert "ScalarIndexQuery" in text and "unindexed_fragments_scanned=1" in text
    # offsets() still lists each fragment's candidates row by row (BTREE / BITMAP callers)
    for frag in plan.hit:
        lo, hi = plan.ranges.of_fragment(frag)
        assert plan.offsets(frag).tolist() == [o for a, b in zip(lo, hi, strict=True) for o in range(a, b)]


@pytest.mark.parametrize("flt", ["ts >= 12000 AND ts < 40000", "key IN (7, 150, 299) OR key IS NULL"])
def test_limit_and_offset_match_pylance(paths: tuple[str, str], flt: str) -> None:
    ours, theirs = lance_format.dataset(paths[0]), lance.dataset(paths[1])
    everything = ours.to_table(columns=["id"], filter=flt).column("id").to_pylist()
    assert sorted(everything) == sorted(theirs.to_table(columns=["id"], filter=flt).column("id").to_pylist())
    for limit, offset in ((1, 0), (7, 3), (50, 40), (None, 25)):
        a = ours.to_table(columns=["id", "name"], filter=flt, limit=limit, offset=offset, batch_size=16)
        b = theirs.to_table(columns=["id", "name"], filter=flt, limit=limit, offset=offset, batch_size=16)
        assert a.num_rows == b.num_rows
        # ours returns rows in fragment order, as our full scan does
        assert a.column("id").to_pylist() == everything[offset:None if limit is None else offset + limit]


def test_batches_respect_batch_size(paths: tuple[str, str]) -> None:
    ours = lance_format.dataset(paths[0])
    batches = list(ours.scanner(columns=["id", "x"], filter="ts >= 1000 AND ts < 30000", batch_size=100).to_batches())
    assert batches and all(0 < b.num_rows <= 100 for b in batches)
    assert sum(b.num_rows for b in batches) == lance.dataset(paths[1]).count_rows(filter="ts >= 1000 AND ts < 30000")


def test_empty_projection_and_row_id_filters_match_pylance(paths: tuple[str, str]) -> None:
    ours, theirs = lance_format.dataset(paths[0]), lance.dataset(paths[1])
    flt = "ts >= 2000 AND ts < 9000"
    assert ours.to_table(columns=[], filter=flt).num_rows == theirs.to_table(columns=[], filter=flt).num_rows
    a = ours.to_table(columns=["id"], filter=flt, with_row_address=True).column("_rowaddr").to_pylist()
    cut = sorted(a)[len(a) // 2]
    flt2 = f"{flt} AND _rowaddr < {cut}"
    got = ours.to_table(columns=["id"], filter=flt2)
    want = theirs.to_table(columns=["id"], filter=flt2)
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    assert ours.count_rows(filter=flt2) == theirs.count_rows(filter=flt2) == want.num_rows


def test_a_count_reads_only_the_filter_columns(paths: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, ...]] = []
    read, take = FragmentScan.read, FragmentScan.take

    def spy_read(self: FragmentScan, start: int, stop: int) -> pa.RecordBatch:
        seen.append(tuple(self.columns))
        return read(self, start, stop)

    def spy_take(self: FragmentScan, offsets: np.ndarray) -> pa.RecordBatch:
        seen.append(tuple(self.columns))
        return take(self, offsets)

    def spy_rows(scan_: FragmentScan, start: int, stop: int) -> pa.RecordBatch:
        seen.append(tuple(scan_.columns))
        return rows(scan_, start, stop)

    rows = range_scan.read_rows
    monkeypatch.setattr(FragmentScan, "read", spy_read)
    monkeypatch.setattr(FragmentScan, "take", spy_take)
    monkeypatch.setattr(range_scan, "read_rows", spy_rows)
    ours = lance_format.dataset(paths[0])
    flt = "ts >= 12000 AND ts < 19000"
    n = ours.scanner(columns=["id", "name", "ts", "x"], filter=flt).count_rows()
    assert n == lance.dataset(paths[1]).count_rows(filter=flt)
    indexed = [c for c in seen if "name" not in c]  # the unindexed fragment is scanned with the projection
    assert indexed and all(c == ("ts",) for c in indexed)


def _sets(r: RowRanges) -> set[int]:
    return {int(a) for a in r.addresses()}


def test_range_sets_combine_as_row_sets() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            lo = rng.integers(0, 3, 6).astype(np.uint64) << np.uint64(32) | rng.integers(0, 60, 6).astype(np.uint64)
            parts.append(RowRanges.of(lo, lo + rng.integers(0, 15, 6).astype(np.uint64)))
        for r in parts:
            assert bool((r.lo[1:] > r.hi[:-1]).all()) and bool((r.hi > r.lo).all())
        sets = [_sets(p) for p in parts]
        both, either = combine(parts, all_of=True), combine(parts, all_of=False)
        assert _sets(both) == set.intersection(*sets)
        assert _sets(either) == set.union(*sets)
        probe = np.sort(rng.integers(0, 3, 50).astype(np.uint64) << np.uint64(32) | rng.integers(0, 80, 50).astype(
            np.uint64))
        assert [int(a) in sets[0] for a in probe] == parts[0].contains(probe).tolist()
        assert parts[0].within(frozenset({1})).fragments() in ([], [1])


def test_zone_spans_merge_touching_zones() -> None:
    frag = np.array([0, 0, 0, 2, 2], np.uint64)
    start = np.array([0, 100, 250, 0, 100], np.uint64)
    length = np.array([100, 100, 50, 100, 30], np.uint64)
    spans = ZoneSpans.of(frag, start, length)
    r = spans.pick(np.array([True, True, True, False, True]))
    assert (r.lo.tolist(), r.hi.tolist()) == ([0, 250, (2 << 32) + 100], [200, 300, (2 << 32) + 130])
    assert _sets(r) == {*range(0, 200), *range(250, 300), *((2 << 32) + o for o in range(100, 130))}


def test_stable_row_ids_match_pylance(tmp_path: Any) -> None:
    uris = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path / f"{engine}.lance")
        lance.write_dataset(_table(3000), uri, max_rows_per_file=1000, enable_stable_row_ids=True)
        lance.dataset(uri).delete("id % 7 = 1")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("ts", "ZONEMAP", rows_per_zone=128)
        handle.create_scalar_index("key", "BLOOMFILTER", number_of_items=256)
        uris.append(uri)
    for flt in ("ts >= 5000 AND ts < 21000", "key = 42", "key IN (1, 2, 3) OR ts > 29000"):
        got = lance_format.dataset(uris[0]).to_table(columns=["id", "key"], filter=flt, with_row_id=True)
        want = lance.dataset(uris[1]).to_table(columns=["id", "key"], filter=flt, with_row_id=True)
        assert _rows(got) == _rows(want)
        assert lance_format.dataset(uris[0]).count_rows(filter=flt) == want.num_rows


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_zones_beside_an_exact_index_match_pylance(tmp_path: Any, version: str) -> None:
    # a BTREE term answers addresses: ANDed with zones they are kept inside them, ORed they are joined
    uris = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path / f"{engine}.lance")
        lance.write_dataset(_table(4000), uri, max_rows_per_file=1500, data_storage_version=version)  # type: ignore[arg-type]
        lance.dataset(uri).delete("id % 13 = 2")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("id", "BTREE")
        handle.create_scalar_index("ts", "ZONEMAP", rows_per_zone=200)
        handle.create_scalar_index("key", "BLOOMFILTER", number_of_items=300)
        uris.append(uri)
    ours, theirs = lance_format.dataset(uris[0]), lance.dataset(uris[1])
    for flt in ("id < 3000 AND ts > 10000", "id = 5 OR key = 42", "(id > 100 AND id < 900) OR ts >= 35000",
                "key = 42 AND id >= 1000 AND ts < 30000"):
        got = ours.to_table(columns=["id", "name"], filter=flt)
        want = theirs.to_table(columns=["id", "name"], filter=flt)
        assert _rows(got) == _rows(want), flt
        assert ours.count_rows(filter=flt) == want.num_rows
        assert "ScalarIndexQuery" in ours.scanner(filter=flt).explain_plan()


@pytest.mark.parametrize("flt", ["ts >= 3000 AND ts < 41000", "ts > 0", "ts <= 20000", "ts >= 100 AND ts <= 100",
                                 "ts BETWEEN 2550 AND 47990", "ts > 12000 AND ts > 15000 AND ts < 30000"])
def test_counts_of_wide_ranges_match_pylance(paths: tuple[str, str], flt: str) -> None:
    # zones inside the range with no null count their live rows unread; zones holding a null
    # (ts is null every 37 rows) or crossing a bound are read and filtered
    want = lance.dataset(paths[1]).count_rows(filter=flt)
    for path in paths:
        assert lance_format.dataset(path).count_rows(filter=flt) == want
        assert lance_format.dataset(path).scanner(columns=["id"], filter=flt).count_rows() == want


def test_whole_zones_count_without_reading(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "z.lance")
    t = pa.table({"v": pa.array(np.arange(5000, dtype=np.int64)), "f": pa.array(np.arange(5000) * 0.5)})
    lance.write_dataset(t, uri, max_rows_per_file=2000)
    lance.dataset(uri).delete("v % 9 = 4")
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("v", "ZONEMAP", rows_per_zone=100)
    ds.create_scalar_index("f", "ZONEMAP", rows_per_zone=100)
    seen: list[int] = []
    rows = range_scan.read_rows

    def spy(scan_: FragmentScan, start: int, stop: int) -> pa.RecordBatch:
        seen.append(stop - start)
        return rows(scan_, start, stop)

    monkeypatch.setattr(range_scan, "read_rows", spy)
    for flt in ("v >= 150 AND v < 4321", "f >= 75.0 AND f < 2160.5", "v > 4999", "v >= 0"):
        assert lance_format.dataset(uri).count_rows(filter=flt) == lance.dataset(uri).count_rows(filter=flt)
    # only the zones a bound cuts were read (a few hundred rows, not thousands)
    assert 0 < sum(seen) <= 4 * 100 * 2


@pytest.mark.parametrize("bounds", [(None, None), (100, None), (None, 250.5), (-3, 4000), (777, 777), (5000, 10)])
def test_split_zones_are_the_candidate_zones(tmp_path: Any, bounds: tuple[Any, Any]) -> None:
    uri = str(tmp_path / "z.lance")
    v = np.arange(3000, dtype=np.float64) * 0.5
    v[::211] = np.nan
    lance.write_dataset(pa.table({"f": pa.array(v, mask=np.arange(3000) % 401 == 7),
                                  "i": pa.array(np.arange(3000) - 500)}), uri, max_rows_per_file=1000)
    ds = lance_format.dataset(uri)
    ds.create_scalar_index("f", "ZONEMAP", rows_per_zone=64)
    ds.create_scalar_index("i", "ZONEMAP", rows_per_zone=64)
    idx = {c: zonemap.ZoneMapIndex(IndexDir(ds.scanner()._ctx.store, next(
        m.uuid for m in ds.scanner()._ctx.manifest.indices if m.name == f"{c}_idx"))) for c in ("f", "i")}
    for col, typ in (("f", pa.float64()), ("i", pa.int64())):
        lo, hi = (None if b is None else pa.scalar(b).cast(typ, safe=False) for b in bounds)
        for lo_inc, hi_inc in ((True, True), (False, True), (True, False), (False, False)):
            q = Range(lo, lo_inc, hi, hi_inc)
            whole, rest = idx[col].search_split(q)
            assert _sets(combine([whole, rest], all_of=False)) == _sets(idx[col].search_ranges(q))
            assert not _sets(whole) & _sets(rest)
