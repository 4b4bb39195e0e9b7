"""Compaction under concurrency, with pylance-made indices, and on bad input: nothing lost or half-committed."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import lance
import lance.optimize
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, RetryableCommitConflictError, VersionNotFoundError
from lance_format.optimize import Compaction, CompactionOptions, execute_compaction_task

from .helpers import assert_same_at_every_version, build, table

OPTS = {"target_rows_per_fragment": 250}


def _data_files(uri: str) -> set[str]:
    return {p.name for p in (Path(uri) / "data").iterdir()}


def test_append_during_compaction_both_land(tmp_path: Path, stable: bool) -> None:
    uri = build(tmp_path / "d", [100] * 5, stable=stable)
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, OPTS)
    results = [execute_compaction_task(t) for t in plan.tasks]
    lance.write_dataset(table(1000, 7), uri, mode="append")  # pylance appends meanwhile
    Compaction.commit(ds, results)
    ids = sorted(lance.dataset(uri).to_table()["id"].to_pylist())
    assert ids == list(range(500)) + list(range(1000, 1007))
    assert_same_at_every_version(uri)


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_delete_during_compaction_is_carried_over_and_loses_nothing(tmp_path: Path, writer: str) -> None:
    uri = build(tmp_path / "d", [100] * 5)
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, OPTS)
    results = [execute_compaction_task(t) for t in plan.tasks]
    (lance_format.dataset(uri) if writer == "ours" else lance.dataset(uri)).delete("id < 10")
    version = lance.dataset(uri).version
    # The rows the delete removed from the old fragments are deleted in the new ones
    # (lance 14 makes this a retryable conflict; we rebase, see lance_format.table.rebase).
    metrics = Compaction.commit(ds, results)
    assert metrics.rows_rewritten == 500
    assert lance.dataset(uri).version == version + 2  # ReserveFragments, then the Rewrite
    assert lance_format.dataset(uri).count_rows() == 490
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == list(range(10, 500))
    assert_same_at_every_version(uri)


def test_compaction_racing_new_data_files_is_a_retryable_conflict_and_loses_nothing(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 5)
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, OPTS)
    results = [execute_compaction_task(t) for t in plan.tasks]
    lance.dataset(uri).add_columns({"twice": "id * 2"})
    version = lance.dataset(uri).version
    with pytest.raises(RetryableCommitConflictError, match="rewrite"):
        Compaction.commit(ds, results)
    assert lance.dataset(uri).version == version  # refused before reserving fragment ids
    rows = lance_format.dataset(uri).to_table()
    assert sorted(rows["twice"].to_pylist()) == [2 * i for i in range(500)]
    metrics = lance_format.dataset(uri).optimize.compact_files(**OPTS)
    assert metrics.rows_rewritten == 500
    assert_same_at_every_version(uri)


def test_compact_files_removes_its_files_when_the_commit_conflicts(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3)
    ds = lance_format.dataset(uri)
    lance_format.dataset(uri).add_columns({"twice": "id * 2"})  # ds is now stale
    before = _data_files(uri)
    with pytest.raises(RetryableCommitConflictError):
        ds.optimize.compact_files(**OPTS)
    assert _data_files(uri) == before


def test_task_against_a_cleaned_up_read_version_is_a_clear_error(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3)
    plan = Compaction.plan(lance_format.dataset(uri), OPTS)
    lance_format.write_dataset(table(500, 5), uri, mode="overwrite")
    lance.dataset(uri).cleanup_old_versions(older_than=__import__("datetime").timedelta(0),
                                            delete_unverified=True)
    with pytest.raises(VersionNotFoundError, match="version 3"):
        execute_compaction_task(plan.tasks[0])
    assert lance.dataset(uri).to_table()["id"].to_pylist() == list(range(500, 505))


def test_task_whose_fragments_do_not_match_its_version_is_refused(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3)
    other = build(tmp_path / "other", [100] * 3)
    task = Compaction.plan(lance_format.dataset(uri), OPTS).tasks[0]
    wrong = dataclasses.replace(task, uri=other)  # same ids, different files
    before = _data_files(other)
    with pytest.raises(InvalidInputError, match="does not match version 3"):
        execute_compaction_task(wrong)
    assert _data_files(other) == before


def test_results_committed_twice_do_not_rewrite_again(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3)
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, OPTS)
    results = [execute_compaction_task(t) for t in plan.tasks]
    Compaction.commit(ds, results)
    version = ds.version
    with pytest.raises(RetryableCommitConflictError):
        Compaction.commit(lance_format.dataset(uri), results)
    assert lance.dataset(uri).version == version
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == list(range(300))


def test_overlapping_results_are_refused(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3)
    ds = lance_format.dataset(uri)
    res = execute_compaction_task(Compaction.plan(ds, OPTS).tasks[0])
    with pytest.raises(InvalidInputError, match="two compaction results"):
        Compaction.commit(ds, [res, res])


@pytest.mark.parametrize("bad", [{"target_rows_per_fragment": 0}, {"max_rows_per_group": -1},
                                 {"batch_size": "big"}, {"no_such_option": 1}])
def test_bad_options_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        CompactionOptions.coerce(bad)


def test_defer_index_remap_on_stable_row_ids_is_refused(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 3, stable=True)
    with pytest.raises(InvalidInputError, match="stable row ids"):
        lance_format.dataset(uri).optimize.compact_files(defer_index_remap=True)


def _pylance_indexed(path: Path, stable: bool) -> str:
    uri = str(path)
    shutil.rmtree(uri, ignore_errors=True)
    for i in range(4):
        n = 100 * i
        t = pa.table({"id": pa.array(range(n, n + 100), pa.int64()), "s": [f"v{x % 7}" for x in range(n, n + 100)]})
        lance.write_dataset(t, uri, mode="append" if i else "create", enable_stable_row_ids=stable)
    ds = lance.dataset(uri)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    ds.create_scalar_index("s", "INVERTED", name="s_fts")
    for i in range(3):
        lance.write_dataset(pa.table({"id": pa.array(range(1000 + 10 * i, 1010 + 10 * i), pa.int64()),
                                      "s": ["v1"] * 10}), uri, mode="append")
    lance.dataset(uri).delete("id % 9 = 0")
    return uri


def test_compaction_of_a_pylance_dataset_with_indices_keeps_every_index_right(tmp_path: Path, stable: bool) -> None:
    uri = _pylance_indexed(tmp_path / "d", stable)
    ours = lance_format.dataset(uri)
    plan = [t.fragment_ids for t in Compaction.plan(ours, OPTS).tasks]
    theirs = [tuple(f.id for f in t.fragments) for t in lance.optimize.Compaction.plan(lance.dataset(uri), OPTS).tasks]
    # Without stable row ids BTREE / BITMAP are remapped and INVERTED left as it is; with
    # them the Rewrite moves every index's bitmap: either way the same plan as pylance's.
    assert plan == theirs == [(0, 1, 2, 3), (4, 5, 6)]
    metrics = ours.optimize.compact_files(**OPTS)
    assert metrics.fragments_removed >= 3  # the unindexed appends at least
    ds = lance.dataset(uri)
    ds.validate()
    assert {i["name"] for i in ds.list_indices()} == {"id_idx", "s_idx", "s_fts"}
    for flt in ["id = 150", "id >= 95 AND id < 105", "s = 'v3'", "id > 1005", "s IN ('v1', 'v2')"]:
        with_index = sorted(ds.to_table(filter=flt, columns=["id"])["id"].to_pylist())
        full_scan = sorted(ds.to_table(filter=flt, columns=["id"], use_scalar_index=False)["id"].to_pylist())
        assert with_index == full_scan, flt
    fts = sorted(ds.to_table(full_text_query="v3", columns=["id"])["id"].to_pylist())
    assert fts == sorted(ds.to_table(filter="s = 'v3'", columns=["id"], use_scalar_index=False)["id"].to_pylist())
    assert_same_at_every_version(uri)


def test_remappable_indices_are_rewritten_in_the_same_rewrite(tmp_path: Path) -> None:
    """INDEX's remap_indices output lands in Rewrite.rewritten_indices; the bitmaps move to the new ids."""
    uri = _pylance_indexed(tmp_path / "d", stable=False)
    old = {i["name"]: i["uuid"] for i in lance.dataset(uri).list_indices()}
    ds = lance_format.dataset(uri)
    ds.optimize.compact_files(**OPTS)
    txn = ds.read_transaction()
    assert txn is not None and txn.operation.kind == "rewrite"
    rewritten = {r.old_id: r.new_id for r in txn.operation.rewritten_indices}
    assert set(rewritten) == set(old.values())  # BTREE, BITMAP and INVERTED: every kind remaps now
    # only the group of indexed fragments (0-3) moves into the bitmaps; the appended ones stay unindexed
    new_ids = {f.id for g in txn.operation.groups if g.old_fragments[0].id == 0 for f in g.new_fragments}
    after = {i["uuid"]: i for i in lance.dataset(uri).list_indices()}
    for new_id in rewritten.values():
        assert any((Path(uri) / "_indices" / new_id).iterdir())
        assert set(after[new_id]["fragment_ids"]) == new_ids
