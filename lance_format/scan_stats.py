"""Scan statistics as pylance reports them: ``ScanStatistics`` for ``scan_stats_callback`` and the
text of ``LanceScanner.analyze_plan``.

The I/O figures come from :mod:`lance_format.io_stats` (requests and bytes read under the
dataset's URI while the scan ran, so a concurrent scan of the same dataset in another thread adds
to them). ``all_counts`` / ``all_times`` have our own keys (pylance documents theirs as
debugging values subject to change): fragments in the scan, rows it returned, and its wall time.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from lance_format.io_stats import totals

__all__ = ["ScanStatistics", "ScanTimer", "attach_callback", "format_analysis"]

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ScanStatistics:
    """What one scan cost (pylance's attribute names and repr).

    Attributes:
        iops: Read requests.
        requests: Read requests (pylance counts coalesced requests here; ours are the same).
        bytes_read: Bytes read from data and deletion files.
        indices_loaded: Scalar or vector indices the scan opened.
        parts_loaded: Index parts loaded (0: ours opens index files whole).
        index_comparisons: Index entries compared (not counted: 0).
        index_cache_hits: Index cache lookups answered from the cache (not counted: 0).
        index_cache_misses: Index cache lookups that loaded (not counted: 0).
        all_counts: ``fragments_scanned`` and ``output_rows``.
        all_times: ``elapsed`` wall time of the scan in nanoseconds.
    """

    iops: int = 0
    requests: int = 0
    bytes_read: int = 0
    indices_loaded: int = 0
    parts_loaded: int = 0
    index_comparisons: int = 0
    index_cache_hits: int = 0
    index_cache_misses: int = 0
    all_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    all_times: dict[str, int] = dataclasses.field(default_factory=dict)

    def __repr__(self) -> str:
        scalars = ", ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                            if f.name not in ("all_counts", "all_times"))
        counts = json.dumps(self.all_counts, separators=(", ", ": "))
        times = json.dumps(self.all_times, separators=(", ", ": "))
        return f"ScanStatistics({scalars}, all_counts={counts}, all_times={times})"


class ScanTimer:
    """Measures one scan: wall time and the I/O under ``prefix`` from construction to :meth:`stop`."""

    def __init__(self, prefix: str, fragments: int, indices: int = 0) -> None:
        self._prefix = prefix
        self._fragments = fragments
        self._indices = indices
        self._start = time.perf_counter_ns()
        self._io = totals(prefix)
        self.rows = 0

    def stop(self) -> ScanStatistics:
        """The statistics of the scan so far."""
        now = totals(self._prefix)
        reads, nbytes = now[0] - self._io[0], now[1] - self._io[1]
        return ScanStatistics(
            iops=reads, requests=reads, bytes_read=nbytes, indices_loaded=self._indices,
            all_counts={"fragments_scanned": self._fragments, "output_rows": self.rows},
            all_times={"elapsed": time.perf_counter_ns() - self._start})


def _report(callback: Callable[[ScanStatistics], Any], stats: ScanStatistics) -> None:
    try:
        callback(stats)
    except Exception:  # noqa: BLE001 - pylance logs a failing callback and keeps the result
        _log.exception("scan_stats_callback raised; the scan's result is kept")


def attach_callback(scanner: Any, prefix: str, fragments: int, callback: Callable[[ScanStatistics], Any]) -> None:
    """Make ``scanner`` call ``callback`` with its statistics once each read finishes.

    The scanner's reading methods are wrapped on the instance (any scanner kind: plain, projected,
    vector or full-text); a read that runs another one inside (``to_table`` over ``to_batches``)
    reports once, for the outermost.
    """
    active = [False]

    def eager(name: str) -> None:
        inner = getattr(scanner, name, None)
        if inner is None:
            return

        def run(*args: Any, **kwargs: Any) -> Any:
            if active[0]:
                return inner(*args, **kwargs)
            timer = ScanTimer(prefix, fragments)
            active[0] = True
            try:
                result = inner(*args, **kwargs)
            finally:
                active[0] = False
            timer.rows = int(result) if isinstance(result, int) else int(getattr(result, "num_rows", 0))
            _report(callback, timer.stop())
            return result

        setattr(scanner, name, run)

    for method in ("to_table", "count_rows", "head"):
        eager(method)
    batches = scanner.to_batches

    def stream(*args: Any, **kwargs: Any) -> Iterator[Any]:
        if active[0]:
            yield from batches(*args, **kwargs)
            return
        timer = ScanTimer(prefix, fragments)
        active[0] = True
        try:
            for batch in batches(*args, **kwargs):
                timer.rows += batch.num_rows
                yield batch
        finally:
            active[0] = False
        _report(callback, timer.stop())

    scanner.to_batches = stream


def _duration(ns: int) -> str:
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.6g}s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.6g}ms"
    return f"{ns / 1e3:.6g}µs"


def format_analysis(plan: str, stats: ScanStatistics, count_rows: bool, counted: int) -> str:
    """``analyze_plan`` text: pylance's ``AnalyzeExec`` head, our plan lines, the measured metrics."""
    elapsed = _duration(stats.all_times.get("elapsed", 0))
    metrics = (f"metrics=[output_rows={stats.all_counts.get('output_rows', 0)}, "
               f"fragments_scanned={stats.all_counts.get('fragments_scanned', 0)}, "
               f"bytes_read={stats.bytes_read}, iops={stats.iops}, requests={stats.requests}]")
    lines = [f"AnalyzeExec verbose=true, elapsed={elapsed}, metrics=[]"]
    indent = "  "
    if count_rows:
        lines.append(f"{indent}AggregateExec: elapsed={elapsed}, mode=Single, gby=[], aggr=[count(Int32(1))], "
                     f"metrics=[output_rows=1, count={counted}]")
        indent += "  "
    body = [line for line in plan.splitlines() if line.strip()]
    for i, line in enumerate(body):
        lines.append(indent + line + (", " + metrics if i == 0 else ""))
    return "\n".join(lines) + "\n"
