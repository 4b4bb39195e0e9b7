"""Reads through inexact indices (ZONEMAP, BLOOMFILTER) check the filter on its own columns first and
take the other projected columns only at the rows it keeps: the same rows, columns, row ids and
addresses as pylance 14.0.2 (point, range, IN, deletions, limit, storage 2.0 and 2.2), and the other
columns are never read for a candidate the filter drops."""

from __future__ import annotations

from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import range_scan
from lance_format.table.read import FragmentScan


def _table(n: int, start: int = 0) -> pa.Table:
    i = np.arange(start, start + n)
    rng = np.random.default_rng(start)
    return pa.table({"id": pa.array(i, pa.int64()),
                     "ts": pa.array(i * 10, pa.int64()),
                     "key": pa.array(rng.integers(0, 500, n), pa.int64(), mask=i % 29 == 0),
                     "name": pa.array([f"n{v}" if v % 13 else None for v in i], pa.string()),
                     "x": pa.array(i * 0.5, pa.float64())})


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def both(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path_factory.mktemp(engine) / "z.lance")
        lance.write_dataset(_table(6000), uri, max_rows_per_file=2000, data_storage_version=request.param)
        lance.dataset(uri).delete("id % 31 = 0 OR (id >= 2500 AND id < 2700)")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("ts", "ZONEMAP")
        handle.create_scalar_index("key", "BLOOMFILTER")
        lance.write_dataset(_table(700, 6000), uri, mode="append")  # a fragment no index covers
        out.append(uri)
    return out[0], out[1]


FILTERS = ["ts >= 12340 AND ts < 15000", "ts = 40010", "ts > 59000", "ts < 300 OR ts > 66000",
           "key = 77", "key IN (3, 250, 499)", "key = 77 AND ts < 30000", "key IS NULL", "ts = -5"]
PROJECTIONS = [["id"], ["id", "name", "x"], ["name", "ts"], ["x", "key", "id"]]


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True),
                  key=lambda r: tuple((v is None, v) for v in r))


@pytest.mark.parametrize("flt", FILTERS)
@pytest.mark.parametrize("columns", PROJECTIONS)
def test_projected_rows_match_pylance(both: tuple[str, str], flt: str, columns: list[str]) -> None:
    ours, theirs = lance_format.dataset(both[0]), lance.dataset(both[1])
    a = ours.to_table(columns=columns, filter=flt, with_row_id=True, with_row_address=True)
    b = theirs.to_table(columns=columns, filter=flt, with_row_id=True, with_row_address=True)
    assert a.schema.equals(b.schema)
    assert _rows(a) == _rows(b)
    assert ours.count_rows(filter=flt) == theirs.count_rows(filter=flt) == a.num_rows


@pytest.mark.parametrize("flt", ["ts >= 12340 AND ts < 15000", "key IN (3, 250, 499)"])
def test_limit_gives_matching_rows_as_many_as_pylance(both: tuple[str, str], flt: str) -> None:
    ours, theirs = lance_format.dataset(both[0]), lance.dataset(both[1])
    matching = set(theirs.to_table(columns=["id"], filter=flt).column("id").to_pylist())
    for limit in (1, 5, 40):
        a = ours.to_table(columns=["id", "name"], filter=flt, limit=limit, batch_size=16)
        b = theirs.to_table(columns=["id", "name"], filter=flt, limit=limit, batch_size=16)
        assert a.num_rows == b.num_rows
        assert set(a.column("id").to_pylist()) <= matching


def test_other_columns_taken_only_at_kept_rows(both: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[tuple[str, ...], int]] = []
    take, read = FragmentScan.take, FragmentScan.read

    def spy_take(self: FragmentScan, offsets: np.ndarray) -> pa.RecordBatch:
        seen.append((tuple(self.columns), int(offsets.size)))
        return take(self, offsets)

    def spy_read(self: FragmentScan, start: int, stop: int) -> pa.RecordBatch:
        if not inside:
            seen.append((tuple(self.columns), stop - start))
        return read(self, start, stop)

    inside: list[bool] = []

    def spy_rows(scan: FragmentScan, start: int, stop: int) -> pa.RecordBatch:  # fixed-width columns, decoded directly
        seen.append((tuple(scan.columns), stop - start))
        inside.append(True)
        try:
            return rows(scan, start, stop)
        finally:
            inside.pop()

    rows = range_scan.read_rows
    ours = lance_format.dataset(both[0])
    ours.to_table(columns=["id"], filter="key = 77")  # warm: readers may be cached by the session
    seen.clear()
    monkeypatch.setattr(FragmentScan, "take", spy_take)
    monkeypatch.setattr(FragmentScan, "read", spy_read)
    monkeypatch.setattr(range_scan, "read_rows", spy_rows)
    got = ours.to_table(columns=["id", "name"], filter="key = 77")
    indexed = [(cols, n) for cols, n in seen if "id" in cols or "name" in cols]
    # the unindexed fragment is scanned whole (all columns); in covered ones only kept rows are taken
    assert sum(n for _, n in indexed) <= got.num_rows + 700
    assert any(cols == ("key",) for cols, _ in seen)
