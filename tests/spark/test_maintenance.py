"""Maintenance as Spark jobs: the same results as the local calls."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.cleanup import COMMIT_GRACE_ENV
from lance_format.maintenance.runner import Runner
from lance_format.spark import SparkRunner, cleanup_old_versions, compact_files, optimize_indices

pytestmark = pytest.mark.slow


def _square(x: int) -> int:
    return x * x


def _explode(x: int) -> int:
    if x == 3:
        raise ValueError("task 3 failed")
    return x


def _twins(tmp_path: Path) -> tuple[str, str]:
    """Two identical pylance datasets: small fragments, deletions, several versions."""
    uris = []
    for name in ("local", "spark"):
        uri = str(tmp_path / f"{name}.lance")
        tbl = pa.table({"id": pa.array(range(60), pa.int64()), "cat": [f"c{i % 4}" for i in range(60)]})
        lance.write_dataset(tbl, uri, max_rows_per_file=8)
        lance.dataset(uri).delete("id % 5 = 0")
        lance.write_dataset(pa.table({"id": pa.array([100, 101], pa.int64()), "cat": ["x", "y"]}), uri,
                            mode="append")
        uris.append(uri)
    return uris[0], uris[1]


def test_spark_runner_maps_in_order_and_raises_task_errors(spark: Any) -> None:
    runner = SparkRunner(spark)
    assert isinstance(runner, Runner)
    assert runner.map(_square, [3, 1, 2]) == [9, 1, 4]
    assert runner.map(_square, []) == []
    with pytest.raises(Exception, match="task 3 failed"):
        runner.map(_explode, [1, 2, 3])


def test_spark_compaction_equals_local_compaction(spark: Any, tmp_path: Path) -> None:
    local_uri, spark_uri = _twins(tmp_path)
    opts = {"target_rows_per_fragment": 20}
    local = lance_format.dataset(local_uri).optimize.compact_files(**opts)
    remote = compact_files(spark, spark_uri, **opts)
    assert remote.fragments_added > 0
    # Same counters (bytes may differ only if files differ, which they must not).
    assert dataclasses.astuple(remote) == dataclasses.astuple(local)
    a, b = lance_format.dataset(local_uri), lance_format.dataset(spark_uri)
    assert a.version == b.version
    assert [(f.id, f.physical_rows, f.num_deletions) for f in a.manifest.fragments] == \
        [(f.id, f.physical_rows, f.num_deletions) for f in b.manifest.fragments]
    assert a.to_table().equals(b.to_table())
    # pylance reads the Spark-compacted dataset identically
    assert lance.dataset(spark_uri).to_table().equals(lance.dataset(local_uri).to_table())


def test_spark_cleanup_equals_local_cleanup(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")  # versions superseded seconds ago go despite the commit grace
    local_uri, spark_uri = _twins(tmp_path)
    for uri in (local_uri, spark_uri):
        lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=100)
    local = lance_format.dataset(local_uri).cleanup_old_versions(older_than=dt.timedelta(0),
                                                                delete_unverified=True)
    remote = cleanup_old_versions(spark, spark_uri, older_than=dt.timedelta(0), delete_unverified=True,
                                  batch_size=2)
    assert remote.old_versions == local.old_versions == 4
    assert (remote.data_files_removed, remote.deletion_files_removed, remote.transaction_files_removed) == \
        (local.data_files_removed, local.deletion_files_removed, local.transaction_files_removed)
    assert [v["version"] for v in lance.dataset(spark_uri).versions()] == [5]
    assert lance.dataset(spark_uri).to_table().equals(lance.dataset(local_uri).to_table())


def test_spark_optimize_indices_equals_local(spark: Any, tmp_path: Path) -> None:
    local_uri, spark_uri = _twins(tmp_path)
    for uri in (local_uri, spark_uri):
        lance_format.dataset(uri).create_scalar_index("id", "BTREE")
        lance_format.write_dataset(pa.table({"id": pa.array([200, 201], pa.int64()), "cat": ["p", "q"]}), uri,
                                   mode="append")
    lance_format.dataset(local_uri).optimize.optimize_indices()
    ds = optimize_indices(spark, spark_uri)
    a, b = lance_format.dataset(local_uri), lance_format.dataset(spark_uri)
    assert b.version == a.version == ds.version

    def coverage(d: Any) -> list[Any]:
        return sorted((i["name"], sorted(i["fragment_ids"])) for i in lance.dataset(d.uri).list_indices())

    assert coverage(a) == coverage(b)
    assert lance.dataset(spark_uri).to_table(filter="id = 201").num_rows == 1
