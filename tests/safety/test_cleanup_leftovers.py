"""Leftovers of failed or killed operations: failed writes remove their files, and one cleanup with
``delete_unverified=True`` leaves exactly the files the remaining versions reference.

pylance 14.0.2 is the oracle for orphan data files (it lists ``data/`` in full with
``delete_unverified``, and removes a local writer's ``data/.tmp*`` files); for a killed commit's
transaction and deletion files newer than the kept versions we go beyond it (it keeps them).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format import write as write_mod
from lance_format.cleanup import cleanup_old_versions
from lance_format.errors import InvalidInputError
from lance_format.storage import LocalStore
from lance_format.table.naming import data_file_key, transaction_key

ZERO = dt.timedelta(0)


def _table(start: int, n: int = 20) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "s": [f"r{i}" for i in range(n)]})


def _files(uri: str) -> set[str]:
    return {p.relative_to(uri).as_posix() for p in Path(uri).rglob("*") if p.is_file()}


def _plant(uri: str, *keys: str) -> None:
    for key in keys:
        path = Path(uri, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind")


def _referenced(uri: str) -> set[str]:
    """Every file the remaining versions use, plus what is no cleanup's business (hint, tags)."""
    out = {k for k in _files(uri) if k.endswith(".manifest") or k.startswith("_refs/")
           or k == "_versions/latest_version_hint.json"}
    for v in lance.dataset(uri).versions():
        theirs = lance.dataset(uri, version=v["version"])
        for frag in theirs.get_fragments():
            out |= {data_file_key(df.path) for df in frag.data_files()}
        index_dirs = {f"_indices/{info['uuid']}/" for info in theirs.list_indices()}
        out |= {k for k in _files(uri) if any(k.startswith(d) for d in index_dirs)}
        m = lf.dataset(uri, version=v["version"]).manifest
        out |= {f.deletion_file.path(f.id) for f in m.fragments if f.deletion_file is not None}
        if m.transaction_file:
            out.add(transaction_key(m.transaction_file))
    return out


def _rows(uri: str) -> list[int]:
    return sorted(lance.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())


def _figures(s: Any) -> tuple[int, int]:
    return s.old_versions, s.data_files_removed


def _clean_both(a: str, b: str, **kw: Any) -> tuple[Any, Any]:
    mine = cleanup_old_versions(lf.dataset(a), ZERO, delete_unverified=True, commit_grace=ZERO, **kw)
    theirs = lance.dataset(b).cleanup_old_versions(ZERO, delete_unverified=True, **kw)
    return mine, theirs


