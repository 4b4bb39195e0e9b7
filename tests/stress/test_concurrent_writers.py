"""8 processes x 30 mixed commits on local disk and on S3 (moto, loopback): nothing lost.

Every writer appends its own rows and deletes some of them again, retrying a delete that
lost a race the way pylance users do. Afterwards the versions are contiguous, every commit a
writer was told succeeded is a distinct version, the rows are exactly what the writers left,
and pylance reads the same number of rows as we do at every version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from conftest_s3 import S3Server, s3_server, s3_uri  # noqa: F401

import lance_format as lf

pytestmark = pytest.mark.slow

WRITERS = 8
COMMITS = 30

_WORKER = r"""
import json, random, sys
import pyarrow as pa
import lance_format as lf
from lance_format.errors import CommitConflictError
uri, writer, commits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
opts = json.loads(sys.argv[4]) or None
rng = random.Random(writer)
done, alive = [], []
seq = gave_up = 0
while len(done) < commits:
    if alive and rng.random() < 0.35:
        victim = rng.choice(alive)
        for _ in range(100):
            try:
                ds = lf.dataset(uri, storage_options=opts)
                ds.delete(f"writer = {writer} AND seq = {victim}")
                break
            except CommitConflictError:
                gave_up += 1
        else:
            raise SystemExit("delete kept conflicting")
        alive.remove(victim)
        done.append(["delete", ds.version, victim])
    else:
        seq += 1
        t = pa.table({"writer": pa.array([writer] * 3, pa.int64()), "seq": pa.array([seq] * 3, pa.int64())})
        for _ in range(100):
            try:  # a commit that gave up (too many lost races) changed nothing: try again
                ds = lf.write_dataset(t, uri, mode="append", storage_options=opts)
                break
            except CommitConflictError:
                gave_up += 1
        else:
            raise SystemExit("append kept conflicting")
        alive.append(seq)
        done.append(["append", ds.version, seq])
print(json.dumps({"done": done, "alive": alive, "gave_up": gave_up}))
"""


def _run(uri: str, options: dict[str, str] | None) -> None:
    schema_rows = pa.table({"writer": pa.array([-1], pa.int64()), "seq": pa.array([0], pa.int64())})
    lf.write_dataset(schema_rows, uri, storage_options=options)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, uri, str(w), str(COMMITS), json.dumps(options)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(WRITERS)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.monotonic() - started
    reported = [entry[1] for r in results for entry in r["done"]]
    total = WRITERS * COMMITS
    assert len(reported) == total
    # Zero lost commits: each success is its own version, and the versions are contiguous.
    assert sorted(reported) == list(range(2, total + 2))
    ds = lf.dataset(uri, storage_options=options)
    assert ds.version == total + 1
    assert [v["version"] for v in ds.versions()] == list(range(1, total + 2))
    want = sorted([(-1, 0)] + [(w, s) for w, r in enumerate(results) for s in r["alive"] for _ in range(3)])
    table = ds.to_table()
    assert sorted(zip(table.column("writer").to_pylist(), table.column("seq").to_pylist(), strict=True)) == want
    for version in range(1, total + 2):
        ours = lf.dataset(uri, version=version, storage_options=options).count_rows()
        assert lance.dataset(uri, version=version, storage_options=options).count_rows() == ours, version
    retried = sum(r["gave_up"] for r in results)
    print(f"{WRITERS} writers x {COMMITS} commits on {uri.split(':')[0]}: {total} versions in {elapsed:.1f} s "
          f"({retried} operations re-run after a conflict)")


def test_processes_mixed_commits_local(tmp_path: Path) -> None:
    _run(str(tmp_path / "ds"), None)


def test_processes_mixed_commits_s3(s3_server: S3Server, s3_uri: str) -> None:  # noqa: F811
    _run(s3_uri, s3_server[2])
