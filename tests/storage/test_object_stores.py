"""Contract tests every ObjectStore backend must pass (local, memory, S3 on moto)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lance_format.errors import (
    InvalidInputError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    PathEscapeError,
    UnsupportedSchemeError,
)
from lance_format.storage import ObjectStore, open_store

REPO_ROOT = str(Path(__file__).resolve().parents[2])



@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[ObjectStore]:
    kind = request.param
    if kind == "local":
        yield open_store(str(tmp_path) + "/root")
    elif kind == "memory":
        yield open_store(f"memory://test-{uuid.uuid4().hex}/root")  # a private store, gone with it
    else:
        endpoint, bucket, options = request.getfixturevalue("s3_server")
        yield open_store(request.getfixturevalue("s3_uri"), options)


def test_write_read(store: ObjectStore) -> None:
    store.write("a/b.bin", b"hello world")
    assert store.read("a/b.bin") == b"hello world"
    assert store.size("a/b.bin") == 11
    assert store.exists("a/b.bin")
    assert not store.exists("a/c.bin")
    assert not store.exists("a")  # a directory is not an object
    store.write("a/b.bin", b"replaced")
    assert store.read("a/b.bin") == b"replaced"


def test_read_range(store: ObjectStore) -> None:
    data = bytes(range(256)) * 4
    store.write("r", data)
    assert store.read_range("r", 0, 10) == data[:10]
    assert store.read_range("r", 1000, 100) == data[1000:]  # short read at the end
    assert store.read_range("r", 2000, 5) == b""
    assert store.read_range("r", 5, 0) == b""
    assert store.read_range("r", 1023, 1) == data[1023:]


def test_missing(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError, match="nope"):
        store.read("nope")
    with pytest.raises(ObjectNotFoundError, match="nope"):
        store.read_range("nope", 0, 4)
    with pytest.raises(ObjectNotFoundError, match="nope"):
        store.read_range("nope", 0, 0)
    with pytest.raises(ObjectNotFoundError, match="nope"):
        store.size("dir/nope")
    store.delete("nope")  # not an error
    assert list(store.list("nothing-here")) == []


def test_list(store: ObjectStore) -> None:
    for key in ["_versions/1.manifest", "_versions/2.manifest", "data/x.lance", "data/sub/y.lance", "top"]:
        store.write(key, key.encode())
    keys = sorted(o.key for o in store.list())
    assert keys == ["_versions/1.manifest", "_versions/2.manifest", "data/sub/y.lance", "data/x.lance", "top"]
    infos = {o.key: o for o in store.list("data")}
    assert set(infos) == {"data/x.lance", "data/sub/y.lance"}
    assert infos["data/x.lance"].size == len(b"data/x.lance")
    assert infos["data/x.lance"].last_modified is not None
    assert sorted(o.key for o in store.list("data/")) == ["data/sub/y.lance", "data/x.lance"]
    # A prefix is a directory, not a string prefix.
    assert list(store.list("_vers")) == []
    assert list(store.list("top")) == []


def test_put_if_absent(store: ObjectStore) -> None:
    store.put_if_absent("_versions/1.manifest", b"first")
    with pytest.raises(ObjectAlreadyExistsError, match="1.manifest"):
        store.put_if_absent("_versions/1.manifest", b"second")
    assert store.read("_versions/1.manifest") == b"first"
    # No staging leftovers are visible.
    assert [o.key for o in store.list("_versions")] == ["_versions/1.manifest"]


def test_open_writer(store: ObjectStore) -> None:
    w = store.open_writer("data/f.lance")
    w.write(b"abc")
    w.write(memoryview(b"defg"))
    assert w.tell() == 7
    assert not store.exists("data/f.lance")  # appears on close only
    w.close()
    assert store.read("data/f.lance") == b"abcdefg"
    assert [o.key for o in store.list("data")] == ["data/f.lance"]


def test_open_writer_abort_on_exception(store: ObjectStore) -> None:
    with pytest.raises(RuntimeError), store.open_writer("data/g.lance") as w:  # type: ignore[attr-defined]
        w.write(b"partial")
        raise RuntimeError("boom")
    assert not store.exists("data/g.lance")
    assert list(store.list("data")) == []


def test_delete(store: ObjectStore) -> None:
    store.write("x/y", b"1")
    store.delete("x/y")
    assert not store.exists("x/y")
    assert list(store.list()) == []


def test_child_and_uri(store: ObjectStore) -> None:
    store.write("sub/dir/k", b"v")
    child = store.child("sub")
    assert child.read("dir/k") == b"v"
    assert child.root == store.uri("sub")
    assert child.uri("dir/k") == store.uri("sub/dir/k")
    assert [o.key for o in child.list()] == ["dir/k"]
    child.put_if_absent("new", b"n")
    assert store.read("sub/new") == b"n"
    assert store.uri("") == store.root


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/../../x", "..", "a\\b"])
def test_path_escape(store: ObjectStore, bad: str) -> None:
    for op in (
        lambda: store.read(bad),
        lambda: store.write(bad, b"x"),
        lambda: store.put_if_absent(bad, b"x"),
        lambda: store.size(bad),
        lambda: store.child(bad),
        lambda: store.open_writer(bad),
    ):
        with pytest.raises(PathEscapeError):
            op()


def test_normalized_keys(store: ObjectStore) -> None:
    store.write("a/./b/../c", b"1")
    assert store.read("a/c") == b"1"


def test_concurrent_put_if_absent_threads(store: ObjectStore) -> None:
    n = 16
    barrier = threading.Barrier(n)
    wins: list[int] = []
    losses: list[int] = []
    errors: list[BaseException] = []

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            store.put_if_absent("_versions/race.manifest", f"writer-{i}".encode())
            wins.append(i)
        except ObjectAlreadyExistsError:
            losses.append(i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(wins) == 1 and len(losses) == n - 1
    assert store.read("_versions/race.manifest") == f"writer-{wins[0]}".encode()


_RACE_WORKER = """
import os, sys, time
from lance_format.errors import ObjectAlreadyExistsError
from lance_format.storage import open_store

