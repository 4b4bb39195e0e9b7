"""Table-core benchmarks: lance_format side by side with pylance (and Parquet for reference).

Run from the repository root::

    python -m benchmarks.bench_table                 # 200 appends of 1,000 rows
    python -m benchmarks.bench_table --appends 20    # quick look

Measured per engine, in one run and on the same data:

* commit latency (median and p95) of ``--appends`` appends of ``--rows`` rows each
  (the engines alternate append by append, so machine load hits both alike);
* open-latest and ``versions()`` on the resulting dataset (``--appends`` + 1 versions),
  each in a fresh Python process so no cache survives (median of ``--fresh-runs``);
* ``delete`` of 10% of the rows, then a full scan with the deletions applied.

Target (issue): commit median and open-latest no slower than pylance.  The lance_format
column reads "n/a" until ``lance_format.write_dataset`` is importable; a metric that
fails for one engine shows "err" and the error is listed under the table.
Parquet appends are plain new files in a directory (``pyarrow.dataset``), so it has no
commit protocol, versions or deletes; its delete row is a filtered scan instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from benchmarks.common import REPO_ROOT, timed

DELETE_PREDICATE = "id % 10 = 0"

# Timed in a fresh interpreter: argv = [module, uri]; prints one JSON object.
_FRESH_LANCE = """
import json, sys, time
t0 = time.perf_counter()
mod = __import__(sys.argv[1])
t1 = time.perf_counter()
ds = mod.dataset(sys.argv[2])
t2 = time.perf_counter()
versions = ds.versions()
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "versions": t3 - t2,
                  "n_versions": len(versions), "version": ds.version}))
"""
_FRESH_PARQUET = """
import json, sys, time
t0 = time.perf_counter()
import pyarrow.dataset as pads
t1 = time.perf_counter()
ds = pads.dataset(sys.argv[2], format="parquet")
n = len(ds.files)
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "open": t2 - t1, "versions": None, "n_versions": n, "version": None}))
"""


@dataclass
class Result:
    """Metric name -> seconds (or None when the engine has no such operation)."""

    values: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def make_batch(index: int, rows: int) -> pa.Table:
    """Append ``index``: ids continue across appends; a float and a short string column."""
    ids = pa.array(np.arange(index * rows, (index + 1) * rows, dtype=np.int64))
    rng = np.random.default_rng(index)
    return pa.table({
        "id": ids,
        "x": pa.array(rng.random(rows)),
        "s": pc.binary_join_element_wise("row-", pc.cast(ids, pa.string()), ""),
    })


def _fresh_once(script: str, module: str, uri: str) -> dict[str, Any]:
    """Run ``script`` once in a new interpreter and return its JSON timings."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script, module, uri], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _medians(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-key medians of fresh-process timings (other keys from the last sample)."""
    out: dict[str, Any] = dict(samples[-1])
    for key in ("import", "open", "versions"):
        if samples[0][key] is not None:
            out[key] = statistics.median(s[key] for s in samples)
    return out


def _fresh_process(script: str, module: str, uri: str, runs: int) -> dict[str, Any]:
    """Run ``script`` ``runs`` times in new interpreters; per-key medians of the timings."""
    return _medians([_fresh_once(script, module, uri) for _ in range(runs)])


def _guard(result: Result, metrics: tuple[str, ...], fn: Callable[[], Any]) -> Any:
    """Run one measurement; a failure marks just the metrics it feeds."""
    try:
        return fn()
    except Exception as err:  # a benchmark must report, not crash, on a half-built engine
        for metric in metrics:
            result.values[metric] = None
            result.errors[metric] = f"{type(err).__name__}: {str(err)[:200]}"
        return None


@dataclass
class Engine:
    """One pylance-compatible module under test and its dataset."""

    module: Any
    name: str
    uri: str
    res: Result = field(default_factory=Result)
    commit_lat: list[float] = field(default_factory=list)
    fresh: list[dict[str, Any]] = field(default_factory=list)
    scans: list[float] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)

    def run(self, phase: str, metrics: tuple[str, ...], fn: Callable[[], Any]) -> Any:
        """Run one step of ``phase`` unless the phase already failed for this engine."""
        if phase in self.broken:
            return None
        out = _guard(self.res, metrics, fn)
        if any(m in self.res.errors for m in metrics):
            self.broken.add(phase)
        return out


