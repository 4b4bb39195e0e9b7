"""One BLAS thread while HNSW graph tasks run: the runner's workers are the parallelism.

A graph task is thousands of mid-sized matrix products (a partition's distance blocks, each
row's candidate matrices). OpenBLAS, as numpy ships it, splits every product over all cores
and its threads spin between products; beside the runner's own workers (local threads,
processes or Spark executors) that oversubscribes the cores: a 100k-row IVF_HNSW_SQ build's
graphs took 20 s of CPU with two BLAS threads and 8 s with one, on a loaded 2-core machine.
One thread also fixes the products' rounding to one kernel path, so a graph no longer
depends on how many cores the machine that built it had.

The thread count is process-wide in OpenBLAS: :func:`one_blas_thread` lowers it while any
graph task of the process runs and restores it when the last one ends. Without an OpenBLAS
found in the process (another BLAS, another platform) it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import sys
import threading
from collections.abc import Callable, Iterator

#: (set, get) symbol names: numpy's scipy-openblas (64-bit integers), then plain OpenBLAS builds.
_SYMBOLS = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
            ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
            ("openblas_set_num_threads", "openblas_get_num_threads"))

_LOCK = threading.Lock()
_state = {"users": 0, "saved": 0}


@functools.cache
def _openblas() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """The loaded OpenBLAS's thread-count setter and getter, or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already loaded by numpy: the same handle
        except OSError:
            continue
        for set_name, get_name in _SYMBOLS:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with OpenBLAS on one thread (restored when the process's last such block ends)."""
    api = _openblas()
    if api is None:
        yield
        return
    setter, getter = api
    with _LOCK:
        if _state["users"] == 0:
            _state["saved"] = int(getter())
            setter(1)
        _state["users"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["users"] -= 1
            if _state["users"] == 0 and _state["saved"] > 1:
                setter(_state["saved"])
