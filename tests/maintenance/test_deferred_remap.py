"""Compaction with ``defer_index_remap=True`` and with stable row ids, checked against pylance.

Deferred: our ``Rewrite`` carries a ``__lance_frag_reuse`` entry (in the manifest only,
as pylance's); pylance must answer from the untouched indices through it exactly what a
full scan returns, and so must we. Stable row ids: no index is remapped but every
index's fragment bitmap moves to the new fragments.
"""

from __future__ import annotations

from pathlib import Path

import lance
import lance.optimize
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import frag_reuse
from lance_format.index.models import FRAG_REUSE_INDEX

from .helpers import assert_same_at_every_version

FILTERS = ["a = 3", "a < 5", "a BETWEEN 10 AND 12", "s = 'y'", "s IN ('x', 'z')", "a IS NULL",
           "a = 7 OR s = 'w'", "a > 30 AND s = 'x'"]


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n) + seed * 10_000, pa.int64()),
        "a": pa.array(rng.integers(0, 40, n), pa.int64(), mask=rng.random(n) < 0.05),
        "s": pa.array(rng.choice(np.array(["x", "y", "z", "w"], dtype=object), n), pa.string()),
    })


def _indexed(path: Path, *, writer: str, dsv: str = "2.2", stable: bool = False) -> str:
    """Six 100-row fragments, BTREE on ``a`` and BITMAP on ``s``, some rows deleted."""
    uri = str(path)
    if writer == "ours":
        lance_format.write_dataset(_table(600, 0), uri, mode="create", max_rows_per_file=100,
                                   data_storage_version=dsv, enable_stable_row_ids=stable)  # type: ignore[arg-type]
        ds = lance_format.dataset(uri)
        ds.create_scalar_index("a", "BTREE")
        ds.create_scalar_index("s", "BITMAP")
        ds.delete("id % 7 = 0")
    else:
        lance.write_dataset(_table(600, 0), uri, max_rows_per_file=100, data_storage_version=dsv,
                            enable_stable_row_ids=stable)
        theirs = lance.dataset(uri)
        theirs.create_scalar_index("a", "BTREE")
        theirs.create_scalar_index("s", "BITMAP")
        theirs.delete("id % 7 = 0")
    return uri


def _rowids(t: pa.Table) -> list[int]:
    return sorted(t.column("_rowid").to_pylist())


def _answers_like_a_full_scan(uri: str, *, expect_index: bool = True) -> None:
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    theirs.validate()
    for flt in FILTERS:
        full = _rowids(theirs.scanner(filter=flt, with_row_id=True, use_scalar_index=False).to_table())
        assert _rowids(theirs.scanner(filter=flt, with_row_id=True).to_table()) == full, flt
        assert _rowids(ours.scanner(filter=flt, with_row_id=True).to_table()) == full, flt
        if expect_index:
            assert "ScalarIndexQuery" in theirs.scanner(filter=flt).explain_plan(), flt
            assert "ScalarIndexQuery" in ours.scanner(filter=flt).explain_plan(), flt


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_deferred_compaction_records_a_reuse_entry_pylance_honours(tmp_path: Path, dsv: str, writer: str) -> None:
    uri = _indexed(tmp_path / "d", writer=writer, dsv=dsv)
    before = {i["name"]: i["uuid"] for i in lance.dataset(uri).list_indices()}
    ds = lance_format.dataset(uri)
    metrics = ds.optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    assert metrics.fragments_removed == 6
    # No index was rewritten: the same segments, now read through the reuse entry.
    after = {i["name"]: i["uuid"] for i in lance.dataset(uri).list_indices()}
    assert {k: v for k, v in after.items() if k != FRAG_REUSE_INDEX} == before
    entry = frag_reuse.current_entry(ds.manifest.indices)
    assert entry is not None and entry.fields == ()
    # As pylance records it: the version the Rewrite was applied to (after ReserveFragments).
    assert entry.dataset_version == ds.version - 1
    (version,) = frag_reuse.decode_details(entry)
    assert version.dataset_version == ds.version - 1
    assert entry.fragment_bitmap == frozenset(f.id for f in ds.manifest.fragments)
    # The entry lives in the manifest only, never in the transaction file (as pylance's).
    txn = ds.read_transaction()
    assert txn is not None and txn.operation.kind == "rewrite" and txn.operation.rewritten_indices == ()
    assert txn.operation.frag_reuse_index is None
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