root, idx, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = open_store(root)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.0005)
try:
    store.put_if_absent("_versions/p.manifest", f"proc-{idx}".encode() * 1000)
    print("win", flush=True)
except ObjectAlreadyExistsError:
    print("lose", flush=True)
"""


def test_concurrent_put_if_absent_processes(tmp_path: Path) -> None:
    # Separate interpreters (not fork: pylance's Rust threads make fork unsafe).
    root = str(tmp_path / "procs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")])}
    for round_no in range(1):
        go = tmp_path / f"go-{round_no}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _RACE_WORKER, root, str(i), str(go)],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for i in range(4)
        ]
        try:
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "ready"
            go.touch()
            outcomes = [p.communicate(timeout=60)[0].strip() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        assert all(p.returncode == 0 for p in procs), outcomes
        assert sorted(outcomes) == ["lose", "lose", "lose", "win"], outcomes
        winner = outcomes.index("win")
        store = open_store(root)
        assert store.read("_versions/p.manifest") == f"proc-{winner}".encode() * 1000
        assert [o.key for o in store.list("_versions")] == ["_versions/p.manifest"]
        store.delete("_versions/p.manifest")


def test_unknown_scheme() -> None:
    with pytest.raises(UnsupportedSchemeError):
        open_store("gopher://x/y")


def test_each_memory_store_is_new_and_private() -> None:
    """As pylance: every open of a memory:// URI is an empty store; child stores share their parent's."""
    uri = f"memory://shared-{uuid.uuid4().hex}"
    store = open_store(uri)
    store.write("d/k", b"v")
    assert store.child("d").read("k") == b"v"
    assert not open_store(uri).exists("d/k")
    assert list(open_store(uri).list()) == []


# -- S3 specifics -------------------------------------------------------------


def test_s3_multipart_writer(s3_server: tuple[str, str, dict[str, str]], s3_uri: str) -> None:
    from lance_format.storage import s3 as s3mod

    _endpoint, _bucket, options = s3_server
    store = open_store(s3_uri, options)
    old = s3mod.MULTIPART_CHUNK
    s3mod.MULTIPART_CHUNK = 5 * 1024 * 1024  # S3's minimum part size
    try:
        payload = os.urandom(1024) * (11 * 1024)  # 11 MiB -> 3 parts
        w = store.open_writer("big/obj")
        for i in range(0, len(payload), 1 << 20):
            w.write(payload[i : i + (1 << 20)])
        w.close()
    finally:
        s3mod.MULTIPART_CHUNK = old
    assert store.size("big/obj") == len(payload)
    assert (
        store.read_range("big/obj", 6 * 1024 * 1024, 100) == payload[6 * 1024 * 1024 : 6 * 1024 * 1024 + 100]
    )


def test_s3_list_paginates(s3_server: tuple[str, str, dict[str, str]], s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    store = open_store(s3_uri, options)
    store.list_page_size = 7  # type: ignore[attr-defined]
    for i in range(30):
        store.write(f"many/{i:05d}", b"")
    assert [o.key for o in store.list("many")] == [f"many/{i:05d}" for i in range(30)]


def test_s3_options_and_errors(s3_server: tuple[str, str, dict[str, str]]) -> None:
    endpoint, bucket, options = s3_server
    plain = {k: v for k, v in options.items() if k != "allow_http"}
    with pytest.raises(InvalidInputError, match="allow_http"):
        open_store(f"s3://{bucket}/x", plain)
    alias = {
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "allow_http": "True",
    }
    store = open_store(f"s3://{bucket}/alias-{uuid.uuid4().hex}", alias)
    store.write("k", b"v")
    assert store.read("k") == b"v"
    missing = open_store(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x", options)
    with pytest.raises(ObjectNotFoundError, match="no-such-bucket"):
        missing.read("k")
    with pytest.raises(InvalidInputError):
        open_store("s3:///nobucket", options)


def test_memory_bare_root() -> None:
    store = open_store("memory://")
    assert store.root == "memory://"
    key = f"bare-{uuid.uuid4().hex}/k"
    store.write(key, b"v")
    assert store.uri(key) == f"memory://{key}"
    assert store.child(key.split("/")[0]).root == f"memory://{key.split('/')[0]}"
    store.delete(key)