def bench_lance_engines(engines: list[Engine], args: argparse.Namespace) -> None:
    """Commit, fresh-open, versions, delete and scan for each engine.

    The engines take turns step by step (one append each, alternating who goes
    first), so a shared machine's changing load affects both sides alike.
    """
    kwargs = {"data_storage_version": args.file_version} if args.file_version else {}
    commit_m = ("commit median", "commit p95")
    fresh_m = ("open latest (fresh)", "versions() (fresh)", "import (fresh)")
    for e in engines:
        ds = e.run("create", commit_m + fresh_m + ("delete 10%", "full scan after delete"),
                   lambda e=e: e.module.write_dataset(make_batch(0, args.rows), e.uri, mode="create", **kwargs))
        if ds is not None:
            e.res.notes.append(f"data_storage_version={getattr(ds, 'data_storage_version', '?')} "
                               "(pass --file-version to compare like with like)")
    live = [e for e in engines if "create" not in e.broken]

    def turns(step: int) -> list[Engine]:
        return live if step % 2 else live[::-1]

    for i in range(1, args.appends + 1):
        batch = make_batch(i, args.rows)
        for e in turns(i):
            def append(e: Engine = e, batch: pa.Table = batch) -> None:
                start = time.perf_counter()
                e.module.write_dataset(batch, e.uri, mode="append")
                e.commit_lat.append(time.perf_counter() - start)
            e.run("commit", commit_m, append)
    for e in live:
        if "commit" not in e.broken and e.commit_lat:
            e.res.values["commit median"] = float(np.median(e.commit_lat))
            e.res.values["commit p95"] = float(np.percentile(e.commit_lat, 95))

    for r in range(args.fresh_runs):
        for e in turns(r):
            e.run("fresh", fresh_m, lambda e=e: e.fresh.append(_fresh_once(_FRESH_LANCE, e.name, e.uri)))
    for e in live:
        if "fresh" not in e.broken and e.fresh:
            got = _medians(e.fresh)
            e.res.values["open latest (fresh)"] = got["open"]
            e.res.values["versions() (fresh)"] = got["versions"]
            e.res.values["import (fresh)"] = got["import"]
            e.res.notes.append(f"{got['n_versions']} versions, latest v{got['version']}")

    for e in live:
        def delete(e: Engine = e) -> None:
            handle = e.module.dataset(e.uri)
            e.res.values["delete 10%"], _ = timed(lambda: handle.delete(DELETE_PREDICATE))
        e.run("delete", ("delete 10%",), delete)

    total = (args.appends + 1) * args.rows
    expected = total - (total + 9) // 10
    for r in range(args.scan_repeats):
        for e in turns(r):
            def scan(e: Engine = e, first: bool = r == 0) -> None:
                seconds, table = timed(lambda: e.module.dataset(e.uri).to_table())
                e.scans.append(seconds)
                if table.num_rows != expected and first:
                    e.res.notes.append(f"scan returned {table.num_rows} rows, expected {expected}")
            e.run("scan", ("full scan after delete",), scan)
    for e in live:
        if "scan" not in e.broken and e.scans:
            e.res.values["full scan after delete"] = statistics.median(e.scans)


def bench_lance(module: Any, module_name: str, root: Path, args: argparse.Namespace) -> Result:
    """All metrics for one pylance-compatible module on its own (see :func:`bench_lance_engines`)."""
    engine = Engine(module, module_name, str(root / f"{module_name}.lance"))
    bench_lance_engines([engine], args)
    return engine.res


def bench_parquet(root: Path, args: argparse.Namespace) -> Result:
    """Parquet reference: each append is a new file; open lists files; delete is a filtered scan."""
    res = Result()
    path = root / "parquet"
    lat = []
    for i in range(args.appends + 1):
        batch = make_batch(i, args.rows)
        start = time.perf_counter()
        pads.write_dataset(batch, path, format="parquet", basename_template=f"part-{i:05d}-{{i}}.parquet",
                           existing_data_behavior="overwrite_or_ignore")
        if i:
            lat.append(time.perf_counter() - start)
    res.values["commit median"] = float(np.median(lat))
    res.values["commit p95"] = float(np.percentile(lat, 95))
    got = _guard(res, ("open latest (fresh)", "import (fresh)"),
                 lambda: _fresh_process(_FRESH_PARQUET, "pyarrow", str(path), args.fresh_runs))
    if got is not None:
        res.values["open latest (fresh)"] = got["open"]
        res.values["import (fresh)"] = got["import"]
        res.values["versions() (fresh)"] = None
    res.values["delete 10%"] = None
    keep = pc.not_equal(pc.remainder(pc.field("id"), 10), 0)
    times = [timed(lambda: pads.dataset(path, format="parquet").to_table(filter=keep))[0]
             for _ in range(args.scan_repeats)]
    res.values["full scan after delete"] = statistics.median(times)
    res.notes.append("scan = filtered scan (id % 10 != 0); no delete/versions in plain Parquet")
    return res


