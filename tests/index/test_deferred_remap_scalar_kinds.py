"""NGRAM, ZONEMAP and BLOOMFILTER through a deferred-remap compaction, against pylance 14.0.2 both ways.

A compaction with ``defer_index_remap=True`` rewrites no index and records a
``__lance_frag_reuse`` entry instead; both scanners must then answer every filter the index
serves exactly as a full scan does, from the index. ``optimize_indices`` afterwards folds the
entry in, and pylance finds every live fragment covered.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.index._compat import manifest_indices
from lance_format.index.models import FRAG_REUSE_INDEX

N = 6_000
KINDS = {
    "NGRAM": ("code", "NGram", ["contains(code, 'c97')", "contains(code, '12x')", "contains(code, 'zzzz')"]),
    "ZONEMAP": ("num", "ZoneMap", ["num > 990", "num < 3", "num BETWEEN 400 AND 402", "num = 17", "num IN (3, 5)",
                                   "num >= 400 AND num < 405", "num > 500 AND num >= 990 AND num <= 995"]),
    "BLOOMFILTER": ("code", "BloomFilter", ["code = 'abc5xyz'", "code IN ('abc17xyz', 'abc900xyz')",
                                           "code = 'nothing'"]),
}
WHO = ["ours", "pylance"]


def _table() -> pa.Table:
    rng = np.random.default_rng(1)
    nums = rng.integers(0, 1000, N).astype(np.float64)
    nums[::97] = np.nan
    return pa.table({"id": pa.array(np.arange(N)), "num": pa.array(nums),
                     "code": pa.array([None if i % 101 == 0 else f"abc{i % 977}xyz" for i in range(N)])})


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _dataset(uri: str, kind: str, builder: str) -> None:
    column = KINDS[kind][0]
    if builder == "ours":
        ds = lf.write_dataset(_table(), uri, max_rows_per_file=500)
        ds.delete("id % 7 = 0")
        ds.create_scalar_index(column, kind)
    else:
        theirs = lance.write_dataset(_table(), uri, max_rows_per_file=500)
        theirs.delete("id % 7 = 0")
        theirs.create_scalar_index(column, kind)


def _compact(uri: str, who: str) -> None:
    if who == "ours":
        lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=2000, defer_index_remap=True)
    else:
        lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=2000, defer_index_remap=True)


def _answers_from_index(uri: str, kind: str) -> None:
    _, display, filters = KINDS[kind]
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    for flt in filters:
        truth = _ids(theirs.to_table(filter=flt, use_scalar_index=False))
        assert _ids(ours.to_table(filter=flt)) == truth, flt
        assert _ids(theirs.to_table(filter=flt)) == truth, flt
        assert f"({display})" in ours.scanner(filter=flt).explain_plan(), flt
        assert f"({display})" in theirs.scanner(filter=flt).explain_plan(), flt
    theirs.validate()


def _every_live_fragment_covered(uri: str, kind: str) -> None:
    theirs = lance.dataset(uri)
    live = {f.fragment_id for f in theirs.get_fragments()}
    names = [i["name"] for i in theirs.list_indices()]
    assert FRAG_REUSE_INDEX not in names
    covered = set().union(*(set(i["fragment_ids"]) for i in theirs.list_indices()))
    assert live <= covered
    column = KINDS[kind][0]
    assert theirs.stats.index_stats(f"{column}_idx")["num_unindexed_rows"] == 0
    assert "unindexed_fragments_scanned=0" in lf.dataset(uri).scanner(filter=KINDS[kind][2][0]).explain_plan()


@pytest.mark.parametrize("compactor", WHO)
@pytest.mark.parametrize("builder", WHO)
@pytest.mark.parametrize("kind", list(KINDS))
def test_deferred_compaction_keeps_answers_and_index_use(tmp_path: Path, kind: str, builder: str,
                                                         compactor: str) -> None:
    uri = str(tmp_path / "t.lance")
    _dataset(uri, kind, builder)
    _compact(uri, compactor)
    names = {m.name for m in manifest_indices(lf.dataset(uri).manifest)}
    assert FRAG_REUSE_INDEX in names
    _answers_from_index(uri, kind)
    lf.dataset(uri).optimize.optimize_indices()
    _every_live_fragment_covered(uri, kind)
    _answers_from_index(uri, kind)


@pytest.mark.parametrize("kind", list(KINDS))
def test_pylance_optimize_folds_our_deferred_compaction(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "t.lance")
    _dataset(uri, kind, "ours")
    _compact(uri, "ours")
    lance.dataset(uri).optimize.optimize_indices()
    _answers_from_index(uri, kind)


@pytest.mark.parametrize("kind", list(KINDS))
def test_two_deferred_compactions_then_an_append(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "t.lance")
    _dataset(uri, kind, "pylance")
    lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000, defer_index_remap=True)
    lf.dataset(uri).delete("id % 11 = 0")
    lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=4000, defer_index_remap=True)
    _answers_from_index(uri, kind)
    lf.write_dataset(_table().slice(0, 700), uri, mode="append")
    lf.dataset(uri).optimize.optimize_indices()
    _every_live_fragment_covered(uri, kind)
    _answers_from_index(uri, kind)


@pytest.mark.parametrize("flt", ["num >= 400 AND num < 405", "num > 10 AND num < 10", "num >= 7 AND num <= 7",
                                 "num > 7 AND num >= 7 AND num < 9 AND num <= 9", "num < 900 AND id < 3000",
                                 "num > 100 AND num > 990 AND num IS NOT NULL"])
def test_zonemap_range_conjunctions_answer_as_a_scan(tmp_path: Path, flt: str) -> None:
    """Ranges ANDed on a ZONEMAP column are one zone pass (``zonemap.intersect_ranges``): same rows."""
    uri = str(tmp_path / "t.lance")
    _dataset(uri, "ZONEMAP", "ours")
    truth = _ids(lance.dataset(uri).to_table(filter=flt, use_scalar_index=False))
    assert _ids(lf.dataset(uri).to_table(filter=flt)) == truth
    assert "ZoneMap" in lf.dataset(uri).scanner(filter=flt).explain_plan()
