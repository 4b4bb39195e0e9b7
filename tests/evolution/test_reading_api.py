"""Reading-API gaps of issue 11: projections, lineage columns, sample, take by row id, asof, merge."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, SchemaError, VersionNotFoundError

NESTED = pa.table({"s": pa.array([{"x": i, "y": str(i)} for i in range(10)]), "k": list(range(10))})


@pytest.fixture(params=[False, True], ids=["addr", "stable"])
def history(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    uri = str(tmp_path / "h")
    lance.write_dataset(NESTED, uri, max_rows_per_file=4, enable_stable_row_ids=request.param)
    lance.dataset(uri).delete("k < 3")
    lance_format.dataset(uri).update({"k": "k + 100"}, where="k = 5")
    return uri


@pytest.mark.parametrize("kwargs", [
    {"columns": ["s.x", "k"]},
    {"columns": {"kk": "k * 2", "sx": "s.x"}},
    {"columns": {"x": "k + 1"}, "filter": "k > 2", "with_row_id": True},
    {"columns": ["_rowaddr", "k", "_row_created_at_version", "_row_last_updated_at_version", "_rowid"]},
    {"columns": ["k"], "with_row_address": True},
    {"columns": ["k", "s.y"], "filter": "s.x > 4", "limit": 2, "offset": 1},
])
def test_projections_match_pylance(history: str, kwargs: dict[str, Any]) -> None:
    assert lance_format.dataset(history).to_table(**kwargs).equals(lance.dataset(history).to_table(**kwargs))


def test_strict_batch_size_refills_batches_after_deletions(history: str) -> None:
    ours = [b.num_rows for b in lance_format.dataset(history).to_batches(batch_size=2, strict_batch_size=True)]
    theirs = [b.num_rows for b in lance.dataset(history).to_batches(batch_size=2, strict_batch_size=True)]
    assert ours == theirs == [2, 2, 2, 1]


def test_unknown_projection_is_refused(history: str) -> None:
    with pytest.raises(InvalidInputError, match="nope"):
        lance_format.dataset(history).to_table(columns=["s.nope"])
    with pytest.raises(InvalidInputError, match="zz"):
        lance_format.dataset(history).to_table(columns={"a": "zz + 1"})


def test_take_rows_by_row_id_matches_pylance(history: str) -> None:
    ours, theirs = lance_format.dataset(history), lance.dataset(history)
    ids = theirs.to_table(columns=["k"], with_row_id=True).column("_rowid").to_pylist()
    wanted = [ids[3], ids[0], ids[-1], ids[3]]
    assert ours._take_rows(wanted).equals(theirs._take_rows(wanted))
    assert ours._take_rows(wanted, columns={"kk": "k * 10"}).column("kk").to_pylist() == \
        [10 * k for k in theirs._take_rows(wanted, columns=["k"]).column("k").to_pylist()]


def test_take_with_paths_and_expressions(history: str) -> None:
    ours = lance_format.dataset(history)
    got = ours.take([2, 0], columns={"sx": "s.x", "k2": "k * 2"})
    assert got.to_pydict() == lance.dataset(history).take([2, 0], columns={"sx": "s.x", "k2": "k * 2"}).to_pydict()
    assert ours.take([1], columns=["s.y"]).column("s.y").to_pylist() == ["4"]


def test_sample_returns_distinct_live_rows(history: str) -> None:
    ds = lance_format.dataset(history)
    got = ds.sample(5, columns=["k"])
    assert got.num_rows == 5 and len(set(got.column("k").to_pylist())) == 5
    assert set(got.column("k").to_pylist()) <= set(ds.to_table().column("k").to_pylist())
    with pytest.raises(InvalidInputError):
        ds.sample(100)


def test_asof_opens_the_version_current_at_that_time(tmp_path: Path) -> None:
    uri = str(tmp_path / "asof")
    ds = lance_format.write_dataset(pa.table({"x": [1, 2, 3]}), uri)
    ds.delete("x = 1")
    ds.delete("x = 2")
    for v in lance.dataset(uri).versions():
        try:
            expected = lance.dataset(uri, asof=v["timestamp"]).version
        except ValueError:
            with pytest.raises(VersionNotFoundError):
                lance_format.dataset(uri, asof=v["timestamp"])
            continue
        assert lance_format.dataset(uri, asof=v["timestamp"]).version == expected
    assert lance_format.dataset(uri, asof=dt.datetime.now()).version == 3


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_fragment_merge_and_dataset_merge_match_pylance(tmp_path: Path, stable: bool) -> None:
    base = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    right = pa.table({"x": [1, 3, 4], "z": ["d", "f", "g"]})
    results = {}
    for name, mod in (("ours", lance_format), ("pylance", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(base, uri, max_rows_per_file=2, enable_stable_row_ids=stable).delete("x = 2")
        ds: Any = mod.dataset(uri)
        merged, schema = [], None
        for frag in ds.get_fragments():
            meta, schema = frag.merge(right, "x")
            merged.append(meta)
        mod.LanceDataset.commit(uri, mod.LanceOperation.Merge(merged, schema), read_version=ds.version)
        mod.dataset(uri).merge(pa.table({"y": ["a", "c"], "w": [10, 30]}), "y")
        results[name] = lance.dataset(uri).to_table()
        assert lance_format.dataset(uri).to_table().equals(results[name])
    assert results["ours"].equals(results["pylance"])


def test_merge_with_clashing_columns_is_refused(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(pa.table({"x": [1], "y": [2]}), tmp_path / "m")
    with pytest.raises(SchemaError, match="clashing"):
        ds.merge(pa.table({"x": [1], "y": [3]}), "x")
