"""Bulk deletes (``ObjectStore.delete_many``; S3 ``DeleteObjects``) and the process-wide S3 client."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.cleanup import cleanup_old_versions
from lance_format.storage import open_store
from lance_format.storage import s3 as s3_backend
from lance_format.storage.s3_http import S3HttpClient

REPO = Path(__file__).resolve().parents[2]


def _stores(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    _endpoint, _bucket, options = request.getfixturevalue("s3_server")
    return {"local": open_store(str(tmp_path / "local")), "memory": open_store(f"memory://bulk-{tmp_path.name}"),
            "s3": open_store(request.getfixturevalue("s3_uri"), options)}


@pytest.mark.parametrize("kind", ["local", "memory", "s3"])
def test_delete_many_deletes_every_key_and_counts_missing_ones(request: pytest.FixtureRequest, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    store = _stores(request, tmp_path)[kind]
    monkeypatch.setattr(s3_backend, "DELETE_BATCH", 3)  # several requests on S3
    keys = [f"data/f{i}.lance" for i in range(8)]
    for key in keys:
        store.write(key, b"x")
    store.write("data/kept.lance", b"y")
    done, failed = store.delete_many([*keys, "data/missing.lance"])
    assert failed == {}
    assert sorted(done) == sorted([*keys, "data/missing.lance"])
    assert [i.key for i in store.list("data")] == ["data/kept.lance"]


def test_cleanup_on_s3_deletes_in_bulk_requests(s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    for i in range(12):
        lance_format.write_dataset(pa.table({"id": [i]}), s3_uri, mode="append" if i else "create",
                                   storage_options=options)
    ds = lance_format.dataset(s3_uri, storage_options=options)
    client = s3_backend._client(options)
    assert isinstance(client, S3HttpClient)  # keys and endpoint in the options: the standard-library client
    before = dict(client.calls)
    stats = cleanup_old_versions(ds, dt.timedelta(0), commit_grace=dt.timedelta(0))
    calls = {op: client.calls[op] - before.get(op, 0) for op in ("DeleteObject", "DeleteObjects")}
    assert stats.old_versions == 11 and stats.transaction_files_removed == 11
    # manifests in one request, the transaction files in another; never one request per key
    assert calls == {"DeleteObject": 0, "DeleteObjects": 2}
    theirs = lance.dataset(s3_uri, storage_options=options)
    assert [v["version"] for v in theirs.versions()] == [12]
    assert sorted(theirs.to_table()["id"].to_pylist()) == list(range(12))


def test_stores_with_the_same_options_share_one_s3_client(s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    a = open_store(s3_uri, options)
    b = open_store(s3_uri + "/other", dict(options))
    a.write("k", b"1")
    b.write("k", b"2")
    assert a._client is b._client  # type: ignore[attr-defined]
    other = open_store(s3_uri, {**options, "aws_access_key_id": "someone-else"})
    assert other._client is not a._client  # type: ignore[attr-defined]


def test_opening_and_reading_on_s3_does_not_import_boto3(s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    lance.write_dataset(pa.table({"id": list(range(10))}), s3_uri, storage_options=options)
    code = ("import sys, lance_format\n"
            f"ds = lance_format.dataset({s3_uri!r}, storage_options={options!r})\n"
            "assert ds.to_table().num_rows == 10\n"
            "print('boto3' in sys.modules)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         check=True)
    assert out.stdout.strip() == "False"


def test_s3_listing_reports_utc_modification_times(s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    store = open_store(s3_uri, options)
    before = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=2)
    store.write("data/a.lance", b"abc")
    (info,) = list(store.list("data"))
    assert info.key == "data/a.lance" and info.size == 3
    assert info.last_modified is not None and info.last_modified.utcoffset() == dt.timedelta(0)
    assert before <= info.last_modified <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
