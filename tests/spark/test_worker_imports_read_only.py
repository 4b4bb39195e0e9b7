"""A Spark task loads only what it runs: read tasks and read planning no write side, write tasks no maintenance.

Spark ships a read task to a Python worker as a pickled function holding the data source's reader
plus one pickled input partition (``pyspark.sql.worker.plan_data_source_read``); the planner
workers unpickle the data source itself for ``schema()`` / ``reader()`` / ``partitions()``. Every
cold worker pays for the modules that unpickling and the task import (issue 28 items 1 and 7), so
each check here runs in a new interpreter, the way a fresh worker starts.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.test_lazy_import_paths import WRITE_SIDE

from .helpers import pickled_read_task, spark_table

lance = pytest.importorskip("lance")
cloudpickle = pytest.importorskip("pyspark.cloudpickle")

REPO = Path(__file__).resolve().parents[2]

#: What no write task has a use for: maintenance, index builds, searches, the facade's dataset module.
NOT_FOR_A_WRITE = ("lance_format.maintenance", "lance_format.optimize", "lance_format.cleanup",
                   "lance_format.index.build", "lance_format.index.vector", "lance_format.search",
                   "lance_format.dataset", "lance_format.table.commit", "lance_format.table.conflicts",
                   "lance_format.table.rebase")

_LOADED = ("def loaded(prefixes):\n"
           "    return sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in prefixes))\n")


def _fresh(pickled: Path, code: str) -> Any:
    """Unpickle ``pickled`` as ``task`` in a new interpreter, run ``code``; it leaves JSON in ``out``."""
    script = (f"import json, pickle, sys\n{_LOADED}"
              f"task = pickle.loads(open({str(pickled)!r}, 'rb').read())\n{code}\nprint(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _table(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": np.random.default_rng(start).random(n),
                     "s": pa.array([f"v{i % 97}" for i in ids.tolist()])})


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A pylance 2.1 dataset of 4 fragments with deleted rows (the reader applies deletion vectors)."""
    path = str(tmp_path_factory.mktemp("worker") / "t.lance")
    lance.write_dataset(_table(4000), path, max_rows_per_file=1000, data_storage_version="2.1")
    lance.dataset(path).delete("id % 7 = 3")
    return path


def test_a_worker_reading_its_partitions_loads_no_write_side_module_and_returns_pylances_rows(
        uri: str, tmp_path: Path) -> None:
    from lance_format.spark.source import LanceDataSource

    pickled = pickled_read_task(LanceDataSource({"path": uri, "max_rows_per_partition": "700"}), tmp_path / "read_task.pkl")
    code = ("read, partitions = task\n"
            "import pyarrow as pa\n"
            "t = pa.Table.from_batches([b for p in partitions for b in read(p)]).sort_by('id')\n"
            f"out = {{'parts': len(partitions), 'id': t.column('id').to_pylist(), 's': t.column('s').to_pylist(),\n"
            f"       'x': t.column('x').to_pylist(), 'write_side': loaded({list(WRITE_SIDE)!r})}}\n")
    out = _fresh(pickled, code)
    theirs = lance.dataset(uri).to_table().sort_by("id")
    assert out["parts"] > 4  # 1000-row fragments cut at 700 rows: several tasks per fragment
    assert out["write_side"] == []
    assert {k: out[k] for k in ("id", "x", "s")} == {k: theirs.column(k).to_pylist() for k in ("id", "x", "s")}


def test_planning_a_read_in_a_fresh_planner_worker_loads_no_write_side_module(uri: str, tmp_path: Path) -> None:
    from lance_format.spark.source import LanceDataSource

    pickled = tmp_path / "source.pkl"
    pickled.write_bytes(cloudpickle.dumps(LanceDataSource({"path": uri, "columns": "id,s"})))
    code = ("schema = task.schema()\nreader = task.reader(schema)\n"
            f"out = {{'fields': schema.fieldNames(), 'parts': len(reader.partitions()),\n"
            f"       'write_side': loaded({list(WRITE_SIDE)!r})}}\n")
    assert _fresh(pickled, code) == {"fields": ["id", "s"], "parts": 4, "write_side": []}


def test_a_write_task_loads_no_maintenance_index_or_commit_module_and_the_driver_commits_its_files(
        tmp_path: Path) -> None:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from lance_format.spark.source import LanceDataSource

    target = str(tmp_path / "w.lance")
    schema = StructType([StructField("id", LongType()), StructField("x", DoubleType()),
                         StructField("s", StringType())])
    writer = LanceDataSource({"path": target}).writer(schema, False)
    rows = _table(3000, start=10)
    pickled = tmp_path / "write_task.pkl"
    pickled.write_bytes(cloudpickle.dumps((writer, rows.to_batches(max_chunksize=1000))))
    message = tmp_path / "message.pkl"
    code = ("w, batches = task\nmsg = w.write(iter(batches))\n"
            f"open({str(message)!r}, 'wb').write(pickle.dumps(msg))\n"
            f"out = {{'fragments': len(msg.fragments), 'heavy': loaded({list(NOT_FOR_A_WRITE)!r})}}\n")
    assert _fresh(pickled, code) == {"fragments": 1, "heavy": []}
    writer.commit([pickle.loads(message.read_bytes())])  # the driver's step (Spark carries the message back)
    theirs = lance.dataset(target).to_table().sort_by("id")
    assert theirs.equals(rows)


@pytest.mark.slow
def test_a_local_spark_session_still_reads_and_writes_back(spark: Any, uri: str, tmp_path: Path) -> None:
    out = str(tmp_path / "copy.lance")
    df = spark.read.format("lance").load(uri)
    df.write.format("lance").mode("overwrite").save(out)
    theirs = lance.dataset(uri).to_table().sort_by("id")
    assert spark_table(spark.read.format("lance").load(out)).equals(theirs)
    assert lance.dataset(out).to_table().sort_by("id").equals(theirs)
