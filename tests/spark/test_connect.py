"""The ``lance`` data source through Spark Connect: a local Connect server, a remote client.

The server is the one PySpark ships (``pyspark/sbin/start-connect-server.sh``), bound to
127.0.0.1 on a free port; the client registers the data source over gRPC and the server's
own Python workers run it, as on a cluster (README, "Running on Spark").
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

pytestmark = pytest.mark.slow

#: How long the server may take to accept connections (JVM start on a busy 2-core machine).
STARTUP_SECONDS = 240
#: Set by PySpark in this process once a Connect session exists (``pyspark/sql/session.py``).
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server's whole process group (JVM and its Python workers), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # workers may outlive the launcher for a moment
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of a Spark Connect server started for this module (always stopped)."""
    pytest.importorskip("pyspark")
    # The Connect client's own dependencies (the ``connect`` extra).
    for module in ("grpc_status", "google.rpc", "zstandard"):
        pytest.importorskip(module)
    import pyspark

    home = Path(pyspark.__file__).parent
    work = tmp_path_factory.mktemp("connect-server")
    port = _free_port()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOG_DIR=str(work), SPARK_PID_DIR=str(work),
               SPARK_NO_DAEMONIZE="1")  # foreground: the process (group) is ours to stop
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    cmd = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    log_path = work / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-4000:]
                pytest.fail(f"Spark Connect server did not start on 127.0.0.1:{port} "
                            f"(exit code {proc.returncode}):\n{tail}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[Any]:
    """A Spark Connect client session with the ``lance`` source registered from the client."""
    from pyspark.sql import SparkSession

    from lance_format.spark import register

    # Building a remote session marks the whole process as Connect mode (PySpark sets
    # SPARK_CONNECT_MODE_ENABLED); undo that afterwards so the classic ``spark`` fixture of the
    # other modules can still start a local session in this process.
    before = os.environ.get(CONNECT_MODE)
    session = SparkSession.builder.remote(connect_url).create()
    try:
        register(session)
        yield session
    finally:
        session.stop()
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "category": pa.array([f"c{i % 3}" for i in ids]),
        "x": pa.array([i * 0.5 for i in ids], pa.float64()),
    })


def test_connect_session_is_remote(remote: Any) -> None:
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert isinstance(remote, ConnectSession)


def test_pylance_dataset_reads_identically_over_connect(remote: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "src.lance")
    lance.write_dataset(_table(25), uri, max_rows_per_file=10)   # v1: 3 fragments
    lance.dataset(uri).delete("id % 4 = 1")                       # v2: deletion files
    expected = lance.dataset(uri).to_table().sort_by("id")

    df = remote.read.format("lance").load(uri)
    assert df.columns == ["id", "category", "x"]
    assert df.toArrow().sort_by("id").equals(expected)
    first = remote.read.format("lance").option("version", 1).option("columns", "id,x").load(uri)
    assert first.toArrow().sort_by("id").equals(lance.dataset(uri, version=1).to_table(columns=["id", "x"]))
    counts = {r["category"]: r["count"] for r in df.groupBy("category").count().collect()}
    assert counts == dict(collections.Counter(expected.column("category").to_pylist()))


def test_connect_writes_read_identically_in_pylance(remote: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "out.lance")
    remote.createDataFrame(_table(12)).write.format("lance").mode("overwrite").save(uri)
    (remote.createDataFrame(_table(3, start=100)).write.format("lance").mode("append")
     .option("transaction_properties", json.dumps({"via": "connect"})).save(uri))

    ds = lance.dataset(uri)
    assert ds.version == 2
    assert ds.to_table().sort_by("id").equals(pa.concat_tables([_table(12), _table(3, start=100)]))
    txn = lance_format.dataset(uri).read_transaction()
    assert txn is not None and txn.transaction_properties["via"] == "connect"


def test_copy_through_connect_matches_the_source(remote: Any, tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.lance"), str(tmp_path / "copy.lance")
    lance.write_dataset(_table(30), src, max_rows_per_file=8)
    lance.dataset(src).delete("category = 'c1'")
    remote.read.format("lance").load(src).write.format("lance").mode("overwrite").save(dst)
    assert lance.dataset(dst).to_table().sort_by("id").equals(lance.dataset(src).to_table().sort_by("id"))


def test_maintenance_runs_on_executors_over_connect(remote: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses
    import datetime as dt

    from lance_format.cleanup import COMMIT_GRACE_ENV
    from lance_format.spark import SparkRunner, cleanup_old_versions, compact_files

    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")  # versions superseded seconds ago go despite the commit grace
    uris = []
    for name in ("local", "connect"):
        uri = str(tmp_path / f"{name}.lance")
        lance.write_dataset(_table(40), uri, max_rows_per_file=6)
        lance.dataset(uri).delete("id % 5 = 0")
        uris.append(uri)
    local_uri, connect_uri = uris
    assert repr(SparkRunner(remote)) == "SparkRunner(connect)"
    local = lance_format.dataset(local_uri).optimize.compact_files(target_rows_per_fragment=15)
    remote_metrics = compact_files(remote, connect_uri, target_rows_per_fragment=15)
    assert remote_metrics.fragments_added > 0
    assert dataclasses.astuple(remote_metrics) == dataclasses.astuple(local)
    assert lance.dataset(connect_uri).to_table().equals(lance.dataset(local_uri).to_table())
    latest = lance.dataset(connect_uri).version
    stats = cleanup_old_versions(remote, connect_uri, older_than=dt.timedelta(0), batch_size=1)
    assert stats.old_versions == latest - 1 and stats.data_files_removed > 0
    assert [v["version"] for v in lance.dataset(connect_uri).versions()] == [latest]
    assert lance.dataset(connect_uri).to_table().equals(lance.dataset(local_uri).to_table())
    # the SQL table functions are registered over Connect too
    rows = remote.sql(f"SELECT version, total_rows FROM lance_versions('{connect_uri}')").collect()
    assert [(r.version, r.total_rows) for r in rows] == [(latest, lance.dataset(connect_uri).count_rows())]
