"""Deletion files written while rebasing a Delete are removed when no manifest will reference them.

Covers: giving up after the retries run out, a conflict found after an earlier rebase, and
a successful commit whose first rebase was superseded by a second one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CommitConflictError, ObjectAlreadyExistsError, RetryableCommitConflictError
from lance_format.storage import ObjectStore, open_store
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import LanceOperation, Transaction


def _dataset(tmp_path: Path) -> str:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"i": pa.array(range(10), pa.int64())}), uri)
    return uri


def _deletions(uri: str) -> set[str]:
    return {p.name for p in (Path(uri) / "_deletions").glob("*")}


def _delete_on_v1(uri: str, predicate: str) -> Transaction:
    """A Delete built on version 1, as a writer that read version 1 would commit it."""
    frag = lance_format.dataset(uri, version=1).get_fragments()[0].delete(predicate)
    assert frag is not None
    return Transaction(1, LanceOperation.Delete([frag], [], predicate))


def _manifest_puts_lose(store: ObjectStore, monkeypatch: pytest.MonkeyPatch,
                        before_losing: Callable[[int], None] | None = None, times: int = 1 << 30) -> None:
    """Make the first ``times`` manifest writes lose the race (others write files as usual)."""
    real = store.put_if_absent
    lost = [0]

    def put_if_absent(key: str, data: bytes) -> None:
        if key.startswith("_versions/") and lost[0] < times:
            lost[0] += 1
            if before_losing is not None:
                before_losing(lost[0])
            raise ObjectAlreadyExistsError(f"{key}: lost the race (test)")
        real(key, data)

    monkeypatch.setattr(store, "put_if_absent", put_if_absent)


def test_give_up_after_retries_removes_rebased_deletion_files(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _dataset(tmp_path)
    txn = _delete_on_v1(uri, "i = 3")
    lance_format.dataset(uri).delete("i = 1")  # version 2 touches the same fragment: we rebase
    before = _deletions(uri)
    assert len(before) == 2  # our own vector and version 2's
    store = open_store(uri)
    _manifest_puts_lose(store, monkeypatch)
    with pytest.raises(CommitConflictError, match="gave up"):
        commit_transaction(store, txn, max_retries=2)
    assert _deletions(uri) == before  # the merged vector is gone, nothing else is touched
    ds = lance_format.dataset(uri)
    assert ds.version == 2
    assert ds.to_table().column("i").to_pylist() == [0, *range(2, 10)]
    assert lance.dataset(uri).to_table().equals(ds.to_table())


def test_conflict_after_a_rebase_removes_its_deletion_file(tmp_path: Path) -> None:
    uri = _dataset(tmp_path)
    txn = _delete_on_v1(uri, "i = 5")
    lance_format.dataset(uri).delete("i = 1")  # version 2: rebased over (new file)
    lance_format.dataset(uri).delete("i = 5")  # version 3: same row -> conflict
    before = _deletions(uri)
    with pytest.raises(RetryableCommitConflictError):
        commit_transaction(open_store(uri), txn)
    assert _deletions(uri) == before
    assert lance_format.dataset(uri).version == 3


def test_success_removes_only_superseded_rebase_files(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _dataset(tmp_path)
    txn = _delete_on_v1(uri, "i = 7")
    lance_format.dataset(uri).delete("i = 1")  # version 2
    store = open_store(uri)

    def someone_commits(_: int) -> None:
        lance_format.dataset(uri).delete("i = 2")  # version 3 wins our first attempt

    _manifest_puts_lose(store, monkeypatch, someone_commits, times=1)
    before = _deletions(uri)
    manifest = commit_transaction(store, txn)
    assert manifest.version == 4
    frag = manifest.fragments[0]
    assert frag.deletion_file is not None and frag.deletion_file.num_deleted_rows == 3
    added = _deletions(uri) - before
    # Only the vector of the second rebase stays; version 3's own file is someone else's
    v3 = lance_format.dataset(uri, version=3).get_fragments()[0].metadata.deletion_file
    assert v3 is not None
    mine = f"0-{frag.deletion_file.read_version}-{frag.deletion_file.id}.arrow"
    theirs = f"0-{v3.read_version}-{v3.id}.arrow"
    assert added == {mine, theirs}
    ds = lance_format.dataset(uri)
    assert ds.to_table().column("i").to_pylist() == [0, 3, 4, 5, 6, 8, 9]
    assert lance.dataset(uri).to_table().equals(ds.to_table())
