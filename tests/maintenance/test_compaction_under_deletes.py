"""Compaction commits although deletes and updates of its fragments landed while it ran.

The rows those commits removed from the old fragments are deleted from the new fragments as
well (no deleted row comes back, no updated row is duplicated), indices stay right, and pylance
reads the same table. A change it cannot carry over (new data files in a rewritten fragment) is
still a retryable conflict that loses nothing.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import RetryableCommitConflictError
from lance_format.optimize import Compaction

N = 200


def _dataset(tmp_path: Path) -> str:
    uri = str(tmp_path / "c.lance")
    table = pa.table({"id": pa.array(range(N), pa.int64()), "val": pa.array([0] * N, pa.int64())})
    lf.write_dataset(table, uri, max_rows_per_file=20)
    lf.dataset(uri).delete("id IN (3, 4)")  # deletions known when compaction plans
    lf.dataset(uri).create_scalar_index("id", "BTREE")
    return uri


def _rows(uri: str) -> dict[int, int]:
    ours = lf.dataset(uri).to_table().sort_by("id")
    theirs = lance.dataset(uri).to_table().sort_by("id")
    assert ours.equals(theirs)
    ids = ours.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id is duplicated"
    return dict(zip(ids, ours.column("val").to_pylist(), strict=True))


@pytest.mark.parametrize("defer_index_remap", [False, True])
def test_deletes_and_updates_during_compaction_are_carried_to_the_new_fragments(
        tmp_path: Path, defer_index_remap: bool) -> None:
    uri = _dataset(tmp_path)
    ds = lf.dataset(uri)
    opts = {"target_rows_per_fragment": 1000, "defer_index_remap": defer_index_remap}
    plan = Compaction.plan(ds, opts)
    results = Compaction.execute(plan.tasks)
    # While the rewrite was running: single rows, a whole fragment, an update and an append.
    lf.dataset(uri).delete("id IN (5, 77, 150)")
    lf.dataset(uri).delete("id >= 20 AND id < 40")
    lf.dataset(uri).update({"val": "7"}, where="id = 9 OR id = 120")
    lf.write_dataset(pa.table({"id": pa.array([1000], pa.int64()), "val": pa.array([1], pa.int64())}), uri,
                     mode="append")
    metrics = Compaction.commit(ds, results, opts)
    assert metrics.fragments_removed == 10
    gone = {3, 4, 5, 77, 150, *range(20, 40)}
    expected = {i: 0 for i in range(N) if i not in gone} | {9: 7, 120: 7, 1000: 1}
    assert _rows(uri) == expected
    for probe in (5, 77, 25, 9, 120, 1000, 100):
        want = [probe] if probe in expected else []
        assert lf.dataset(uri).to_table(filter=f"id = {probe}").column("id").to_pylist() == want
        assert lance.dataset(uri).to_table(filter=f"id = {probe}").column("id").to_pylist() == want


def test_compaction_racing_a_column_rewrite_is_a_retryable_conflict(tmp_path: Path) -> None:
    uri = _dataset(tmp_path)
    ds = lf.dataset(uri)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 1000})
    results = Compaction.execute(plan.tasks)
    lf.dataset(uri).delete("id = 77")
    lf.dataset(uri).add_columns({"twice": "id * 2"})
    with pytest.raises(RetryableCommitConflictError):
        Compaction.commit(ds, results, {"target_rows_per_fragment": 1000})
    rows = lf.dataset(uri).to_table().sort_by("id")
    assert rows.column("id").to_pylist() == [i for i in range(N) if i not in (3, 4, 77)]
    assert rows.column("twice").to_pylist() == [2 * i for i in rows.column("id").to_pylist()]
