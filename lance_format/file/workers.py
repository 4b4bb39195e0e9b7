"""Decode worker threads shared by the 2.0 and 2.1 decoders: how many, and running tasks on them.

numpy and pyarrow release the GIL in their heavy loops, so columns (and large FSST pages) of one
read decode in parallel on a few threads. Two rules keep that from backfiring on a busy machine:

* the thread count follows the CPUs this process may run on (``os.sched_getaffinity``: a task
  pinned to one CPU, a container's cpuset), not the machine's count, so a process limited to
  one CPU decodes on its calling thread only;
* a thread that waits for a read-ahead no worker has started yet runs it itself
  (:func:`result_or_run`): under load a woken worker may wait a scheduler slice or more.

The pools are created once per process (per name) and reused by every read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

#: Decode threads never exceed this (more only contend for the GIL).
MAX_THREADS = 4
_POOLS: dict[str, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    # a forked child (a Spark Python worker, multiprocessing) has none of the parent's worker
    # threads: its pools start afresh
    global _POOL_LOCK
    _POOLS.clear()
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def num_threads() -> int:
    """Decode threads: ``LANCE_FORMAT_NUM_THREADS``, else min(4, available CPUs); 1 = no threads."""
    raw = os.environ.get("LANCE_FORMAT_NUM_THREADS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return min(MAX_THREADS, available_cpus())


def pool(name: str = "columns") -> ThreadPoolExecutor:
    """The process's shared pool called ``name`` (created on first use, ``num_threads()`` workers).

    Separate pools per nesting level (columns, their FSST pieces, 2.1 read-ahead) keep a task
    that waits on sub-tasks from occupying the workers those sub-tasks need.
    """
    with _POOL_LOCK:
        ex = _POOLS.get(name)
        if ex is None:
            ex = ThreadPoolExecutor(max_workers=num_threads(), thread_name_prefix=f"lance-{name}")
            _POOLS[name] = ex
        return ex


def result_or_run(future: Future[T], fn: Callable[[], T]) -> T:
    """``future``'s result; when no worker has started it yet, ``fn()`` on this thread instead."""
    if future.cancel():
        return fn()
    return future.result()


def run_all(tasks: Sequence[Callable[[], T]], name: str = "columns") -> list[T]:
    """Results of ``tasks`` in order, run on ``pool(name)`` (inline with one thread or one task).

    Put the slowest task first: it starts first. The caller waits rather than running a task
    itself: a third busy thread on two CPUs cost more CPU in GIL hand-offs than it saved
    (bench_dataset, 2.2 scans). An error is raised as the first failing task's, in order.
    """
    if len(tasks) <= 1 or num_threads() <= 1:
        return [task() for task in tasks]
    ex = pool(name)
    futures = [ex.submit(task) for task in tasks]
    return [f.result() for f in futures]
