"""Writers racing maintenance with cleanup at zero retention lose nothing.

Four writer processes (append, merge_insert upsert, delete, update), each owning its own id
range and recording every commit it was told succeeded, race one maintenance process looping
``compact_files``, ``optimize_indices`` and ``cleanup_old_versions(older_than=0)`` with no commit
grace (the worst case: every version but the latest goes as soon as it is superseded). At the end
the table holds exactly what the writers' records say — no deleted row back, no id twice, no
stale value — for us and for pylance, and compaction committed under the load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf

pytestmark = pytest.mark.slow

OPS = 30

_WRITER = r"""
import json, random, sys
import pyarrow as pa
import lance_format as lf
from lance_format.errors import CommitConflictError, ObjectNotFoundError, VersionNotFoundError
import os
uri, kind, ops, compacted = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
base = {"append": 1_000_000, "upsert": 2_000_000, "delete": 3_000_000, "update": 4_000_000}[kind]
rng = random.Random(kind)
state = {}          # id -> value, as this writer last committed it
conflicts = vanished = 0

def table(rows):
    ids = sorted(rows)
    return pa.table({"id": pa.array(ids, pa.int64()), "val": pa.array([rows[i] for i in ids], pa.int64())})

def attempt(fn):
    global conflicts, vanished
    for _ in range(200):
        try:
            return fn()
        except CommitConflictError:
            conflicts += 1   # nothing of it landed: run it again on the latest version
        except (ObjectNotFoundError, VersionNotFoundError):
            vanished += 1    # the version it read was cleaned up under it (no grace here)
    raise SystemExit(f"{kind}: kept conflicting")

next_id = base

def seed(n):
    global next_id
    rows = {next_id + i: 0 for i in range(n)}
    next_id += n
    attempt(lambda: lf.write_dataset(table(rows), uri, mode="append"))
    state.update(rows)

if kind != "upsert":
    seed(20)
# Keep writing past ``ops`` until maintenance has compacted once, so compaction provably
# committed while every writer was still busy (on a slow machine the writers can otherwise
# finish between two maintenance rounds).
step = -1
while True:
    step += 1
    if step >= ops and (os.path.exists(compacted) or step >= 20 * ops):
        break
    if kind == "append":
        seed(5)
    elif kind == "upsert":
        rows = {base + rng.randrange(40): step + 1 for _ in range(4)}
        attempt(lambda: lf.dataset(uri).merge_insert("id").when_matched_update_all()
                .when_not_matched_insert_all().execute(table(rows)))
        state.update(rows)
    elif kind == "delete":
        if len(state) < 5:
            seed(10)
        victims = rng.sample(sorted(state), 2)
        attempt(lambda: lf.dataset(uri).delete(f"id IN ({victims[0]}, {victims[1]})"))
        for v in victims:
            del state[v]
    else:
        target = rng.choice(sorted(state))
        attempt(lambda: lf.dataset(uri).update({"val": str(step + 1)}, where=f"id = {target}"))
        state[target] = step + 1
print(json.dumps({"state": {str(k): v for k, v in state.items()}, "conflicts": conflicts, "vanished": vanished}))
"""

_MAINTENANCE = r"""
import json, sys, time
from datetime import timedelta
import lance_format as lf
from lance_format.errors import CommitConflictError, ObjectNotFoundError
uri, stop, compacted = sys.argv[1], sys.argv[2], sys.argv[3]
attempts = committed = conflicts = cleaned = 0
reasons = []
seconds = []
import os
while not os.path.exists(stop):
    ds = lf.dataset(uri)
    attempts += 1
    started = time.monotonic()
    try:
        if ds.optimize.compact_files(target_rows_per_fragment=200).fragments_removed:
            committed += 1
            open(compacted, "w").close()
    except (CommitConflictError, ObjectNotFoundError) as exc:
        conflicts += 1
        reasons.append(str(exc)[-160:])
    try:
        lf.dataset(uri).optimize.optimize_indices()
    except CommitConflictError as exc:
        reasons.append("optimize_indices: " + str(exc)[-160:])
    cleaned += lf.dataset(uri).cleanup_old_versions(older_than=timedelta(0)).old_versions
    seconds.append(round(time.monotonic() - started, 2))
    time.sleep(0.05)
print(json.dumps({"attempts": attempts, "committed": committed, "conflicts": conflicts, "cleaned": cleaned,
                  "reasons": reasons[:5], "seconds": seconds}))
"""


def test_writers_racing_maintenance_with_zero_retention_lose_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "race.lance")
    seed = pa.table({"id": pa.array([0], pa.int64()), "val": pa.array([0], pa.int64())})
    lf.write_dataset(seed, uri)
    lf.dataset(uri).create_scalar_index("id", "BTREE")
    stop = tmp_path / "stop"
    compacted = tmp_path / "compacted"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), LANCE_FORMAT_COMMIT_GRACE="0s")
    maint = subprocess.Popen([sys.executable, "-c", _MAINTENANCE, uri, str(stop), str(compacted)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    writers = {kind: subprocess.Popen([sys.executable, "-c", _WRITER, uri, kind, str(OPS), str(compacted)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for kind in ("append", "upsert", "delete", "update")}
    expected = {0: 0}
    conflicts = {}
    try:
        for kind, proc in writers.items():
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, f"{kind} writer failed:\n{err[-3000:]}"
            record = json.loads(out.strip().splitlines()[-1])
            expected.update({int(k): v for k, v in record["state"].items()})
            conflicts[kind] = (record["conflicts"], record["vanished"])
    finally:
        stop.touch()
        m_out, m_err = maint.communicate(timeout=600)
    assert maint.returncode == 0, m_err[-3000:]
    maintenance = json.loads(m_out.strip().splitlines()[-1])
    print(f"writers' (conflicts, reads of removed versions) {conflicts}; maintenance {maintenance}")
    table = lf.dataset(uri).to_table().sort_by("id")
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id is duplicated"
    assert dict(zip(ids, table.column("val").to_pylist(), strict=True)) == expected
    theirs = lance.dataset(uri).to_table().sort_by("id")
    assert theirs.column("id").to_pylist() == ids
    assert theirs.column("val").to_pylist() == table.column("val").to_pylist()
    # Compaction kept committing under continuous deletes and updates.
    assert maintenance["committed"] >= 1
    assert maintenance["cleaned"] >= 1
