"""Opened BTREE / BITMAP segments and BTREE pages are reused across queries and dataset handles.

A long-lived process opens a dataset per request: the second handle on the same version answers
from the session's index cache (no lookup read, no page read for the same values), a new version
opens the segment again, and every answer stays pylance 14.0.2's. Builds sort integer-like
columns through numpy and must still write pylance's pages (ties keep scan order, as Arrow's
stable sort did).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader
from lance_format.index import btree
from lance_format.index.scan import OPENED_SEGMENT, TAKE_SCAN
from lance_format.session import Session, default_session


def _table(n: int = 6000, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "k": pa.array(rng.integers(0, n // 3, n), pa.int64()),
        "cat": pa.array(rng.choice(np.array([f"c{i:02d}" for i in range(30)], dtype=object), n), pa.string()),
    })


FILTERS = ["k = 17", "k BETWEEN 100 AND 180", "cat = 'c07'", "k >= 1990", "cat IN ('c01', 'c29') AND k < 500"]


def _ids(ds: Any, flt: str) -> list[int]:
    return sorted(ds.to_table(columns=["id"], filter=flt).column("id").to_pylist())


@pytest.fixture
def indexed(make_path: Callable[[str], str]) -> str:
    path = make_path("reuse")
    ds = lance_format.write_dataset(_table(), path, mode="create", max_rows_per_file=1000)
    ds.create_scalar_index("k", "BTREE")
    ds.create_scalar_index("cat", "BITMAP")
    return path


def _count_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls = [0]
    original = getattr(cls, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_a_second_handle_on_the_same_version_opens_no_segment_and_reads_no_page_again(
        indexed: str, monkeypatch: pytest.MonkeyPatch) -> None:
    default_session().clear()
    opens = _count_calls(monkeypatch, btree.BTreeIndex, "__init__")
    runs = _count_calls(monkeypatch, btree.BTreeIndex, "_read_run")
    theirs = lance.dataset(indexed)
    first = _ids(lance_format.dataset(indexed), "k = 17")
    assert opens[0] == 1 and runs[0] == 1
    assert default_session().index_cache.count(OPENED_SEGMENT) == 1
    second = _ids(lance_format.dataset(indexed), "k = 17")
    assert opens[0] == 1 and runs[0] == 1  # segment and page from the session
    assert first == second == _ids(theirs, "k = 17")
    for flt in FILTERS:  # other values, other pages: still pylance's rows
        assert _ids(lance_format.dataset(indexed), flt) == _ids(theirs, flt), flt
    assert opens[0] == 1


def test_a_new_version_opens_the_segment_again_and_answers_with_the_new_rows(indexed: str) -> None:
    default_session().clear()
    old = lance_format.dataset(indexed)
    assert _ids(old, "k = 17") == _ids(lance.dataset(indexed), "k = 17")
    extra = pa.table({"id": pa.array([10_000, 10_001], pa.int64()), "k": pa.array([17, 17], pa.int64()),
                      "cat": pa.array(["c07", "zz"], pa.string())})
    lance_format.write_dataset(extra, indexed, mode="append")
    lance_format.dataset(indexed).delete("id = 5 OR id = 6 OR id = 7")
    new = lance_format.dataset(indexed)
    theirs = lance.dataset(indexed)
    for flt in FILTERS:
        assert _ids(new, flt) == _ids(theirs, flt), flt
        assert _ids(old, flt) == _ids(lance.dataset(indexed, version=old.version), flt), flt
    assert default_session().index_cache.count(OPENED_SEGMENT) == 4  # two segments, two versions


def test_a_session_without_index_cache_still_answers_like_pylance(indexed: str) -> None:
    session = Session(index_cache_size_bytes=0)
    theirs = lance.dataset(indexed)
    for _ in range(2):
        for flt in FILTERS:
            assert _ids(lance_format.dataset(indexed, session=session), flt) == _ids(theirs, flt), flt
    assert len(session.index_cache) == 0


def test_damage_after_the_session_is_cleared_is_seen(indexed: str) -> None:
    assert _ids(lance_format.dataset(indexed), "k = 17")  # cached
    (data,) = Path(indexed).glob("_indices/*/page_data.lance")
    data.write_bytes(data.read_bytes()[:-40])  # a truncated file
    default_session().clear()
    with pytest.raises(CorruptFileError):
        lance_format.dataset(indexed).to_table(filter="k = 17")


@pytest.mark.parametrize("typ", [pa.int64(), pa.int8(), pa.uint64(), pa.int32(), pa.timestamp("us"),
                                 pa.date32(), pa.uint16()])
def test_integer_builds_write_pylance_pages(make_path: Callable[[str], str],
                                                            typ: pa.DataType) -> None:
    rng = np.random.default_rng(11)
    n = 9000
    raw = rng.integers(0, 50, n)
    if typ == pa.int8():
        raw = raw - 25
    if typ == pa.uint64():
        raw = raw.astype(np.uint64) + np.uint64(2**63)  # a span that still fits, above int64
    if typ == pa.date32():
        values = pa.array(raw.astype(np.int32)).view(typ)
    else:
        values = pa.array(raw).cast(typ) if typ != pa.uint64() else pa.array(raw, typ)
    table = pa.table({"v": values})
    got: dict[str, pa.Table] = {}
    for who in ("ours", "theirs"):
        path = make_path(f"sort_{who}")
        lance.write_dataset(table, path, max_rows_per_file=2500)
        if who == "ours":
            lance_format.dataset(path).create_scalar_index("v", "BTREE")
        else:
            lance.dataset(path).create_scalar_index("v", "BTREE")
        (page_data,) = Path(path).glob("_indices/*/page_data.lance")
        got[who] = LanceFileReader(str(page_data)).read_all().to_table()
    # the same values page by page; pylance's parallel sort orders the rows of one value its own way
    assert got["ours"].column("values").equals(got["theirs"].column("values"))
    pairs = {who: sorted(zip(t.column("values").to_pylist(),
                             t.column("ids").to_pylist(), strict=True)) for who, t in got.items()}
    assert pairs["ours"] == pairs["theirs"]


def test_integer_order_matches_arrows_stable_sort() -> None:
    rng = np.random.default_rng(5)
    cases = [pa.array(rng.integers(-2**62, 2**62, 5000)),  # span too wide for the packed key
             pa.array(rng.integers(0, 2**64 - 1, 5000, dtype=np.uint64)),
             pa.array(rng.integers(-3, 3, 5000).astype(np.int16)),
             pa.array(rng.integers(0, 9, 5000)).cast(pa.duration("ms"))]
    for arr in cases:
        ids = np.arange(len(arr), dtype=np.uint64)[::-1].copy()
        values, out = btree.sort_training_data(arr, ids)
        order = pc.array_sort_indices(arr, null_placement="at_start").to_numpy()
        assert values.equals(arr.take(pa.array(order))) and np.array_equal(out, ids[order]), arr.type


@pytest.mark.parametrize(("version", "kept"), [("2.1", True), ("2.2", True), ("2.0", True)])  # 2.0 takes drop their pages
def test_fragment_readers_for_candidate_takes_are_kept_only_for_files_whose_takes_keep_no_pages(
        make_path: Callable[[str], str], version: str, kept: bool) -> None:
    path = make_path(f"take_{version}")
    ds = lance_format.write_dataset(_table(), path, mode="create", max_rows_per_file=1000,
                                    data_storage_version=version)
    ds.create_scalar_index("k", "BTREE")
    default_session().clear()
    theirs = lance.dataset(path)
    for _ in range(2):
        assert _ids(lance_format.dataset(path), "k = 17") == _ids(theirs, "k = 17")
    assert (default_session().index_cache.count(TAKE_SCAN) > 0) == kept


def test_takes_projecting_a_nested_column_keep_no_readers(make_path: Callable[[str], str]) -> None:
    path = make_path("nested")
    table = _table().append_column("tags", pa.array([[i % 5, i % 7] for i in range(6000)], pa.list_(pa.int64())))
    ds = lance_format.write_dataset(table, path, mode="create", max_rows_per_file=1000)
    ds.create_scalar_index("k", "BTREE")
    default_session().clear()
    theirs = lance.dataset(path)
    full = lance_format.dataset(path).to_table(filter="k = 17").sort_by("id")
    assert full.equals(theirs.to_table(filter="k = 17").sort_by("id"))
    # the filter's own column is taken first and its readers may stay; none projecting "tags" does
    kept = default_session().index_cache._by_kind.get(TAKE_SCAN.name, {})
    assert all("tags" not in key[3] for key in kept)
    assert _ids(lance_format.dataset(path), "k = 17") == _ids(theirs, "k = 17")
    assert default_session().index_cache.count(TAKE_SCAN) > 0
