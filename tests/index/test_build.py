"""Index builds as plan → execute (picklable tasks on any Runner) → one CreateIndex commit."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index._compat import manifest_indices
from lance_format.index.build import (
    commit_index_build,
    execute_index_task,
    plan_index_build,
)
from lance_format.index.remap import RowAddressMap, remap_indices
from lance_format.maintenance.runner import LocalRunner

from .conftest import rowids, sample_table


def test_tasks_pickle_and_run_on_a_runner(make_path: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_path("tasks")
    ds = lance_format.write_dataset(sample_table(600), path, mode="create", max_rows_per_file=100)
    monkeypatch.setattr("lance_format.index.build.TASK_ROWS", 200)  # several tasks from a small table
    plan = plan_index_build(ds, "a", "BTREE")
    assert len(plan.tasks) == 3 and plan.fragment_ids == frozenset(range(6))
    tasks = [pickle.loads(pickle.dumps(t)) for t in plan.tasks]
    chunks = LocalRunner(2).map(execute_index_task, tasks)
    chunks = [pickle.loads(pickle.dumps(c)) for c in chunks]
    assert sum(len(c.values) for c in chunks) == 600
    assert lance_format.dataset(path).version == ds.version  # nothing committed before the commit step
    done = commit_index_build(plan, chunks)
    assert done.version == ds.version + 1
    theirs = lance.dataset(path)
    got = theirs.scanner(filter="a = 7", with_row_id=True).to_table()
    assert "ScalarIndexQuery" in theirs.scanner(filter="a = 7").explain_plan()
    assert rowids(got) == rowids(theirs.scanner(filter="a = 7", with_row_id=True,
                                                use_scalar_index=False).to_table())


def test_stable_row_ids_btree_holds_addresses_like_pylance(make_path: Callable[[str], str]) -> None:
    path = make_path("stable")
    table = pa.table({"a": pa.array(np.arange(30) % 4, pa.int64())})
    ds = lance_format.write_dataset(table, path, mode="create", max_rows_per_file=10,
                                    enable_stable_row_ids=True)
    ds.delete("a = 0")
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("a", "BITMAP", name="a_bitmap")
    metas = {m.name: m for m in manifest_indices(ds.manifest)}
    # pylance 14.0.2 records BTree version 1 here (ids are row addresses); Bitmap stays 0 (row ids).
    assert metas["a_idx"].index_version == 1 and metas["a_bitmap"].index_version == 0
    theirs = lance.dataset(path)
    for flt in ("a = 2", "a > 1"):
        assert rowids(theirs.scanner(filter=flt, with_row_id=True).to_table()) == \
            rowids(theirs.scanner(filter=flt, with_row_id=True, use_scalar_index=False).to_table())
    # After a compaction only the address-holding BTree needs remapping.
    old = np.array([(1 << 32) | i for i in range(10)], np.uint64)
    rewritten = remap_indices(ds, RowAddressMap.from_arrays(old, old + np.uint64(5 << 32)))
    assert [r.old_id for r in rewritten] == [metas["a_idx"].uuid]
