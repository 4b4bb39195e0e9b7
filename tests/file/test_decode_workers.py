"""Decode worker threads: sized by the CPUs the process may use, the caller taking its share.

A scan decodes columns on a few shared threads. A process pinned to one CPU decodes on its own
thread only, and returns the same rows; a waiting thread runs a read-ahead no worker started;
errors surface in task order; a forked child (a Spark Python worker) gets pools of its own.
Every scan is compared with pylance 14.0.2 on the same dataset.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator
from functools import partial

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file import workers

ROWS = 40_000
needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity API")


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    words = np.array([f"w{i:03d}_" + "y" * (i % 11) for i in range(200)])
    return pa.table({
        "id": pa.array(np.arange(ROWS, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(ROWS)),
        "category": pa.array(words[rng.integers(0, 20, ROWS)]),
        "text": pa.array([" ".join(t) for t in words[rng.integers(0, 200, (ROWS, 3))]]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 4, dtype=np.float32)), 4),
    })


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    uri = str(tmp_path_factory.mktemp("workers") / f"ds-{request.param}.lance")
    table = _table()
    lance.write_dataset(table, uri, data_storage_version=request.param, max_rows_per_file=25_000)
    return uri, table


@pytest.fixture
def one_cpu() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def test_thread_count_follows_the_cpus_the_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANCE_FORMAT_NUM_THREADS", raising=False)
    assert workers.num_threads() == min(workers.MAX_THREADS, workers.available_cpus())
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "3")
    assert workers.num_threads() == 3


@needs_affinity
def test_a_process_pinned_to_one_cpu_decodes_on_its_own_thread(
    one_cpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANCE_FORMAT_NUM_THREADS", raising=False)
    assert workers.available_cpus() == 1 and workers.num_threads() == 1
    caller = threading.get_ident()
    assert workers.run_all([threading.get_ident, threading.get_ident]) == [caller, caller]


@needs_affinity
@pytest.mark.parametrize("columns", [None, ["x", "category"]])
def test_a_scan_pinned_to_one_cpu_returns_pylances_rows(
    dataset: tuple[str, pa.Table], columns: list[str] | None, one_cpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LANCE_FORMAT_NUM_THREADS", raising=False)
    uri, table = dataset
    ours = lance_format.dataset(uri).to_table(columns=columns)
    assert ours.equals(lance.dataset(uri).to_table(columns=columns))
    assert ours.equals(table.select(columns) if columns else table)


@pytest.mark.parametrize("threads", ["1", "2", "4"])
def test_a_scan_returns_pylances_rows_whatever_the_thread_count(
    dataset: tuple[str, pa.Table], threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", threads)
    uri, _table = dataset
    for columns in (None, ["text", "id"]):
        batches = list(lance_format.dataset(uri).to_batches(columns=columns, batch_size=7_000))
        assert pa.Table.from_batches(batches).equals(lance.dataset(uri).to_table(columns=columns))


def test_results_come_back_in_task_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    assert workers.run_all([partial(pow, i, 2) for i in range(9)]) == [i * i for i in range(9)]


def test_the_first_failing_task_in_order_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")

    def fail(msg: str) -> int:
        raise ValueError(msg)

    tasks = [lambda: 1, lambda: fail("second"), lambda: 3, lambda: fail("fourth")]
    with pytest.raises(ValueError, match="second"):
        workers.run_all(tasks)


def test_a_not_started_future_is_run_by_the_caller() -> None:
    ex = workers.pool("test-ahead")
    release = threading.Event()
    held = [ex.submit(release.wait) for _ in range(ex._max_workers)]
    try:
        queued = ex.submit(lambda: "worker")
        assert workers.result_or_run(queued, lambda: "caller") == "caller"
    finally:
        release.set()
        for f in held:
            f.result()


def _child_scan(uri: str, out: multiprocessing.SimpleQueue[int]) -> None:
    out.put(lance_format.dataset(uri).to_table().num_rows)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_scans_with_pools_of_its_own(
    dataset: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    uri, table = dataset
    assert lance_format.dataset(uri).to_table().num_rows == ROWS  # the parent's pools exist now
    ctx = multiprocessing.get_context("fork")
    out = ctx.SimpleQueue()
    proc = ctx.Process(target=_child_scan, args=(uri, out))
    proc.start()
    proc.join(120)
    if proc.is_alive():  # a child waiting on the parent's dead worker threads would hang here
        proc.kill()
        pytest.fail("the forked child's scan did not finish")
    assert proc.exitcode == 0 and out.get() == table.num_rows

