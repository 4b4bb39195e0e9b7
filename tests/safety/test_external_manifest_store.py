"""External manifest stores: SQLite on one host, DynamoDB (moto on loopback) in pylance's layout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import lance
import pyarrow as pa
import pytest
from conftest_s3 import S3Server, s3_server  # noqa: F401

import lance_format as lf
from lance_format.errors import NotSupportedError
from lance_format.storage import open_store
from lance_format.storage.external import DynamoDBManifestStore, ManifestEntry, SQLiteManifestStore

T = pa.table({"a": pa.array([1, 2, 3], pa.int64())})


def _sqlite(tmp_path: Path) -> dict[str, str]:
    return {"external_manifest_store": f"sqlite://{tmp_path / 'manifests.db'}"}


def test_sqlite_store_commits_and_versions_stay_readable_without_it(tmp_path: Path) -> None:
    uri, opts = str(tmp_path / "ds"), _sqlite(tmp_path)
    lf.write_dataset(T, uri, storage_options=opts)
    lf.write_dataset(T, uri, mode="append", storage_options=opts)
    lf.dataset(uri, storage_options=opts).delete("a = 1")
    assert lf.dataset(uri, storage_options=opts).version == 3
    store = SQLiteManifestStore(str(tmp_path / "manifests.db"))
    base = open_store(uri).store_path
    latest = store.get_latest(base)
    assert latest is not None and latest.version == 3 and latest.finalized
    # The manifests are finalised in the object store: readers unaware of the store agree.
    assert lf.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 4
    assert not [p for p in Path(uri, "_versions").iterdir() if ".manifest-" in p.name]


def test_reader_finishes_a_commit_whose_writer_stopped_after_deciding(tmp_path: Path) -> None:
    uri, opts = str(tmp_path / "ds"), _sqlite(tmp_path)
    lf.write_dataset(T, uri, storage_options=opts)
    lf.write_dataset(T, uri, mode="append", storage_options=opts)
    store = open_store(uri, opts)
    external = store.external
    assert external is not None
    entry = external.get_latest(store.store_path)
    assert entry is not None and entry.version == 2
    final = Path(uri, entry.path[len(store.store_path) + 1:])
    staged = final.with_name(final.name + f"-{uuid.uuid4()}")
    # Roll version 2 back to "decided but not copied": staged file only, entry naming it.
    final.rename(staged)
    external.put_if_exists(store.store_path, 2, f"{store.store_path}/_versions/{staged.name}", staged.stat().st_size)
    assert lf.dataset(uri, storage_options=opts).version == 2
    assert final.exists() and not staged.exists()
    repaired = external.get(store.store_path, 2)
    assert repaired == ManifestEntry(2, f"{store.store_path}/_versions/{final.name}", final.stat().st_size)


def test_losing_writer_leaves_no_staged_manifest(tmp_path: Path) -> None:
    uri, opts = str(tmp_path / "ds"), _sqlite(tmp_path)
    lf.write_dataset(T, uri, storage_options=opts)
    store = open_store(uri, opts)
    assert store.external is not None
    store.external.put_if_not_exists(store.store_path, 2, f"{store.store_path}/_versions/x.manifest", 1)
    with pytest.raises(Exception):  # noqa: B017 - version 2 is taken and names no real manifest
        lf.write_dataset(T, uri, mode="append", storage_options=opts)
    assert not [p for p in Path(uri, "_versions").iterdir() if ".manifest-" in p.name]


def test_store_without_atomic_create_refuses_to_commit(tmp_path: Path) -> None:
    from lance_format.storage.fsspec_store import register_fsspec_scheme

    register_fsspec_scheme("local")  # fsspec's local file system: create-only is not atomic there
    uri = f"local://{tmp_path / 'ds'}"
    plain = {"auto_mkdir": "true"}
    with pytest.raises(NotSupportedError, match="external manifest store"):
        lf.write_dataset(T, uri, storage_options=plain)
    assert not list(Path(tmp_path, "ds").rglob("*.lance"))  # the data files went with the refusal
    opts = dict(plain, **_sqlite(tmp_path))
    lf.write_dataset(T, uri, storage_options=opts)
    lf.write_dataset(T, uri, mode="append", storage_options=opts)
    assert lf.dataset(uri, storage_options=opts).count_rows() == 6


@pytest.fixture
def ddb_table(s3_server: S3Server) -> Iterator[tuple[str, dict[str, Any]]]:  # noqa: F811
    endpoint, _bucket, options = s3_server
    client = boto3.client("dynamodb", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    name = f"lance-{uuid.uuid4().hex[:8]}"
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "base_uri", "KeyType": "HASH"},
                                   {"AttributeName": "version", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "base_uri", "AttributeType": "S"},
                                              {"AttributeName": "version", "AttributeType": "N"}])
    yield name, dict(options, dynamodb_endpoint=endpoint)
    client.delete_table(TableName=name)


def test_dynamodb_store_in_pylance_layout(s3_server: S3Server, ddb_table: tuple[str, dict[str, Any]]) -> None:  # noqa: F811
    table, opts = ddb_table
    bucket = s3_server[1]
    prefix = f"ddb-{uuid.uuid4().hex[:8]}/ds.lance"
    uri = f"s3+ddb://{bucket}/{prefix}?ddbTableName={table}"
    lf.write_dataset(T, uri, storage_options=opts)
    lf.write_dataset(T, uri, mode="append", storage_options=opts)
    store = DynamoDBManifestStore(table, opts)
    latest = store.get_latest(prefix)
    assert latest is not None and latest.version == 2 and latest.path.startswith(f"{prefix}/_versions/")
    assert "testing" not in repr(store)
    assert lf.dataset(f"s3://{bucket}/{prefix}", storage_options=opts).count_rows() == 6
    # pylance's s3+ddb:// commit handler reads the same table and commits after us.
    try:
        theirs = lance.dataset(uri, storage_options=opts)
    except (ValueError, OSError) as exc:
        if "dynamodb" in str(exc).lower() and "feature" in str(exc).lower():
            pytest.skip("pylance built without the dynamodb feature")
        raise
    assert theirs.version == 2 and theirs.count_rows() == 6
    lance.write_dataset(T, uri, mode="append", storage_options=opts)
    assert lf.dataset(uri, storage_options=opts).version == 3
    assert store.get_latest(prefix) == ManifestEntry(3, store.get_latest(prefix).path,  # type: ignore[union-attr]
                                                      store.get_latest(prefix).size)  # type: ignore[union-attr]
    lf.write_dataset(T, uri, mode="append", storage_options=opts)
    assert lance.dataset(uri, storage_options=opts).count_rows() == 12


def test_sqlite_store_arbitrates_concurrent_writers_on_a_non_atomic_store(tmp_path: Path) -> None:
    import threading

    from lance_format.storage.fsspec_store import register_fsspec_scheme

    register_fsspec_scheme("local")
    uri = f"local://{tmp_path / 'ds'}"
    opts = dict(_sqlite(tmp_path), auto_mkdir="true")
    lf.write_dataset(T, uri, storage_options=opts)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                lf.write_dataset(T, uri, mode="append", storage_options=opts)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    ds = lf.dataset(uri, storage_options=opts)
    assert ds.version == 31 and ds.count_rows() == 31 * 3
    assert [v["version"] for v in ds.versions()] == list(range(1, 32))
    assert lance.dataset(str(tmp_path / "ds")).count_rows() == 93


def test_dynamodb_store_arbitrates_branch_commits_too(s3_server: S3Server,  # noqa: F811
                                                      ddb_table: tuple[str, dict[str, Any]]) -> None:
    # A branch is a dataset of its own under tree/{name}/: its versions are keyed by that path.
    table, opts = ddb_table
    bucket = s3_server[1]
    prefix = f"ddb-{uuid.uuid4().hex[:8]}/ds.lance"
    uri = f"s3+ddb://{bucket}/{prefix}?ddbTableName={table}"
    lf.write_dataset(T, uri, storage_options=opts)
    ds = lf.dataset(uri, storage_options=opts)
    branch = ds.create_branch("exp", 1)
    lf.write_dataset(T, branch.uri, mode="append", storage_options=opts)
    store = DynamoDBManifestStore(table, opts)
    entry = store.get_latest(f"{prefix}/tree/exp")
    assert entry is not None and entry.version == 2 and entry.finalized
    assert store.get_latest(prefix).version == 1  # type: ignore[union-attr]
    assert lf.dataset(uri, storage_options=opts).checkout_branch("exp").count_rows() == 6
    theirs = lance.dataset(uri, storage_options=opts).checkout_version(("exp", None))
    assert theirs.version == 2 and theirs.count_rows() == 6
    assert branch.uri == f"s3+ddb://{bucket}/{prefix}/tree/exp?ddbTableName={table}"
    lance.write_dataset(T, branch.uri, mode="append", storage_options=opts)
    assert store.get_latest(f"{prefix}/tree/exp").version == 3  # type: ignore[union-attr]
    assert lf.dataset(uri, storage_options=opts).checkout_branch("exp").count_rows() == 9