@pytest.mark.parametrize("compactor", ["ours", "pylance"])
def test_chained_deferred_compactions_stay_right_and_optimize_indices_folds_them(tmp_path: Path,
                                                                                  compactor: str) -> None:
    uri = _indexed(tmp_path / "d", writer="ours")

    def compact(**kw: object) -> None:
        (lance if compactor == "pylance" else lance_format).dataset(uri).optimize.compact_files(**kw)

    compact(target_rows_per_fragment=150, defer_index_remap=True)
    lance_format.write_dataset(_table(60, 1), uri, mode="append")
    lance_format.dataset(uri).delete("id % 5 = 1")
    compact(target_rows_per_fragment=1000, defer_index_remap=True)
    ds = lance_format.dataset(uri)
    entry = frag_reuse.current_entry(ds.manifest.indices)
    assert entry is not None and len(frag_reuse.decode_details(entry)) == 2
    # Both libraries plan the second compaction alike: the appended fragment is not
    # grouped with the (effectively) indexed ones.
    assert [[f.id for f in g.new_fragments] for v in frag_reuse.decode_details(entry)[1:] for g in v.groups] \
        == [[10], [11]]
    _answers_like_a_full_scan(uri)
    ds.optimize.optimize_indices()
    assert FRAG_REUSE_INDEX not in {m.name for m in lance_format.dataset(uri).manifest.indices}
    assert lance.dataset(uri).stats.index_stats("a_idx")["num_unindexed_rows"] == 0
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


def test_pylance_optimize_indices_folds_our_reuse_entry(tmp_path: Path) -> None:
    uri = _indexed(tmp_path / "d", writer="ours", dsv="2.0")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=250, defer_index_remap=True)
    lance.dataset(uri).optimize.optimize_indices()
    _answers_like_a_full_scan(uri)
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_stable_row_id_compaction_moves_index_bitmaps(tmp_path: Path, dsv: str, writer: str) -> None:
    uri = _indexed(tmp_path / "d", writer=writer, dsv=dsv, stable=True)
    before = {i["name"]: i for i in lance.dataset(uri).list_indices()}
    ds = lance_format.dataset(uri)
    plan = [t.fragment_ids for t in lance_format.optimize.Compaction.plan(ds, {"target_rows_per_fragment": 250}).tasks]
    theirs = lance.optimize.Compaction.plan(lance.dataset(uri), {"target_rows_per_fragment": 250}).tasks
    assert plan == [tuple(f.id for f in t.fragments) for t in theirs]  # nothing held back
    ds.optimize.compact_files(target_rows_per_fragment=250)
    live = {f.id for f in lance_format.dataset(uri).manifest.fragments}
    assert live.isdisjoint(range(6))
    for name, info in {i["name"]: i for i in lance.dataset(uri).list_indices()}.items():
        assert set(info["fragment_ids"]) == live, name  # the bitmap followed the rows
        if before[name]["type"] == "Bitmap":
            assert info["uuid"] == before[name]["uuid"]  # holds stable row ids: not rewritten
    assert lance.dataset(uri).stats.index_stats("a_idx")["num_unindexed_rows"] == 0
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


def test_immediate_compaction_after_a_deferred_one_remaps_through_the_reuse_entry(tmp_path: Path) -> None:
    """Stored bitmaps still name the deferred compaction's sources: the remap composes both moves."""
    uri = _indexed(tmp_path / "d", writer="ours")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=150, defer_index_remap=True)
    lance_format.write_dataset(_table(60, 1), uri, mode="append")
    ds = lance_format.dataset(uri)
    appended = max(f.id for f in ds.manifest.fragments)
    ds.optimize.compact_files(target_rows_per_fragment=1000)
    txn = ds.read_transaction()
    assert txn is not None and len(txn.operation.rewritten_indices) == 2
    live = {f.id for f in ds.manifest.fragments}
    for info in lance.dataset(uri).list_indices():
        if info["name"] != FRAG_REUSE_INDEX:
            assert set(info["fragment_ids"]) == live - {appended}, info  # all but the unindexed append
    _answers_like_a_full_scan(uri)
    lance_format.dataset(uri).optimize.optimize_indices()
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


