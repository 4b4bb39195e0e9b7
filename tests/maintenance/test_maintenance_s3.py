"""Compaction (tasks opened from their own URI and storage options) and cleanup on S3 (moto)."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import Any

import lance

import lance_format
from lance_format.cleanup import cleanup_old_versions
from lance_format.maintenance import LocalRunner
from lance_format.optimize import Compaction, execute_compaction_task

from .helpers import table


def test_compaction_and_cleanup_on_s3(s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    for i in range(4):
        lance_format.write_dataset(table(100 * i, 100), s3_uri, mode="append" if i else "create",
                                   storage_options=options)
    ds = lance_format.dataset(s3_uri, storage_options=options)
    ds.delete("id % 4 = 0")
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 1000})
    # tasks travel (pickled) and open the dataset themselves with the storage options
    results = LocalRunner(2).map(execute_compaction_task, [pickle.loads(pickle.dumps(t)) for t in plan.tasks])
    metrics = Compaction.commit(ds, results)
    assert (metrics.fragments_removed, metrics.fragments_added) == (4, 1)
    # commit grace 0: the versions were superseded just now, and this test wants them gone at once
    stats = cleanup_old_versions(ds, dt.timedelta(0), commit_grace=dt.timedelta(0))
    assert stats.old_versions == 6 and stats.data_files_removed == 4 and stats.deletion_files_removed == 4
    theirs = lance.dataset(s3_uri, storage_options=options)
    theirs.validate()
    assert [v["version"] for v in theirs.versions()] == [7]
    assert sorted(theirs.to_table()["id"].to_pylist()) == [i for i in range(400) if i % 4]
