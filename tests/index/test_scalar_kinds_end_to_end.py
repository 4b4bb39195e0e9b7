"""ZONEMAP, BLOOMFILTER and NGRAM through the public API, against pylance 14.0.2 both ways.

Built with ``create_scalar_index`` (the registry), each kind is listed and used by pylance, ours
answers the filters it serves with pylance's rows and says so in ``explain_plan()``, and after
our compaction pylance still finds every live fragment covered.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf

N = 12_000
CASES = [("ZONEMAP", "num", "num > 990", "ZoneMap"),
         ("ZONEMAP", "num", "num IN (3, 5)", "ZoneMap"),
         ("BLOOMFILTER", "code", "code = 'abc5xyz'", "BloomFilter"),
         ("NGRAM", "code", "contains(code, 'c97')", "NGram")]


def _table() -> pa.Table:
    rng = np.random.default_rng(0)
    nums = rng.integers(0, 1000, N).astype(np.float64)
    nums[::97] = np.nan
    return pa.table({"id": pa.array(np.arange(N)), "num": pa.array(nums),
                     "code": pa.array([None if i % 101 == 0 else f"abc{i % 977}xyz" for i in range(N)])})


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.parametrize(("kind", "column", "flt", "display"), CASES)
def test_ours_is_listed_and_used_by_pylance(tmp_path: Path, kind: str, column: str, flt: str, display: str) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lf.write_dataset(_table(), uri, max_rows_per_file=3000)
    ds.delete("id % 13 = 0")
    ds.create_scalar_index(column, kind)
    theirs = lance.dataset(uri)
    assert [i["type"] for i in theirs.list_indices()] == [display]
    assert f"({display})" in theirs.scanner(filter=flt).explain_plan()
    assert _ids(theirs.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))
    assert _ids(ds.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))
    assert f"@{column}_idx({display})" in ds.scanner(filter=flt).explain_plan()


@pytest.mark.parametrize(("kind", "column", "flt", "display"), CASES)
def test_ours_answers_from_pylances_index(tmp_path: Path, kind: str, column: str, flt: str, display: str) -> None:
    uri = str(tmp_path / "t.lance")
    theirs = lance.write_dataset(_table(), uri, max_rows_per_file=3000)
    theirs.delete("id % 13 = 0")
    theirs.create_scalar_index(column, kind)
    ours = lf.dataset(uri)
    assert f"@{column}_idx({display})" in ours.scanner(filter=flt).explain_plan()
    assert _ids(ours.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))


@pytest.mark.parametrize(("kind", "column", "flt", "display"), CASES[1:])
def test_our_compaction_keeps_every_fragment_covered(tmp_path: Path, kind: str, column: str, flt: str,
                                                     display: str) -> None:
    uri = str(tmp_path / "t.lance")
    theirs = lance.write_dataset(_table(), uri, max_rows_per_file=1000)
    theirs.delete("id % 7 = 0")
    theirs.create_scalar_index(column, kind)
    ours = lf.dataset(uri)
    ours.optimize.compact_files(target_rows_per_fragment=4000)
    theirs = lance.dataset(uri)
    live = {f.fragment_id for f in theirs.get_fragments()}
    covered = set().union(*(set(i["fragment_ids"]) for i in theirs.list_indices()))
    assert live <= covered
    assert _ids(theirs.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))
    assert _ids(lf.dataset(uri).to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))


def test_optimize_indices_covers_appended_fragments(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lf.write_dataset(_table(), uri, max_rows_per_file=3000)
    for kind, column in (("ZONEMAP", "num"), ("NGRAM", "code")):
        ds.create_scalar_index(column, kind)
    lf.write_dataset(_table(), uri, mode="append")
    ds = lf.dataset(uri)
    ds.optimize.optimize_indices()
    for name in ("num_idx", "code_idx"):
        assert ds.stats.index_stats(name).num_unindexed_rows == 0
    theirs = lance.dataset(uri)
    for flt in ("num > 990", "contains(code, 'c97')"):
        assert _ids(theirs.to_table(filter=flt)) == _ids(theirs.to_table(filter=flt, use_scalar_index=False))
