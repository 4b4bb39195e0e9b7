"""Concurrent commits: threads and processes; appends all land, conflicts fail clearly."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import CommitConflictError, RetryableCommitConflictError
from lance_format.storage import open_store
from lance_format.table.versions import list_manifests, load_manifest, load_transaction


def rows(tag: int, n: int = 5) -> pa.Table:
    return pa.table({"writer": pa.array([tag] * n, pa.int64()), "i": pa.array(range(n), pa.int64())})


def _append(uri: str, tag: int) -> None:
    lf.write_dataset(rows(tag), uri, mode="append")


def _check_history(uri: str, expected_versions: int) -> None:
    store = open_store(uri)
    names, _ = list_manifests(store)
    assert sorted(names) == list(range(1, expected_versions + 1))
    uuids = {load_transaction(store, load_manifest(store, v)).uuid for v in names}  # type: ignore[union-attr]
    assert len(uuids) == expected_versions  # every version is a distinct commit, none overwritten


def test_threads_append_all_land(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0), uri)
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            barrier.wait()
            _append(uri, tag)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ds = lf.dataset(uri)
    assert sorted(set(ds.to_table().column("writer").to_pylist())) == list(range(7))
    assert ds.count_rows() == 35
    _check_history(uri, 7)
    assert lance.dataset(uri).to_table().sort_by("writer").equals(ds.to_table().sort_by("writer"))


def test_processes_append_all_land(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0), uri)
    script = (
        "import sys, pyarrow as pa, lance_format as lf\n"
        "tag = int(sys.argv[2])\n"
        "t = pa.table({'writer': pa.array([tag] * 5, pa.int64()), 'i': pa.array(range(5), pa.int64())})\n"
        "lf.write_dataset(t, sys.argv[1], mode='append')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, uri, str(t)]) for t in range(1, 5)]
    assert all(p.wait(120) == 0 for p in procs)
    ds = lf.dataset(uri)
    assert sorted(set(ds.to_table().column("writer").to_pylist())) == list(range(5))
    _check_history(uri, 5)


def test_delete_after_concurrent_overwrite_fails(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0, 10), uri)
    stale = lf.dataset(uri)
    lf.write_dataset(rows(1, 3), uri, mode="overwrite")
    with pytest.raises(CommitConflictError, match="overwrite"):
        stale.delete("i = 1", conflict_retries=0)
    assert lf.dataset(uri).count_rows() == 3 and lf.dataset(uri).version == 2


def test_append_after_concurrent_restore_fails(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0), uri)
    lf.write_dataset(rows(1), uri, mode="append")
    frags = lf.write_fragments(rows(2), uri)
    lf.dataset(uri, version=1).restore()
    with pytest.raises(CommitConflictError, match="restore"):
        lf.LanceDataset.commit(uri, lf.LanceOperation.Append(frags), read_version=2)


def test_concurrent_deletes_same_fragment(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0, 10), uri)
    a, b = lf.dataset(uri), lf.dataset(uri)
    a.delete("i = 1")
    # b read version 1; its Delete touches the same fragment: the handle retries on the new version.
    b.delete("i = 2")
    assert sorted(lf.dataset(uri).to_table().column("i").to_pylist()) == [0, 3, 4, 5, 6, 7, 8, 9]
    # A raw Delete commit built on version 1 is rebased: deletion vectors are merged.
    meta = lf.dataset(uri, version=1).get_fragments()[0].delete("i = 3")
    assert meta is not None
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Delete([meta], [], "i = 3"), read_version=1)
    assert sorted(ds.to_table().column("i").to_pylist()) == [0, 4, 5, 6, 7, 8, 9]
    assert lance.dataset(uri).to_table().equals(ds.to_table())
    # Deleting a row another writer already deleted is a retryable conflict naming the other delete.
    meta = lf.dataset(uri, version=1).get_fragments()[0].delete("i = 1")
    assert meta is not None
    with pytest.raises(RetryableCommitConflictError, match="delete"):
        lf.LanceDataset.commit(uri, lf.LanceOperation.Delete([meta], [], "i = 1"), read_version=1)
    assert lf.dataset(uri).version == 4


def test_threads_conflicting_overwrite_and_delete(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0, 10), uri)
    base = lf.dataset(uri)
    frag = base.get_fragments()[0].delete("i < 5")
    assert frag is not None
    new_frags = lf.write_fragments(rows(9, 2), uri, mode="overwrite")
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def commit(name: str, op: lf.LanceOperation.BaseOperation) -> None:
        barrier.wait()
        try:
            results[name] = lf.LanceDataset.commit(uri, op, read_version=1).version
        except CommitConflictError as exc:
            results[name] = exc

    t1 = threading.Thread(target=commit, args=("delete", lf.LanceOperation.Delete([frag], [], "i < 5")))
    t2 = threading.Thread(target=commit, args=("overwrite", lf.LanceOperation.Overwrite(rows(0, 1).schema,
                                                                                       new_frags)))
    t1.start(), t2.start()
    t1.join(), t2.join()
    # Overwrite never conflicts with a Delete; the Delete fails if it lost the race.
    assert isinstance(results["overwrite"], int)
    if isinstance(results["delete"], Exception):
        assert "overwrite" in str(results["delete"])
        _check_history(uri, 2)
    else:
        _check_history(uri, 3)


def test_threads_deletes_merge(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0, 40), uri, max_rows_per_file=20)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        ds = lf.dataset(uri, version=1)
        barrier.wait()
        try:
            ds.delete(f"i = {k} OR i = {k + 20}", conflict_retries=0)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    left = sorted(lf.dataset(uri).to_table().column("i").to_pylist())
    assert left == [i for i in range(40) if i not in (0, 1, 2, 3, 20, 21, 22, 23)]
    assert lance.dataset(uri).count_rows() == 32
    _check_history(uri, 5)


def test_we_and_pylance_append_concurrently(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(rows(0), uri)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def ours() -> None:
        barrier.wait()
        try:
            for k in range(1, 5):
                lf.write_dataset(rows(k), uri, mode="append")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def theirs() -> None:
        barrier.wait()
        try:
            for k in range(11, 15):
                lance.write_dataset(rows(k), uri, mode="append", data_storage_version="2.0")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=ours), threading.Thread(target=theirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    writers = sorted(set(lf.dataset(uri).to_table().column("writer").to_pylist()))
    assert writers == [0, 1, 2, 3, 4, 11, 12, 13, 14]
    assert lance.dataset(uri).to_table().equals(lf.dataset(uri).to_table())
    _check_history(uri, 9)