METRICS = ["commit median", "commit p95", "open latest (fresh)", "versions() (fresh)", "import (fresh)",
           "delete 10%", "full scan after delete"]


def _cell(res: Result | None, metric: str) -> str:
    if res is None:
        return "n/a"
    if metric in res.errors:
        return "err"
    value = res.values.get(metric)
    return "-" if value is None else f"{value * 1000:.2f}"


def render(pylance: Result, ours: Result | None, parquet: Result | None) -> str:
    """The side-by-side table (milliseconds) with ours/pylance ratios and the target verdicts."""
    head = f"{'metric (ms)':<26}{'pylance':>12}{'lance_format':>14}{'ours/pylance':>14}{'parquet':>12}"
    lines = [head, "-" * len(head)]
    for metric in METRICS:
        theirs = pylance.values.get(metric)
        mine = None if ours is None or metric in ours.errors else ours.values.get(metric)
        ratio = f"{mine / theirs:.2f}x" if mine is not None and theirs else "n/a"
        lines.append(f"{metric:<26}{_cell(pylance, metric):>12}{_cell(ours, metric):>14}{ratio:>14}"
                     f"{_cell(parquet, metric):>12}")
    lines.append("")
    for metric in ("commit median", "open latest (fresh)"):
        theirs = pylance.values.get(metric)
        mine = None if ours is None else ours.values.get(metric)
        verdict = "n/a" if mine is None or theirs is None else ("PASS" if mine <= theirs else "FAIL")
        lines.append(f"target: {metric} no slower than pylance: {verdict}")
    for name, res in (("pylance", pylance), ("lance_format", ours), ("parquet", parquet)):
        if res is None:
            continue
        for note in res.notes:
            lines.append(f"note [{name}]: {note}")
        for metric, err in res.errors.items():
            lines.append(f"error [{name}] {metric}: {err}")
    return "\n".join(lines)


def _load_ours() -> tuple[Any, str | None]:
    try:
        import lance_format

        lance_format.write_dataset  # noqa: B018 - the table layer may not exist yet
        lance_format.dataset  # noqa: B018
        return lance_format, None
    except Exception as err:  # ImportError or AttributeError while the table layer is built
        return None, f"{type(err).__name__}: {err}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print the table; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=200, help="appends after the initial write")
    parser.add_argument("--rows", type=int, default=1000, help="rows per append")
    parser.add_argument("--fresh-runs", type=int, default=5, help="fresh processes per open measurement")
    parser.add_argument("--scan-repeats", type=int, default=3, help="full scans (median)")
    parser.add_argument("--file-version", default=None, help="data_storage_version for both Lance engines")
    parser.add_argument("--no-parquet", action="store_true", help="skip the Parquet reference column")
    parser.add_argument("--workdir", default=None, help="keep datasets here instead of a temp dir")
    args = parser.parse_args(argv)

    import lance  # pylance: the reference implementation

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench_table_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        print(f"{args.appends} appends x {args.rows} rows; fresh-process runs={args.fresh_runs}; dir={root}",
              flush=True)
        theirs = Engine(lance, "lance", str(root / "lance.lance"))
        ours_mod, why = _load_ours()
        mine = Engine(ours_mod, "lance_format", str(root / "lance_format.lance")) if ours_mod is not None else None
        bench_lance_engines([theirs] + ([mine] if mine is not None else []), args)
        pylance = theirs.res
        ours = mine.res if mine is not None else None
        parquet = None if args.no_parquet else bench_parquet(root, args)
        print(render(pylance, ours, parquet))
        if why:
            print(f"lance_format: n/a ({why})")
    finally:
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
