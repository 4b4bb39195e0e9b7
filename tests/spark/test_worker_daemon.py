"""Spark's Python workers fork from :mod:`lance_format.spark.daemon` with the ``lance`` source preloaded.

Uses the shared ``local[2]`` session (tests/spark/conftest.py), built by
:func:`lance_format.spark.local_session`, which names the daemon unless told otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format.spark.daemon import PRELOADED_ENV
from lance_format.spark.session import DAEMON_MODULE, DAEMON_MODULE_KEY, with_defaults

pytest.importorskip("pyspark")
lance = pytest.importorskip("lance")


def _probe(_rows: Iterator[Any]) -> Iterator[tuple[str | None, bool, bool, bool]]:
    # Runs in a Python worker: was it forked from our daemon, and what had it loaded by then?
    import sys

    yield (os.environ.get(PRELOADED_ENV), "lance_format.spark.reader" in sys.modules,
           "lance_format.spark.writer" in sys.modules, "pyarrow" in sys.modules)


def _children_of(pid: int) -> list[str]:
    """Command lines of the processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid:
            out.append(cmdline)
    return out


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.random(n)),
        "name": pa.array([f"name {i % 13}" for i in range(n)]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
    })


def test_local_session_names_the_preloading_daemon_unless_the_user_did(spark: Any) -> None:
    assert spark.sparkContext.getConf().get(DAEMON_MODULE_KEY) == DAEMON_MODULE
    assert with_defaults(None) == {DAEMON_MODULE_KEY: DAEMON_MODULE}
    assert with_defaults({DAEMON_MODULE_KEY: "pyspark.daemon"}) == {DAEMON_MODULE_KEY: "pyspark.daemon"}


def test_workers_fork_from_the_daemon_with_the_source_preloaded(spark: Any) -> None:
    seen = spark.sparkContext.parallelize(range(4), 2).mapPartitions(_probe).collect()
    assert seen and all(s == ("1", True, True, True) for s in seen), seen


def test_reads_and_writes_run_through_the_daemon(spark: Any, tmp_path: Path) -> None:
    table = _table(3000)
    src = str(tmp_path / "src.lance")
    lance.write_dataset(table, src, max_rows_per_file=1000)  # three fragments: three read tasks

    df = spark.read.format("lance").load(src)
    out = str(tmp_path / "out.lance")
    df.write.format("lance").mode("overwrite").save(out)
    back = lance.dataset(out).to_table().sort_by("id")
    assert back.equals(table.select(back.schema.names))

    filtered = spark.read.format("lance").option("filter", "x > 0.5").option("columns", "id,name").load(out)
    got = sorted(r.id for r in filtered.collect())
    want = sorted(lance.dataset(out).to_table(columns=["id"], filter="x > 0.5").column("id").to_pylist())
    assert got == want

    # The JVM runs the task workers (``pyspark.worker``: the data source's read and write tasks)
    # from our daemon. Its driver-side planner workers (``pyspark.sql.worker.*``: schema, read
    # planning, commit) always fork from ``pyspark.daemon``: PythonPlannerRunner (Spark 4.x)
    # does not read spark.python.daemon.module.
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    children = [c.split() for c in _children_of(jvm_pid)]
    daemons = {(c[c.index("-m") + 1], c[c.index("-m") + 2]) for c in children if "-m" in c and len(c) > c.index("-m") + 2}
    assert (DAEMON_MODULE, "pyspark.worker") in daemons, daemons
    assert ("pyspark.daemon", "pyspark.worker") not in daemons, daemons
    assert all(module == "pyspark.daemon" for module, worker in daemons if worker.startswith("pyspark.sql.worker."))
