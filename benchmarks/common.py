"""Helpers shared by the benchmarks: child-process measurements and result tables.

Every measurement runs in a fresh Python process so each engine's peak memory
(``ru_maxrss`` of that process) and timing are independent of the others.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


def compile_bytecode() -> None:
    """Write current bytecode for ``lance_format`` before timing fresh processes.

    ``pip install`` compiles a package's modules, so a user's first query never compiles ours
    (pylance's Python modules are compiled in site-packages). A working tree run with
    ``PYTHONDONTWRITEBYTECODE`` keeps stale caches of every edited module instead, and each fresh
    child would compile them again (~0.2 s of CPU measured on ten edited modules): a cost no
    installed copy has. ``compileall`` writes the caches Python writes anyway without that
    setting (``__pycache__``, ignored by git, checked against each source's mtime).
    """
    import compileall

    compileall.compile_dir(str(REPO_ROOT / "lance_format"), quiet=1)


def peak_rss_mib() -> float:
    """Peak resident set size of the current process in MiB (Linux reports KiB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform != "darwin" else rss / (1024 * 1024)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Return ``(seconds, result)`` of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def emit(result: dict[str, Any]) -> None:
    """Print a child's result as the last stdout line, with its peak memory."""
    result = dict(result, peak_mib=round(peak_rss_mib(), 1))
    print(json.dumps(result), flush=True)


def run_child(module: str, args: Sequence[str], timeout: float = 3600) -> dict[str, Any]:
    """Run ``python -m module args...`` and parse the JSON object on its last stdout line."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env=env,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit code {proc.returncode}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def fmt_seconds(value: float | None) -> str:
    """Seconds with sensible precision, or ``-``."""
    if value is None:
        return "-"
    return f"{value:.3f}s" if value < 10 else f"{value:.1f}s"


def fmt_ratio(ours: float | None, theirs: float | None) -> str:
    """``ours / theirs`` as ``1.23x``, or ``-``."""
    if ours is None or not theirs:
        return "-"
    return f"{ours / theirs:.2f}x"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print a plain fixed-width table."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system, reaped children included) of ``root``'s process tree."""
    root = os.getpid() if root is None else root
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
    total = 0.0
    for pid, cpu in times.items():
        p = pid
        while p and p != root:
            p = parents.get(p, 0)
        if p == root:
            total += cpu
    return total
