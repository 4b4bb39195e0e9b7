"""A commit never lands on versions it could not check (cleaned up between its read and its commit).

Each operation reads its version, then, before it commits, another handle compacts the table,
appends rows and removes every old version. The operation must then either be refused with a
``CommitConflictError`` that names the missing version (nothing of it lands) or re-run on the
latest version; either way no deleted row comes back, no row is duplicated and pylance reads the
same rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest_s3 import S3Server, s3_server  # noqa: F401

import lance_format as lf
from lance_format.errors import CommitConflictError, MissingVersionError
from lance_format.table import commit as commit_mod
from lance_format.table.commit import commit_transaction
from lance_format.table.transaction import LanceOperation, Transaction

N = 100
EXTRA = pa.table({"id": pa.array(range(1000, 1010), pa.int64()), "x": pa.array([0.0] * 10)})


def _table() -> pa.Table:
    return pa.table({"id": pa.array(range(N), pa.int64()), "x": pa.array([float(i) for i in range(N)])})


#: Storage options of the dataset under test (local disk, S3 or an external manifest store).
OPTS: dict[str, dict[str, str] | None] = {}


def _open(uri: str) -> lf.LanceDataset:
    return lf.dataset(uri, storage_options=OPTS.get(uri))


def _interfere(uri: str) -> None:
    """Compaction, an append and a cleanup at zero retention, in another handle."""
    _open(uri).optimize.compact_files(target_rows_per_fragment=1_000_000)
    lf.write_dataset(EXTRA, uri, mode="append", storage_options=OPTS.get(uri))
    # A cleanup that runs after the grace protecting commits in flight has passed.
    _open(uri).cleanup_old_versions(older_than=timedelta(0), commit_grace=timedelta(0))


@contextlib.contextmanager
def _between_read_and_commit(monkeypatch: pytest.MonkeyPatch, uri: str) -> Iterator[list[int]]:
    """Run :func:`_interfere` once, the first time a commit looks for the latest version."""
    real = commit_mod.find_latest
    ran: list[int] = []

    def find_latest(store: Any) -> Any:
        if not ran:
            ran.append(1)
            _interfere(uri)
        return real(store)

    monkeypatch.setattr(commit_mod, "find_latest", find_latest)
    yield ran
    monkeypatch.setattr(commit_mod, "find_latest", real)


def _ids(uri: str) -> list[int]:
    ours = sorted(_open(uri).to_table(columns=["id"]).column("id").to_pylist())
    opts = OPTS.get(uri)
    pylance_opts = None if opts is None or "external_manifest_store" in opts else opts
    theirs = sorted(lance.dataset(uri, storage_options=pylance_opts).to_table(columns=["id"])
                    .column("id").to_pylist())
    assert ours == theirs
    return ours


def _create(uri: str, opts: dict[str, str] | None) -> str:
    OPTS[uri] = opts
    lf.write_dataset(_table(), uri, max_rows_per_file=10, storage_options=opts)
    return uri


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return _create(str(tmp_path / "t.lance"), None)


@pytest.fixture(params=["local", "external_store", "s3"])
def any_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same dataset on local disk, behind a sqlite manifest store, and on S3 (moto)."""
    if request.param == "local":
        return _create(str(tmp_path / "t.lance"), None)
    if request.param == "external_store":
        return _create(str(tmp_path / "t.lance"),
                       {"external_manifest_store": f"sqlite://{tmp_path / 'manifests.db'}"})
    server: S3Server = request.getfixturevalue("s3_server")
    _endpoint, bucket, options = server
    return _create(f"s3://{bucket}/cleaned-{tmp_path.name}", dict(options))


def _before_and_after(ids: list[int]) -> tuple[list[int], list[int]]:
    base = list(range(N)) + list(range(1000, 1010))
    return sorted(base), sorted(i for i in base if i >= 5)


