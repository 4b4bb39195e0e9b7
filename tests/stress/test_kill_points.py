"""``kill -9`` at random points of append/delete/overwrite/compaction/cleanup/index builds never breaks a dataset.

The test process forks a writer that loops over the five operations and SIGKILLs it after a
random delay, many times over one dataset. After every kill the dataset must open, the latest
version must read with every referenced file present, and pylance must agree on it; at the end
every remaining version is checked the same way.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.cleanup import cleanup_old_versions
from lance_format.storage import open_store
from lance_format.table.versions import list_manifests

from .helpers import open_with_every_file

pytestmark = pytest.mark.slow

KILLS = 220


OPS = ("append", "delete", "overwrite", "compaction", "cleanup", "index")


def _writer(uri: str, seed: int, marker: Path) -> None:
    rng = random.Random(seed)
    n = 0
    while True:
        n += 1
        op = OPS[rng.randrange(len(OPS))]
        marker.write_text(op)  # which operation the kill interrupts
        ds = lf.dataset(uri)
        if op == "append":
            lf.write_dataset(pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64())}), uri, mode="append")
        elif op == "delete":
            ds.delete(f"id % {rng.randint(3, 9)} = {rng.randrange(3)}")
        elif op == "overwrite":
            lf.write_dataset(pa.table({"id": pa.array(range(40), pa.int64())}), uri, mode="overwrite")
        elif op == "compaction":
            ds.optimize.compact_files(target_rows_per_fragment=1000)
        elif op == "index":
            ds.create_scalar_index("id", "BTREE" if rng.random() < 0.5 else "BITMAP", replace=True)
        else:
            # commit grace 0, or versions superseded seconds ago would stay and no kill would hit a removal
            cleanup_old_versions(ds, older_than=dt.timedelta(0), retain_versions=3, commit_grace=dt.timedelta(0))


def _check_version(uri: str, version: int | None = None) -> int:
    ds = open_with_every_file(uri, version)
    rows = ds.to_table().num_rows
    theirs = lance.dataset(uri, version=ds.version)
    assert theirs.count_rows() == rows
    if ds.list_indices():  # an index a kill left behind answers like a scan, for us and pylance
        ids = ds.to_table(columns=["id"]).column("id").to_pylist()
        probe = ids[len(ids) // 2] if ids else 1
        want = ids.count(probe)
        assert ds.to_table(filter=f"id = {probe}").num_rows == want
        assert theirs.to_table(filter=f"id = {probe}").num_rows == want
    return ds.version


@pytest.mark.filterwarnings("ignore:lance is not fork-safe")  # the forked writer never uses pylance
def test_kill_nine_at_random_points_leaves_consistent_versions(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(pa.table({"id": pa.array(range(40), pa.int64())}), uri)
    rng = random.Random(9)
    started = time.monotonic()
    versions_seen: set[int] = set()
    marker = tmp_path / "op"
    killed_in = dict.fromkeys(OPS, 0)
    for kill in range(KILLS):
        marker.write_text("")
        pid = os.fork()
        if pid == 0:  # the writer: never returns into pytest
            try:
                _writer(uri, kill, marker)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.005, 0.12))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        op = marker.read_text()
        if op:
            killed_in[op] += 1
        versions_seen.add(_check_version(uri))
    names, _ = list_manifests(open_store(uri))
    for version in sorted(names):
        _check_version(uri, version)
    elapsed = time.monotonic() - started
    # Version numbers only grow: the writer committed this often between the kills.
    assert max(names) > KILLS // 4, "the writer barely committed between kills"
    assert all(count >= 10 for count in killed_in.values()), killed_in
    print(f"kill -9 points: {KILLS} ({killed_in}), distinct latest versions seen: {len(versions_seen)}, "
          f"final version {max(names)}, {elapsed:.1f} s")
