"""Runners: how the execute step of a maintenance plan fans out.

Every maintenance operation is split into plan (driver) → execute (one call per task, anywhere)
→ commit (driver, once). The execute step is a module-level function applied to picklable
task values, so the same function runs on local threads or on Spark executors; only the
``Runner`` changes. ``lance_format.spark.SparkRunner`` is the Spark implementation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")


@runtime_checkable
class Runner(Protocol):
    """Applies one function to many picklable items and returns the results in order.

    Implementations must not commit anything: commits happen once, on the caller's side,
    after ``map`` returns. A failure of any item raises from ``map``.
    """

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Apply ``fn`` to every item; results are in the order of ``items``."""
        ...


class LocalRunner:
    """Runs tasks on a bounded pool of local threads (the embedded default).

    Args:
        num_threads: Worker threads; ``None`` means one per CPU core.
    """

    def __init__(self, num_threads: int | None = None) -> None:
        self.num_threads = max(1, num_threads or os.cpu_count() or 1)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Apply ``fn`` to every item on the thread pool (inline when there is one item)."""
        if len(items) <= 1 or self.num_threads == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.num_threads, len(items))) as pool:
            return list(pool.map(fn, items))

    def __repr__(self) -> str:
        return f"LocalRunner(num_threads={self.num_threads})"


class ProcessRunner:
    """Runs tasks in local worker processes: real parallelism for CPU-bound execute steps.

    Threads share one interpreter lock, so a compaction's decode/encode work does not
    scale with :class:`LocalRunner`; worker processes do, at the cost of starting them
    (each imports ``lance_format``). ``fn`` and the items must be picklable, as for Spark.

    Args:
        num_processes: Worker processes; ``None`` means one per CPU core.
        start_method: ``multiprocessing`` start method (``"spawn"`` is safe in programs
            that run threads, such as Dagster or Spark drivers).
    """

    def __init__(self, num_processes: int | None = None, *, start_method: str = "spawn") -> None:
        self.num_processes = max(1, num_processes or os.cpu_count() or 1)
        self.start_method = start_method

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Apply ``fn`` to every item in the process pool (inline when there is one item)."""
        if len(items) <= 1 or self.num_processes == 1:
            return [fn(item) for item in items]
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context(self.start_method)
        with ProcessPoolExecutor(max_workers=min(self.num_processes, len(items)), mp_context=ctx) as pool:
            return list(pool.map(fn, items))

    def __repr__(self) -> str:
        return f"ProcessRunner(num_processes={self.num_processes})"