def test_delete_over_cleaned_versions_deletes_or_refuses(any_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _open(any_uri)
    with _between_read_and_commit(monkeypatch, any_uri) as ran:
        try:
            result = ds.delete("id < 5")
        except CommitConflictError:
            result = None
    assert ran
    ids = _ids(any_uri)
    unchanged, deleted = _before_and_after(ids)
    if result is None:
        assert ids == unchanged
    else:
        assert result["num_deleted_rows"] == 5
        assert ids == deleted


def test_update_over_cleaned_versions_never_duplicates(any_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _open(any_uri)
    with _between_read_and_commit(monkeypatch, any_uri), contextlib.suppress(CommitConflictError):
        ds.update({"x": "x + 1000"}, where="id < 5")
    ids = _ids(any_uri)
    assert ids == _before_and_after(ids)[0]
    xs = _open(any_uri).to_table(filter="id < 5").column("x").to_pylist()
    assert sorted(xs) in ([0.0, 1.0, 2.0, 3.0, 4.0], [1000.0, 1001.0, 1002.0, 1003.0, 1004.0])


def test_merge_insert_over_cleaned_versions_never_duplicates(any_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _open(any_uri)
    src = pa.table({"id": pa.array(range(5), pa.int64()), "x": pa.array([-1.0] * 5)})
    with _between_read_and_commit(monkeypatch, any_uri), contextlib.suppress(CommitConflictError):
        ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(src)
    ids = _ids(any_uri)
    assert ids == _before_and_after(ids)[0]
    xs = _open(any_uri).to_table(filter="id < 5").column("x").to_pylist()
    assert xs in ([-1.0] * 5, [0.0, 1.0, 2.0, 3.0, 4.0])


SchemaOp = Callable[[lf.LanceDataset], None]
SCHEMA_OPS: dict[str, SchemaOp] = {
    "add_columns": lambda ds: ds.add_columns({"y": "id * 2"}),
    "alter_columns": lambda ds: ds.alter_columns({"path": "x", "name": "z"}),
    "drop_columns": lambda ds: ds.drop_columns(["x"]),
    "create_scalar_index": lambda ds: ds.create_scalar_index("id", "BTREE"),
}


@pytest.mark.parametrize("name", sorted(SCHEMA_OPS))
def test_schema_and_index_changes_over_cleaned_versions_lose_no_rows(
        uri: str, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    ds = _open(uri)
    refused: CommitConflictError | None = None
    with _between_read_and_commit(monkeypatch, uri):
        try:
            SCHEMA_OPS[name](ds)
        except CommitConflictError as exc:
            refused = exc
    ids = _ids(uri)
    assert ids == _before_and_after(ids)[0]
    latest = _open(uri)
    if refused is not None:
        assert isinstance(refused, MissingVersionError) or "conflict" in str(refused)
        assert latest.schema.names == ["id", "x"]
        assert not latest.list_indices()
        return
    table = latest.to_table()
    if name == "add_columns":
        assert pc.all(pc.equal(table.column("y"), pc.multiply(table.column("id"), 2))).as_py()
    elif name == "alter_columns":
        assert latest.schema.names == ["id", "z"]
    elif name == "drop_columns":
        assert latest.schema.names == ["id"]
    else:
        assert latest.to_table(filter="id = 1003").num_rows == 0
        assert lance.dataset(uri).to_table(filter="id = 1003").num_rows == 0


def test_commit_refuses_and_names_the_missing_version(any_uri: str) -> None:
    ds = _open(any_uri)
    read = ds.manifest
    frag = read.fragments[0]
    _interfere(any_uri)
    latest = _open(any_uri).version
    txn = Transaction(read.version, LanceOperation.Delete([], [frag.id], "id < 10"))
    with pytest.raises(MissingVersionError, match=rf"version {read.version + 1}\b.*gone"):
        commit_transaction(ds._store, txn, base=read)
    assert _open(any_uri).version == latest
    assert _ids(any_uri) == _before_and_after([])[0]


def test_operation_naming_a_fragment_the_latest_lacks_is_a_conflict(uri: str) -> None:
    ds = _open(uri)
    gone = ds.manifest.fragments[0].id
    _open(uri).optimize.compact_files(target_rows_per_fragment=1_000_000)
    latest = _open(uri)
    # Built directly on the latest version (no newer versions to check): only the
    # manifest builder can see that the fragment is gone.
    txn = Transaction(latest.version, LanceOperation.Delete([], [gone], "id < 10"))
    with pytest.raises(CommitConflictError, match=rf"fragments \[{gone}\]"):
        commit_transaction(latest._store, txn, base=latest.manifest)
    assert _ids(uri) == list(range(N))


def test_reserving_fragment_ids_over_cleaned_versions_still_works(uri: str) -> None:
    ds = _open(uri)
    _interfere(uri)
    txn = Transaction(ds.version, LanceOperation.ReserveFragments(3))
    manifest = commit_transaction(ds._store, txn, base=ds.manifest)
    assert manifest.version == _open(uri).version


def test_default_commit_grace_keeps_what_a_commit_in_flight_read(uri: str) -> None:
    ds = lf.dataset(uri)
    read = ds.manifest
    _open(uri).optimize.compact_files(target_rows_per_fragment=1_000_000)
    lf.write_dataset(EXTRA, uri, mode="append")
    stats = _open(uri).cleanup_old_versions(older_than=timedelta(0))  # default grace: 5 minutes
    assert stats.old_versions == 0
    # The versions since ``read`` are still there to check against: an ordinary retryable
    # conflict with the compaction, not a refusal for versions that are gone.
    txn = Transaction(read.version, LanceOperation.Delete([], [read.fragments[0].id], "id < 10"))
    with pytest.raises(CommitConflictError, match="conflicts with rewrite") as caught:
        commit_transaction(ds._store, txn, base=read)
    assert not isinstance(caught.value, MissingVersionError)
