"""``kill -9`` of a Spark driver in the middle of compaction and index builds never breaks a dataset.

A writer process starts a real ``local[2]`` SparkSession and loops: append, delete, compaction
whose tasks run on Spark executors (``SparkRunner``), and BTREE / BITMAP builds whose read tasks
run there too. The test SIGKILLs the writer's whole process group (driver, JVM and Python
workers) at random moments after Spark is up, restarting it each time. After every kill the
dataset opens, every file the latest version references exists, pylance reads the same rows and
uses the indices; after the last kill every remaining version is checked, and one cleanup with
``delete_unverified=True`` leaves exactly the files the kept versions reference (every version,
within the commit grace; the latest's, with no grace).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.storage import open_store
from lance_format.table.naming import data_file_key
from lance_format.table.versions import list_manifests

from .helpers import open_with_every_file

pytestmark = pytest.mark.slow

KILLS = 4

_WRITER = r"""
import random, sys
from pathlib import Path
import pyarrow as pa
import lance_format as lf
from lance_format.errors import CommitConflictError
from lance_format.spark import SparkRunner, local_session

uri, seed, marker = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
spark = local_session("local[2]", shuffle_partitions=2)
spark.sparkContext.setLogLevel("OFF")
runner = SparkRunner(spark)
rng = random.Random(seed)
n = seed * 100_000
while True:
    op = rng.choice(["append", "append", "delete", "compaction", "index"])
    marker.write_text(op)
    try:
        if op == "append":
            n += 50
            lf.write_dataset(pa.table({"id": pa.array(range(n, n + 50), pa.int64()),
                                       "kind": pa.array([str(i % 4) for i in range(50)])}), uri, mode="append")
        elif op == "delete":
            lf.dataset(uri).delete(f"id % 7 = {rng.randrange(7)} AND id > {n - 200}")
        elif op == "compaction":
            lf.dataset(uri).optimize.compact_files(target_rows_per_fragment=400, runner=runner)
        else:
            ds = lf.dataset(uri)
            ds.create_scalar_index("id", "BTREE", replace=True, runner=runner)
            ds.create_scalar_index("kind", "BITMAP", replace=True, runner=runner)
    except CommitConflictError:
        pass
"""


def _check_version(uri: str, version: int | None = None) -> int:
    ds = open_with_every_file(uri, version)
    ours = sorted(ds.to_table(columns=["id"]).column("id").to_pylist())
    theirs = lance.dataset(uri, version=ds.version)
    assert sorted(theirs.to_table(columns=["id"]).column("id").to_pylist()) == ours
    for probe in ours[:: max(1, len(ours) // 5)]:
        assert theirs.to_table(filter=f"id = {probe}").num_rows == 1
        assert ds.to_table(filter=f"id = {probe}").num_rows == 1
    return ds.version


def _files(uri: str) -> set[str]:
    root = Path(uri)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            and not p.name.startswith("latest_version_hint")}


def test_kill_nine_during_spark_compaction_and_index_builds(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": pa.array(range(400), pa.int64()),
                               "kind": pa.array([str(i % 4) for i in range(400)])}), uri, max_rows_per_file=50)
    rng = random.Random(21)
    marker = tmp_path / "op"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    killed_in: dict[str, int] = {}
    started = time.monotonic()
    for kill in range(KILLS):
        marker.write_text("")
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, uri, str(kill + 1), str(marker)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 180
        while not marker.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # Spark is up once the writer names its first operation
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        time.sleep(rng.uniform(0.5, 6.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        op = marker.read_text()
        killed_in[op] = killed_in.get(op, 0) + 1
        _check_version(uri)
    names, _ = list_manifests(open_store(uri))
    for version in sorted(names):
        _check_version(uri, version)
    # The commit grace (5 minutes) keeps every version of this run: the files left are those the
    # kept versions reference; with no grace, those the latest references.
    lf.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True,
                                         error_if_tagged_old_versions=False)
    kept, _ = list_manifests(open_store(uri))
    assert {f for f in _files(uri) if f.startswith("data/")} == {
        data_file_key(df.path) for v in kept for frag in lf.dataset(uri, version=v).manifest.fragments
        for df in frag.files}
    lf.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True,
                                         error_if_tagged_old_versions=False, commit_grace=dt.timedelta(0))
    latest = lf.dataset(uri)
    referenced = {data_file_key(df.path) for frag in latest.manifest.fragments for df in frag.files}
    data_left = {f for f in _files(uri) if f.startswith("data/")}
    assert data_left == referenced
    _check_version(uri)
    print(f"kill -9 of a Spark driver: {KILLS} kills in {killed_in}, final version {latest.version}, "
          f"{time.monotonic() - started:.0f} s")
    assert latest.version > KILLS
