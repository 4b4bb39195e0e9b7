"""Which S3 client a store uses, and that both speak S3 the same way.

Options carrying the keys (and a region or an endpoint) take the standard-library client, so
opening a dataset imports no botocore; credentials left to the environment, or
``LANCE_FORMAT_S3_CLIENT=botocore``, take botocore's client. Both read and write what pylance
14.0.2 reads and writes, and map S3's errors to the same exceptions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import lance_format
from lance_format.errors import ObjectAlreadyExistsError, ObjectNotFoundError, StorageError
from lance_format.storage import open_store
from lance_format.storage import s3 as s3_backend
from lance_format.storage.s3_http import S3HttpClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["http", "botocore"])
def client_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once with each client (a private client cache, so the choice is made afresh)."""
    monkeypatch.setattr(s3_backend, "_CLIENTS", {})
    if request.param == "botocore":
        monkeypatch.setenv(s3_backend.CLIENT_ENV, "botocore")
    return str(request.param)


def _is_http(store: Any) -> bool:
    return isinstance(store._client, S3HttpClient)


def test_options_choose_the_client(s3_server: Any, s3_uri: str, client_kind: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _endpoint, _bucket, options = s3_server
    assert _is_http(open_store(s3_uri, options)) == (client_kind == "http")
    # keys from the environment: botocore's credential chain resolves them
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    no_keys = {k: v for k, v in options.items() if "access_key" not in k}
    store = open_store(s3_uri, no_keys)
    assert not _is_http(store)
    store.write("k", b"v")
    assert store.read("k") == b"v"


def test_datasets_round_trip_with_pylance(s3_server: Any, s3_uri: str, client_kind: str) -> None:
    _endpoint, _bucket, options = s3_server
    lance.write_dataset(pa.table({"id": list(range(100))}), s3_uri, storage_options=options)
    lance_format.write_dataset(pa.table({"id": list(range(100, 150))}), s3_uri, mode="append",
                               storage_options=options)
    ds = lance_format.dataset(s3_uri, storage_options=options)
    assert _is_http(ds._store) == (client_kind == "http")
    stats = ds.cleanup_old_versions(older_than=dt.timedelta(0), commit_grace=dt.timedelta(0))
    assert stats.old_versions == 1
    theirs = lance.dataset(s3_uri, storage_options=options)
    assert [v["version"] for v in theirs.versions()] == [2]
    assert theirs.to_table().equals(ds.to_table())
    assert ds.take([0, 120]).to_pydict() == {"id": [0, 120]}


def test_errors_map_to_the_same_exceptions(s3_server: Any, s3_uri: str, client_kind: str) -> None:
    _endpoint, _bucket, options = s3_server
    store = open_store(s3_uri, options)
    with pytest.raises(ObjectNotFoundError):
        store.read("missing")
    with pytest.raises(ObjectNotFoundError):
        store.size("missing")
    assert not store.exists("missing")
    store.put_if_absent("once", b"1")
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("once", b"2")
    assert store.read("once") == b"1"
    assert store.read_range("once", 5, 3) == b""  # past the end: a short read
    store.delete("missing")  # deleting nothing is no error
    nobucket = open_store(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x", options)
    with pytest.raises(ObjectNotFoundError, match="bucket"):
        nobucket.read("k")


def test_an_unreachable_endpoint_is_a_storage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_backend, "_CLIENTS", {})
    store = open_store("s3://b/x", {"aws_access_key_id": "a", "aws_secret_access_key": "b",
                                    "aws_endpoint": "http://127.0.0.1:9", "allow_http": "true"})
    with pytest.raises(StorageError, match="s3://b/x/k"):
        store.read("k")


@pytest.mark.parametrize("token", [None, "session-token"])
def test_requests_are_signed_as_botocore_signs_them(token: str | None) -> None:
    # moto does not check signatures; AWS does. Same request, same SigV4 signature as botocore's.
    client = S3HttpClient("eu-west-1", "https://s3.example.test:9000", "AKID", "SECRET/x+y", token)
    host, path = client._target("bkt", "a dir/ü+x=1.lance")
    body = b"hello"
    request = AWSRequest(method="PUT", url=f"https://{host}{path}?list-type=2&prefix=a%20b%2F", data=body,
                         headers={"x-amz-content-sha256": hashlib.sha256(body).hexdigest(), "range": "bytes=0-3"})
    S3SigV4Auth(Credentials("AKID", "SECRET/x+y", token), "s3", "eu-west-1").add_auth(request)
    ours = client._headers("PUT", host, path, {"list-type": "2", "prefix": "a b/"}, body, {"range": "bytes=0-3"},
                           request.headers["X-Amz-Date"])
    assert ours["authorization"] == request.headers["Authorization"]


def modules_after_open_and_take(s3_uri: str, options: dict[str, str], names: list[str]) -> tuple[Any, list[bool]]:
    """In a fresh process (default client): open ``s3_uri``, take rows 1 and 2; which of ``names`` got imported."""
    lance.write_dataset(pa.table({"id": list(range(10))}), s3_uri, storage_options=options)
    code = ("import json, sys; import lance_format; "
            f"ds = lance_format.dataset({s3_uri!r}, storage_options={options!r}); "
            "rows = ds.take([1, 2]).to_pydict()['id']; "
            f"print(json.dumps([rows, [n in sys.modules for n in {names!r}]]))")
    env = {k: v for k, v in os.environ.items() if k != s3_backend.CLIENT_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env,
                         check=True, timeout=120)
    rows, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    return rows, loaded


def test_opening_and_reading_imports_no_botocore(s3_server: Any, s3_uri: str) -> None:
    assert modules_after_open_and_take(s3_uri, s3_server[2], ["botocore", "boto3"]) == ([1, 2], [False, False])