def test_orphans_newer_than_a_tagged_old_version_go_as_with_pylance(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lf.write_dataset(_table(0), a)
    lf.write_dataset(_table(20), a, mode="append")
    lf.dataset(a).tags.create("keep", 2)  # kept; only version 1 goes, so the kept versions start at 2
    time.sleep(0.01)
    _plant(a, "data/orphan-after-tag.lance", "data/.tmp-killed-writer", "_transactions/5-lost.txn",
           "_deletions/0-9-9.arrow")
    time.sleep(0.01)
    lf.write_dataset(_table(40), a, mode="append")
    _plant(a, "data/orphan-after-latest.lance")
    shutil.copytree(a, b)
    mine, theirs = _clean_both(a, b, error_if_tagged_old_versions=False)
    assert _figures(mine) == _figures(theirs) == (1, 3)
    assert {k for k in _files(a) if k.startswith("data/")} == {k for k in _files(b) if k.startswith("data/")}
    # pylance keeps the lost commit's transaction and deletion file (newer than version 2); we do not
    assert _files(a) == _referenced(a) == _files(b) - {"_transactions/5-lost.txn", "_deletions/0-9-9.arrow"}
    assert _rows(a) == _rows(b) == list(range(60))
    assert lance.dataset(a, version="keep").count_rows() == 40


def test_orphans_newer_than_the_latest_commit_go_only_with_delete_unverified(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lf.write_dataset(_table(0), a)
    lf.write_dataset(_table(20), a, mode="append")
    time.sleep(0.01)
    orphans = ("data/orphan.lance", "data/.tmp12345", "_transactions/3-lost.txn", "_versions/.tmp-manifest")
    _plant(a, *orphans)
    # Without delete_unverified they may belong to a commit in flight: kept.
    assert cleanup_old_versions(lf.dataset(a), ZERO, commit_grace=ZERO).old_versions == 1
    assert all(Path(a, k).exists() for k in orphans)
    shutil.copytree(a, b)
    mine, theirs = _clean_both(a, b)
    assert mine.data_files_removed == theirs.data_files_removed == 2
    assert _files(a) == _referenced(a)
    assert _files(a) <= _files(b)
    assert _rows(a) == _rows(b) == list(range(40))


def _failing_commit(exc: BaseException) -> Callable[..., Any]:
    def commit(*_args: Any, **_kw: Any) -> Any:
        raise exc
    return commit


@pytest.mark.parametrize("mode", ["create", "append", "overwrite"])
def test_failed_write_dataset_leaves_nothing(tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "ds")
    if mode != "create":
        lf.write_dataset(_table(0), uri)
    before = _files(uri) if mode != "create" else set()
    with pytest.raises(InvalidInputError, match="transaction_properties"):
        lf.write_dataset(_table(100), uri, mode=mode, transaction_properties={"attempt": 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError, match="commit_message"):
        lf.write_dataset(_table(100), uri, mode=mode, commit_message=7)  # type: ignore[arg-type]
    assert (_files(uri) if Path(uri).exists() else set()) == before
    # Failures after the data files were written (several files: max_rows_per_file=7).
    for exc in (TypeError("a bug in the commit path"), KeyboardInterrupt(), OSError("disk gone")):
        monkeypatch.setattr(write_mod, "commit_transaction", _failing_commit(exc))
        with pytest.raises(type(exc)):
            lf.write_dataset(_table(100), uri, mode=mode, max_rows_per_file=7)
        assert (_files(uri) if Path(uri).exists() else set()) == before, type(exc).__name__
    monkeypatch.undo()
    if mode != "create":
        assert _rows(uri) == list(range(20))


def test_an_interrupt_after_the_commit_landed_keeps_the_written_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(_table(0), uri)
    real = write_mod.commit_transaction

    def commit_then_interrupt(*args: Any, **kw: Any) -> Any:
        real(*args, **kw)
        raise KeyboardInterrupt  # e.g. Ctrl-C while the hint file is written

    monkeypatch.setattr(write_mod, "commit_transaction", commit_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        lf.write_dataset(_table(20), uri, mode="append", max_rows_per_file=7)
    lance.dataset(uri).validate()
    assert _rows(uri) == list(range(40))
    assert _files(uri) == _referenced(uri)


def _killed_at_commit(uri: str, operation: Callable[[], Any]) -> None:
    """Run ``operation`` in a forked child that dies (no cleanup, no finally) as it puts its manifest."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        try:
            real = LocalStore.put_if_absent

            def put_if_absent(self: LocalStore, key: str, data: bytes) -> None:
                if key.endswith(".manifest"):
                    os._exit(0)  # killed: data, deletion, index and transaction files are written
                real(self, key, data)

            LocalStore.put_if_absent = put_if_absent  # type: ignore[method-assign]
            operation()
        finally:
            os._exit(3)  # the operation committed or failed without reaching its manifest
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the operation never reached its commit"


@pytest.mark.filterwarnings("ignore:lance is not fork-safe")  # the forked child never uses pylance
def test_one_unverified_cleanup_after_failed_and_killed_operations_leaves_exactly_the_referenced_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lf.write_dataset(_table(0), a, max_rows_per_file=10)
    lf.write_dataset(_table(20), a, mode="append", max_rows_per_file=10)
    lf.dataset(a).delete("id % 5 = 0")
    lf.dataset(a).create_scalar_index("id", "BTREE")
    rows, version = _rows(a), lf.dataset(a).version
    committed = _files(a)
    _killed_at_commit(a, lambda: lf.write_dataset(_table(100), a, mode="append"))
    _killed_at_commit(a, lambda: lf.write_dataset(_table(200), a, mode="overwrite"))
    _killed_at_commit(a, lambda: lf.dataset(a).delete("id % 3 = 0"))
    _killed_at_commit(a, lambda: lf.dataset(a).optimize.compact_files(target_rows_per_fragment=1000))
    _killed_at_commit(a, lambda: lf.dataset(a).create_scalar_index("s", "BTREE"))
    monkeypatch.setattr(write_mod, "commit_transaction", _failing_commit(RuntimeError("failed commit")))
    with pytest.raises(RuntimeError):
        lf.write_dataset(_table(300), a, mode="append")
    monkeypatch.undo()
    leftovers = _files(a) - committed
    assert any(k.startswith("data/") for k in leftovers) and any(k.startswith("_deletions/") for k in leftovers)
    assert any(k.startswith("_indices/") for k in leftovers) and any(k.startswith("_transactions/") for k in leftovers)
    assert lf.dataset(a).version == version and _rows(a) == rows

    shutil.copytree(a, b)
    mine, theirs = _clean_both(a, b)
    assert _files(a) == _referenced(a)
    assert mine.old_versions == theirs.old_versions == version - 1
    assert _files(a) <= _files(b)  # pylance keeps the killed commits' newer transaction/deletion files
    lance.dataset(a).validate()
    assert _rows(a) == _rows(b) == rows
    assert lance.dataset(a).to_table(filter="id = 31").num_rows == 1  # the index still answers
    # A second cleanup finds nothing left to do.
    again = cleanup_old_versions(lf.dataset(a), ZERO, delete_unverified=True, commit_grace=ZERO)
    assert again.keys == ()
