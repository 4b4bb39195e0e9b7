"""Compaction: same plan, fragments, rows and versions as pylance, and interop both ways."""

from __future__ import annotations

import pickle
from pathlib import Path

import lance
import lance.optimize
import pytest

import lance_format
from lance_format.maintenance import LocalRunner
from lance_format.optimize import (
    Compaction,
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    execute_compaction_task,
)

from .helpers import assert_same_at_every_version, build

CASES = [
    ([100] * 5, None, 250),                       # small fragments merged into target-sized ones
    ([100] * 5, "id % 10 = 0 AND id < 100", 250),  # deletions below the threshold, merged anyway
    ([100] * 5, "id < 50", 100),                  # one fragment compacted on its own (deletions)
    ([100] * 5, "id >= 200 AND id < 300", 250),   # a fully deleted fragment is gone
    ([100] * 5, "id % 2 = 0", 50),                # every fragment materializes its deletions
    ([100, 100, 500, 100, 100, 100], None, 250),  # a large fragment splits the bins
]


def _summary(uri: str) -> tuple[list[tuple[int, int]], dict[str, list[object]]]:
    ds = lance.dataset(uri)
    ds.validate()
    frags = [(f.fragment_id, f.metadata.physical_rows) for f in ds.get_fragments()]
    return frags, ds.to_table(with_row_id=True).to_pydict()


@pytest.mark.parametrize(("sizes", "delete", "target"), CASES)
def test_compaction_matches_pylance(tmp_path: Path, dsv: str, stable: bool, sizes: list[int],
                                    delete: str | None, target: int) -> None:
    a = build(tmp_path / "ours", sizes, writer="pylance", dsv=dsv, stable=stable, delete=delete)
    b = build(tmp_path / "theirs", sizes, writer="pylance", dsv=dsv, stable=stable, delete=delete)
    ours = lance_format.dataset(a).optimize.compact_files(target_rows_per_fragment=target)
    theirs = lance.dataset(b).optimize.compact_files(target_rows_per_fragment=target)
    assert (ours.fragments_removed, ours.fragments_added, ours.files_removed, ours.files_added) == (
        theirs.fragments_removed, theirs.fragments_added, theirs.files_removed, theirs.files_added)
    assert _summary(a) == _summary(b)
    assert lance.dataset(a).version == lance.dataset(b).version
    assert lance.dataset(a).data_storage_version == lance.dataset(b).data_storage_version
    assert_same_at_every_version(a)


def test_pylance_compacts_what_we_wrote(tmp_path: Path, dsv: str, stable: bool) -> None:
    uri = build(tmp_path / "d", [60] * 6, writer="ours", dsv=dsv, stable=stable, delete="id % 5 = 0")
    before = lance_format.dataset(uri).to_table(with_row_id=stable)
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=200)
    after = lance_format.dataset(uri)
    assert len(after.get_fragments()) == 1
    assert after.to_table(with_row_id=stable).equals(before)
    # and we compact again what pylance produced (appends on top)
    lance.write_dataset(lance.dataset(uri).to_table().slice(0, 10), uri, mode="append")
    lance_format.write_dataset(lance_format.dataset(uri).to_table().slice(0, 10), uri, mode="append")
    metrics = lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=200)
    assert metrics.fragments_removed == 2 and metrics.fragments_added == 1
    assert_same_at_every_version(uri)


def test_nothing_to_compact_commits_nothing(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100, 100])
    ds = lance_format.dataset(uri)
    assert ds.optimize.compact_files(target_rows_per_fragment=100) == CompactionMetrics()
    assert lance_format.dataset(uri).version == ds.version == 2


def test_plan_tasks_round_trip_through_json_and_pickle(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 5, stable=True, delete="id = 3")
    ds = lance_format.dataset(uri)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 150})
    assert [t.fragment_ids for t in plan.tasks] == [(0, 1), (2, 3, 4)]
    assert CompactionPlan.from_json(plan.to_json()) == plan
    assert pickle.loads(pickle.dumps(plan)) == plan
    task = plan.tasks[0]
    assert CompactionTask.from_json(task.to_json()) == task
    result = execute_compaction_task(pickle.loads(pickle.dumps(task)))
    assert RewriteResult.from_json(result.to_json()) == result
    results = [result, *Compaction.execute(plan.tasks[1:], LocalRunner(2))]
    metrics = Compaction.commit(ds, [pickle.loads(pickle.dumps(r)) for r in results])
    assert metrics.fragments_removed == 5 and metrics.rows_rewritten == 499
    assert ds.version == 8  # delete (6), reserve (7), rewrite (8)
    assert_same_at_every_version(uri)


def test_options_follow_pylance_defaults() -> None:
    opts = CompactionOptions()
    assert (opts.target_rows_per_fragment, opts.max_rows_per_group, opts.max_bytes_per_file,
            opts.materialize_deletions, opts.materialize_deletions_threshold, opts.defer_index_remap) == (
        1_048_576, 1024, None, True, 0.1, False)
    assert not CompactionOptions(materialize_deletions_threshold=1.0).materializes_deletions


def test_source_budget_cuts_the_plan_like_pylance(tmp_path: Path) -> None:
    uri = build(tmp_path / "d", [100] * 7, writer="pylance")
    for budget in (None, 4, 2):
        opts = {"target_rows_per_fragment": 250, "max_source_fragments": budget}
        ours = [t.fragment_ids for t in Compaction.plan(lance_format.dataset(uri), opts).tasks]
        theirs = [tuple(f.id for f in t.fragments)
                  for t in lance.optimize.Compaction.plan(lance.dataset(uri), opts).tasks]
        assert ours == theirs


def test_row_address_map_follows_every_row(tmp_path: Path) -> None:
    from lance_format.maintenance.compaction_commit import DELETED, row_address_arrays

    uri = build(tmp_path / "d", [100, 80, 120], delete="id % 3 = 0")
    ds = lance_format.dataset(uri)
    before = ds.to_table(columns=["id"], with_row_address=True)
    deleted_ids = {i for i in range(300) if i % 3 == 0}
    ds.optimize.compact_files(target_rows_per_fragment=150)
    after = ds.to_table(columns=["id"], with_row_address=True)
    txn = ds.read_transaction()
    assert txn is not None
    results = [RewriteResult(txn.read_version, g.old_fragments, g.new_fragments) for g in txn.operation.groups]
    old, new = row_address_arrays(ds, results)
    where_now = dict(zip(after["id"].to_pylist(), after["_rowaddr"].to_pylist(), strict=True))
    id_at = {}
    for frag_id, start in ((0, 0), (1, 100), (2, 180)):
        for off in range(120 if frag_id == 2 else (100 if frag_id == 0 else 80)):
            id_at[(frag_id << 32) + off] = start + off
    assert before.num_rows == after.num_rows == 200
    for o, n in zip(old.tolist(), new.tolist(), strict=True):
        if id_at[o] in deleted_ids:
            assert n == int(DELETED)
        else:
            assert where_now[id_at[o]] == n


def test_tasks_run_in_worker_processes(tmp_path: Path) -> None:
    from lance_format.maintenance import ProcessRunner

    uri = build(tmp_path / "d", [100] * 6, delete="id % 7 = 0")
    ds = lance_format.dataset(uri)
    metrics = ds.optimize.compact_files(target_rows_per_fragment=200, runner=ProcessRunner(2))
    assert (metrics.fragments_removed, metrics.fragments_added) == (6, 2)
    assert_same_at_every_version(uri)
