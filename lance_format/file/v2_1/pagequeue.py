"""Encoding written pages on a small thread pool, results handed back in submission order.

Page encoding is mostly numpy, Arrow compute and compression calls, which release the GIL, so
columns encode side by side.  Results come back first in, first out: a column's pages (and the
file's buffers) land in the order they were cut, whatever the pool does, so the file's bytes do
not depend on scheduling.  At most ``max_in_flight`` pages are pending, which bounds the memory
held by finished-but-unwritten pages.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

K = TypeVar("K")
T = TypeVar("T")

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()
# A forked child (Spark's Python workers fork) inherits the pool object but not its threads: jobs
# submitted there would never run, so the child starts without one.
os.register_at_fork(after_in_child=_POOL.clear)


def encode_threads() -> int:
    """Encode threads: ``LANCE_FORMAT_NUM_THREADS``, else half the CPUs (1 to 4).

    Half, unlike the decoders' min(4, CPUs): two pages encoding at once hold two pages of input
    and scratch memory, and on a 2-CPU machine a second encoder measured no faster (1M-row
    benchmark table: 0.16-0.25 s either way) for about 45 MiB more peak RSS.
    """
    raw = os.environ.get("LANCE_FORMAT_NUM_THREADS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def _pool() -> ThreadPoolExecutor:
    # One process-wide pool: writers come and go (one per data file) but threads are reused.  The
    # writing thread encodes too (see PageQueue.put), so the pool has one thread fewer.
    with _POOL_LOCK:
        if not _POOL:
            workers = max(1, encode_threads() - 1)
            _POOL.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lance21-encode"))
        return _POOL[0]


class PageQueue(Generic[K, T]):
    """A FIFO of page-encoding jobs, run on the shared pool when there is more than one thread.

    The calling thread takes a job itself when ``threads - 1`` jobs are already queued: as fast
    as a pool of ``threads``, with one thread fewer holding freed memory in its own malloc arena
    (glibc keeps a per-thread arena's freed pages, which shows up as resident memory).

    Args:
        threads: Threads encoding at once, the caller included; 1 runs every job inline.
        max_in_flight: Jobs allowed to be pending before :meth:`put` hands back the oldest.
    """

    def __init__(self, *, threads: int | None = None, max_in_flight: int | None = None) -> None:
        self.threads = threads if threads is not None else encode_threads()
        self.max_in_flight = max_in_flight if max_in_flight is not None else self.threads
        self._jobs: deque[tuple[K, Future[T]]] = deque()

    def put(self, key: K, job: Callable[[], T]) -> list[tuple[K, T]]:
        """Queue ``job``; returns the finished ``(key, result)`` pairs that must be written now.

        Raises:
            Exception: whatever a finished job raised (the remaining jobs are waited for first).
        """
        if self.threads <= 1:
            return [(key, job())]
        if sum(1 for _, f in self._jobs if not f.done()) >= self.threads - 1:  # the pool is busy
            fut: Future[T] = Future()
            try:
                fut.set_result(job())
            except Exception as exc:  # reported in order, when this job's turn comes
                fut.set_exception(exc)
            self._jobs.append((key, fut))
        else:
            self._jobs.append((key, _pool().submit(job)))
        out: list[tuple[K, T]] = []
        while len(self._jobs) > self.max_in_flight or (self._jobs and self._jobs[0][1].done()):
            out.append(self._pop())
        return out

    def drain(self) -> list[tuple[K, T]]:
        """Wait for every queued job; returns their ``(key, result)`` pairs in submission order."""
        out: list[tuple[K, T]] = []
        while self._jobs:
            out.append(self._pop())
        return out

    def cancel(self) -> None:
        """Drop the queued jobs (after an error or an abort), waiting for those already running."""
        jobs, self._jobs = self._jobs, deque()
        for _, fut in jobs:
            if not fut.cancel():
                fut.exception()  # wait; the error (if any) was or will be reported elsewhere

    def _pop(self) -> tuple[K, T]:
        key, fut = self._jobs.popleft()
        try:
            return key, fut.result()
        except BaseException:
            self.cancel()
            raise
