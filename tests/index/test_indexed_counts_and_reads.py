"""Indexed counts and reads: ``count_rows`` answered by exact indices (BTREE, BITMAP) counts their live
candidates without reading the rows and equals pylance 14.0.2's count (nulls, NaN, deletions, an
unindexed fragment, terms no index answers); inexact kinds (ZONEMAP) decode only the row ranges
around their candidates; a BITMAP segment keeps decoded keys for repeated queries."""

from __future__ import annotations

from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import bitmap
from lance_format.index.scan import dense_spans
from lance_format.index.store import IndexDir
from lance_format.storage import open_store
from lance_format.table.read import FragmentScan


def _table(n: int, start: int = 0) -> pa.Table:
    i = np.arange(start, start + n)
    f = (i % 97).astype(np.float64)
    f[i % 13 == 0] = np.nan
    return pa.table({"id": pa.array(i, pa.int64()),
                     "k": pa.array(i % 301, pa.int64(), mask=i % 11 == 0),
                     "f": pa.array(f, mask=i % 17 == 0),
                     "cat": pa.array([f"c{v % 7}" if v % 19 else None for v in i], pa.string()),
                     "ts": pa.array(i * 10, pa.int64())})


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    out = []
    for engine in ("ours", "pylance"):
        uri = str(tmp_path_factory.mktemp(engine) / "c.lance")
        lance.write_dataset(_table(3000), uri, max_rows_per_file=1000)
        ds = lance.dataset(uri)
        ds.delete("id % 23 = 0 OR (id >= 1200 AND id < 1300)")
        handle = lance_format.dataset(uri) if engine == "ours" else lance.dataset(uri)
        handle.create_scalar_index("k", "BTREE")
        handle.create_scalar_index("f", "BTREE")
        handle.create_scalar_index("cat", "BITMAP")
        handle.create_scalar_index("ts", "ZONEMAP")
        lance.write_dataset(_table(500, 3000), uri, mode="append")  # a fragment no index covers
        out.append(uri)
    return out[0], out[1]


FILTERS = ["k = 5", "k < 40", "k >= 290", "k BETWEEN 10 AND 20", "k IN (1, 2, 300)", "k IS NULL",
           "f > 50", "f = 3", "f < 10.5", "f IS NULL", "cat = 'c3'", "cat IN ('c1', 'c6')", "cat IS NULL",
           "cat = 'nope'", "k = 7 AND cat = 'c0'", "k > 100 AND f < 20", "k = 5 AND id > 1000",
           "ts >= 5000 AND ts < 9000", "cat > 'c4'", "k + 0 = 5"]


@pytest.mark.parametrize("flt", FILTERS)
def test_count_rows_with_indices_equals_pylances(both: tuple[str, str], flt: str) -> None:
    ours, theirs = both
    want = lance.dataset(theirs).count_rows(filter=flt)
    assert lance_format.dataset(ours).count_rows(filter=flt) == want
    assert lance_format.dataset(ours).to_table(filter=flt).num_rows == want


def test_count_answered_by_exact_indices_reads_no_indexed_row(both: tuple[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = both
    ds = lance_format.dataset(ours)
    covered = {f.fragment_id for f in ds.get_fragments()} - {max(f.fragment_id for f in ds.get_fragments())}
    seen: list[int] = []
    for name in ("take", "read"):
        real: Callable[..., pa.RecordBatch] = getattr(FragmentScan, name)

        def spy(self: FragmentScan, *args: object, _real: Callable[..., pa.RecordBatch] = real) -> pa.RecordBatch:
            seen.append(self.frag.id)
            return _real(self, *args)

        monkeypatch.setattr(FragmentScan, name, spy)
    flt = "k < 40 AND cat = 'c2'"
    assert ds.count_rows(filter=flt) == lance.dataset(theirs).count_rows(filter=flt)
    assert not covered & set(seen)  # only the unindexed fragment was read


def test_dense_candidates_decode_only_the_ranges_around_them() -> None:
    offsets = np.array([5, 6, 7, 3000, 3001, 9000], np.uint32)
    assert dense_spans(offsets, step=2, gap=100) == [(5, 7), (7, 8), (3000, 3002), (9000, 9001)]
    assert dense_spans(offsets, step=10_000, gap=5000) == [(5, 3002), (9000, 9001)]
    assert dense_spans(np.empty(0, np.uint32), 10) == []


def test_bitmap_keys_decoded_once_serve_later_queries(both: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = both
    want = lance.dataset(theirs).to_table(filter="cat = 'c4'").num_rows
    ds = lance_format.dataset(ours)
    assert ds.to_table(filter="cat = 'c4'").num_rows == want
    calls: list[int] = []
    real = bitmap.decode_row_set

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bitmap, "decode_row_set", counting)
    for _ in range(3):
        assert lance_format.dataset(ours).to_table(filter="cat = 'c4'").num_rows == want
    assert calls == []


def test_bitmap_memo_stays_within_its_budget(monkeypatch: pytest.MonkeyPatch, both: tuple[str, str]) -> None:
    ours, theirs = both
    uuid = next(i["uuid"] for i in lance.dataset(ours).list_indices() if i["type"] == "Bitmap")
    index = bitmap.BitmapIndex(IndexDir(open_store(ours), uuid), lambda f: None)
    monkeypatch.setattr(bitmap, "MEMO_BYTES", 8000)  # about two keys' rows
    sizes = []
    for which in ([0], [1, 2], [3], [0]):
        rows = index.key_rows(np.array(which, np.int64))
        sizes.append(index._memo_bytes)
        assert all(not r.flags.writeable for r in rows if r.nbytes <= 8000)
    assert max(sizes) <= 8000 and sizes[-1] > 0
    assert [r.tolist() for r in index.key_rows(np.arange(4))] == \
        [r.tolist() for r in bitmap.BitmapIndex(IndexDir(open_store(ours), uuid), lambda f: None).key_rows(np.arange(4))]
