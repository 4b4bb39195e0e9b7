"""Crash leftovers (staging files, orphans of lost commits) are removed under the unverified-file rule."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import CommitConflictError
from lance_format.storage import LocalStore
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import LanceOperation, Transaction

T = pa.table({"a": pa.array([1, 2, 3], pa.int64())})
LEFTOVERS = [
    "data/0123.lance.0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f.partial",
    "_deletions/0-1-42.arrow.abcdabcdabcdabcdabcdabcdabcdabcd.partial",
    "_versions/latest_version_hint.json.1234123412341234123412341234abcd.partial",
    "_versions/18446744073709551612.manifest#9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f9f",
    "_versions/3.manifest#17",
    "_transactions/2-0f0f.txn.ffffeeeeffffeeeeffffeeeeffffeeee.partial",
    "_transactions/9-lost-commit.txn",  # a commit that never got its manifest
    "data/lost-commit-data.lance",
]


def _plant(uri: str, age: dt.timedelta) -> None:
    stamp = time.time() - age.total_seconds()
    for key in LEFTOVERS:
        path = Path(uri, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half written")
        os.utime(path, (stamp, stamp))


def test_old_leftovers_are_removed_and_dataset_stays_readable(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    _plant(uri, dt.timedelta(days=30))
    # The leftovers predate every manifest, as crash leftovers of earlier writers do.
    lf.write_dataset(T, uri, mode="append")
    stats = lf.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(days=1))
    assert [k for k in LEFTOVERS if Path(uri, k).exists()] == []
    assert stats.bytes_removed >= len(LEFTOVERS) * len(b"half written")
    assert lf.dataset(uri).count_rows() == 6


def test_fresh_leftovers_are_kept_unless_delete_unverified(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    _plant(uri, dt.timedelta(hours=1))  # may still be a write in flight
    lf.write_dataset(T, uri, mode="append")
    lf.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0))
    assert all(Path(uri, k).exists() for k in LEFTOVERS)
    lf.dataset(uri).cleanup_old_versions(older_than=dt.timedelta(0), delete_unverified=True)
    assert [k for k in LEFTOVERS if Path(uri, k).exists()] == []
    assert lf.dataset(uri).count_rows() == 6


def test_failed_commit_removes_its_transaction_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lf.write_dataset(T, uri)
    lf.write_dataset(T, uri, mode="overwrite")  # version 2 conflicts with a delete read at 1
    before = set(os.listdir(Path(uri, "_transactions")))
    txn = Transaction(1, LanceOperation.Delete([], [ds.manifest.fragments[0].id], "a > 0"))
    with pytest.raises(CommitConflictError):
        commit_transaction(ds._store, txn)
    assert set(os.listdir(Path(uri, "_transactions"))) == before


class _RacedStore(LocalStore):
    """A local store on which another writer commits just before each of our manifest puts."""

    def put_if_absent(self, key: str, data: bytes) -> None:
        if key.endswith(".manifest"):
            lf.write_dataset(T, self.root, mode="append")  # the competing commit wins the name
        super().put_if_absent(key, data)


def test_commit_that_gives_up_removes_its_transaction_file(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    ds = lf.dataset(uri)
    txn = Transaction(1, LanceOperation.Append(list(ds.manifest.fragments)))
    with pytest.raises(CommitConflictError, match="gave up"):
        commit_transaction(_RacedStore(uri), txn, max_retries=0)
    committed = {m.transaction_file for m in (lf.dataset(uri, version=v).manifest
                                              for v in range(1, lf.dataset(uri).version + 1))}
    assert set(os.listdir(Path(uri, "_transactions"))) == committed
