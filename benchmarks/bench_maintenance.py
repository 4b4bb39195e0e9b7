"""Maintenance benchmarks: compaction and version cleanup, lance_format side by side with pylance.

Run from the repository root::

    python -m benchmarks.bench_maintenance                     # 10M rows in 1,000 fragments, 200 versions
    python -m benchmarks.bench_maintenance --rows 1000000      # smaller, for a shared machine

Measured per engine, in one run, on byte-identical copies of the same datasets (built
once by pylance, then copied), each engine in its own fresh Python process (so the
peak memory column is that engine's alone):

* ``compact``: ``compact_files()`` with default options on ``--rows`` rows (columns
  ``id`` int64, ``x`` float64, ``s`` short string) in ``--fragments`` fragments with
  10% of the rows deleted (``id % 10 = 0``);
* ``compact_proc``: the same compaction with ``runner=ProcessRunner()`` (tasks in worker
  processes; the default ``LocalRunner`` threads share one interpreter lock), against
  the same pylance figure (its memory column is the driver process only);
* ``cleanup``: ``cleanup_old_versions(older_than=0)`` on a dataset of ``--versions``
  versions (appends, deletes and an overwrite every 50 versions), removing all but
  the latest.

Each child checks the result (rows after compaction; versions left after cleanup)
and prints it, so a fast wrong answer cannot pass. Target (issue): ratio ≤ 1.0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import emit, run_child, timed

MODULE = "benchmarks.bench_maintenance"


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": ids.astype(np.float64) * 0.5,
                     "s": pa.array([f"s{i % 1000}" for i in range(start, start + n)])})


def build_compaction_input(uri: str, rows: int, fragments: int) -> None:
    """``rows`` rows in ``fragments`` fragments, 10% deleted (written by pylance)."""
    import lance

    per = max(1, rows // fragments)

    def batches() -> Any:
        for start in range(0, rows, per):
            yield from _table(start, min(per, rows - start)).to_batches()

    schema = _table(0, 1).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), uri, max_rows_per_file=per,
                        max_rows_per_group=per)
    lance.dataset(uri).delete("id % 10 = 0")


def build_cleanup_input(uri: str, versions: int, storage_options: dict[str, str] | None = None) -> None:
    """A dataset of ``versions`` versions: appends, a delete every 10, an overwrite every 50."""
    import lance

    opts = {"storage_options": storage_options} if storage_options else {}
    lance.write_dataset(_table(0, 100), uri, **opts)
    for v in range(2, versions + 1):
        if v % 50 == 0:
            lance.write_dataset(_table(v * 100, 100), uri, mode="overwrite", **opts)
        elif v % 10 == 0:
            lance.dataset(uri, **opts).delete(f"id = {(v - 1) * 100}")
        else:
            lance.write_dataset(_table(v * 100, 100), uri, mode="append", **opts)


def build_cleanup_files_input(uri: str, files: int) -> None:
    """Version 1 holds ``files`` one-row data files; version 2 replaces them (cleanup removes them all)."""
    import lance

    lance.write_dataset(pa.table({"id": np.arange(files, dtype=np.int64)}), uri, max_rows_per_file=1)
    lance.write_dataset(pa.table({"id": np.zeros(1, dtype=np.int64)}), uri, mode="overwrite")


def child(op: str, engine: str, uri: str) -> None:
    """Run one measured operation in this (fresh) process and emit its figures."""
    if engine == "ours":
        import lance_format as mod
    else:
        import lance as mod  # type: ignore[no-redef]
    ds = mod.dataset(uri)
    if op in ("compact", "compact_proc"):
        kwargs: dict[str, Any] = {}
        if op == "compact_proc":
            from lance_format.maintenance import ProcessRunner

            kwargs["runner"] = ProcessRunner()
        seconds, metrics = timed(lambda: ds.optimize.compact_files(**kwargs))
        after = mod.dataset(uri)
        check = {"rows": after.count_rows(), "fragments": len(after.get_fragments()),
                 "fragments_removed": metrics.fragments_removed}
    else:
        # Ours keeps versions superseded within its commit grace (commits in flight); the
        # benchmark compares the removal pylance does, so the grace is 0 here.
        extra = {"commit_grace": dt.timedelta(0)} if engine == "ours" else {}
        seconds, stats = timed(lambda: ds.cleanup_old_versions(older_than=dt.timedelta(0), **extra))
        check = {"old_versions": stats.old_versions, "bytes_removed": stats.bytes_removed,
                 "versions_left": len(mod.dataset(uri).versions())}
    emit({"seconds": seconds, **check})


def _row(name: str, results: dict[str, dict[str, Any]]) -> str:
    ours, theirs = results["ours"], results["pylance"]
    if "error" in ours or "error" in theirs:
        return f"{name:<12} ours: {ours.get('error', ours.get('seconds'))}  pylance: {theirs.get('error', theirs.get('seconds'))}"
    ratio = ours["seconds"] / theirs["seconds"] if theirs["seconds"] else float("inf")
    return (f"{name:<12} {ours['seconds']:>9.2f}s {theirs['seconds']:>9.2f}s {ratio:>7.2f}x "
            f"{ours['peak_mib']:>9.0f} {theirs['peak_mib']:>9.0f}")


def main(argv: list[str] | None = None) -> int:
    """Build the inputs once, copy them per engine, measure each engine in a child process."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--fragments", type=int, default=1_000)
    p.add_argument("--versions", type=int, default=200)
    p.add_argument("--files", type=int, default=10_000, help="data files the cleanup_files line removes")
    p.add_argument("--ops", default="compact,compact_proc,cleanup,cleanup_files", help="comma-separated lines to run")
    p.add_argument("--repeat", type=int, default=3, help="runs per engine of the cleanup lines (median shown)")
    p.add_argument("--child", nargs=3, metavar=("OP", "ENGINE", "URI"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    root = Path(tempfile.mkdtemp(prefix="bench_maint_"))
    try:
        ops = [o for o in args.ops.split(",") if o]
        print(f"building inputs in {root} ({args.rows:,} rows in {args.fragments:,} fragments, "
              f"{args.versions} versions, {args.files:,} files) ...", flush=True)
        if {"compact", "compact_proc"} & set(ops):
            build_compaction_input(str(root / "compact_src"), args.rows, args.fragments)
        if "cleanup" in ops:
            build_cleanup_input(str(root / "cleanup_src"), args.versions)
        if "cleanup_files" in ops:
            build_cleanup_files_input(str(root / "cleanup_files_src"), args.files)
        table: dict[str, dict[str, dict[str, Any]]] = {}
        runs = (("compact", "compact_src", ("ours", "pylance")),
                ("compact_proc", "compact_src", ("ours",)),
                ("cleanup", "cleanup_src", ("pylance", "ours")),
                ("cleanup_files", "cleanup_files_src", ("pylance", "ours")))
        for op, src, engines in runs:
            if op not in ops:
                continue
            table[op] = {}
            # cleanups are short: several interleaved runs per engine, the median kept
            repeat = args.repeat if op.startswith("cleanup") else 1
            results: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
            for i in range(repeat):
                # alternate which engine goes first so a warm page cache does not favour one
                for engine in engines if i % 2 == 0 else engines[::-1]:
                    uri = str(root / f"{op}_{engine}")
                    shutil.copytree(root / src, uri)  # copy2: modification times kept
                    results[engine].append(run_child(MODULE, ["--child", op, engine, uri]))
                    shutil.rmtree(uri, ignore_errors=True)
            for engine, got in results.items():
                ok = sorted((r for r in got if "error" not in r), key=lambda r: r["seconds"])
                # the median run; the first error when any run failed
                table[op][engine] = ok[len(ok) // 2] if len(ok) == len(got) else next(r for r in got if "error" in r)
        if "compact_proc" in table and "compact" in table:
            table["compact_proc"]["pylance"] = table["compact"]["pylance"]
        print(f"\n{'':<12} {'ours':>10} {'pylance':>10} {'ratio':>8} {'ours MiB':>9} {'py MiB':>9}")
        for op in table:
            print(_row(op, table[op]))
        print("\nchecks:", json.dumps({op: {e: {k: v for k, v in r.items() if k not in ("seconds", "peak_mib")}
                                             for e, r in res.items()} for op, res in table.items()}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