@pytest.mark.slow
def test_reuse_details_pylance_moved_to_an_external_file_are_read(tmp_path: Path) -> None:
    """pylance moves details past 200 KiB into ``_indices/{uuid}/details.binpb``; we read and extend them."""
    uri = str(tmp_path / "d")
    n = 260_000  # half the rows deleted at random: ~1 KB of surviving addresses per fragment
    r = np.random.default_rng(0).random(n)
    lance.write_dataset(pa.table({"id": pa.array(np.arange(n), pa.int64()),
                                  "a": pa.array(np.arange(n) % 97, pa.int64()), "r": r}), uri, max_rows_per_file=1000)
    theirs = lance.dataset(uri)
    theirs.create_scalar_index("a", "BTREE")
    theirs.delete("r < 0.5")
    theirs.optimize.compact_files(target_rows_per_fragment=100_000, defer_index_remap=True)
    ds = lance_format.dataset(uri)
    entry = frag_reuse.current_entry(ds.manifest.indices)
    assert entry is not None and (tmp_path / "d" / "_indices" / entry.uuid / "details.binpb").exists()
    for flt in ["a = 5", "a < 3 AND id > 100000"]:
        full = sorted(theirs.to_table(filter=flt, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        assert sorted(ds.to_table(filter=flt, columns=["id"])["id"].to_pylist()) == full
        assert "ScalarIndexQuery" in ds.scanner(filter=flt).explain_plan()
    lance_format.write_dataset(pa.table({"id": pa.array([n], pa.int64()), "a": pa.array([5], pa.int64()),
                                         "r": pa.array([1.0])}), uri, mode="append")
    lance_format.dataset(uri).delete("a = 1")
    ds = lance_format.dataset(uri)  # the compacted fragment, now with deletions, is rewritten alone
    ds.optimize.compact_files(target_rows_per_fragment=200_000, materialize_deletions_threshold=0.001,
                              defer_index_remap=True)
    entry = frag_reuse.current_entry(ds.manifest.indices)
    assert entry is not None and len(frag_reuse.decode_details(entry, ds._store)) == 2
    theirs = lance.dataset(uri)
    theirs.validate()
    full = sorted(theirs.to_table(filter="a = 5", columns=["id"], use_scalar_index=False)["id"].to_pylist())
    assert sorted(theirs.to_table(filter="a = 5", columns=["id"])["id"].to_pylist()) == full
    assert sorted(lance_format.dataset(uri).to_table(filter="a = 5", columns=["id"])["id"].to_pylist()) == full


def test_deferred_compaction_with_a_concurrent_pylance_append_keeps_both(tmp_path: Path) -> None:
    from lance_format.optimize import Compaction

    uri = _indexed(tmp_path / "d", writer="ours")
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 250, "defer_index_remap": True})
    results = [t.execute(None) for t in plan.tasks]
    lance.write_dataset(_table(40, 3), uri, mode="append")  # pylance appends meanwhile
    Compaction.commit(ds, results)
    after = lance_format.dataset(uri)
    assert frag_reuse.current_entry(after.manifest.indices) is not None
    assert after.count_rows() == 600 - len(range(0, 600, 7)) + 40
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)


def test_pylance_compaction_of_our_stable_row_id_indices_reads_right_in_both(tmp_path: Path, dsv: str) -> None:
    uri = _indexed(tmp_path / "d", writer="ours", dsv=dsv, stable=True)
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=250)
    live = {f.id for f in lance_format.dataset(uri).manifest.fragments}
    assert all(set(i["fragment_ids"]) == live for i in lance.dataset(uri).list_indices())
    _answers_like_a_full_scan(uri)
    assert_same_at_every_version(uri)
