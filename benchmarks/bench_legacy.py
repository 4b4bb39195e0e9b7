"""Legacy (v1) file format benchmark: our legacy writer/reader vs pylance's, dataset level.

Run from the repository root::

    python -m benchmarks.bench_legacy --rows 1000000

pylance's file-level API does not write legacy files, so both engines go through their dataset API
(``write_dataset(..., data_storage_version="legacy")``) on the ``bench_file`` table. Every
measurement runs in a fresh process (what a Dagster step or Spark task sees: a freshly opened
dataset), engines interleaved, median of ``--repeat`` runs:

* write: load the Arrow input, write a new legacy dataset;
* scan: open the dataset and stream every column;
* project: open and stream ``x`` and ``category``;
* take: open and take 1,000 random rows.

Prints seconds, peak RSS and ours / pylance ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.bench_file import PROJECTION, make_table, take_indices
from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child, timed

ENGINES = ("ours", "pylance")
OPS = ("write", "scan", "project", "take")


def _module(engine: str) -> Any:
    if engine == "ours":
        import lance_format

        return lance_format
    import lance

    return lance


def _child(engine: str, op: str, workdir: Path) -> None:
    result: dict[str, Any] = {"engine": engine, "op": op}
    if op == "generate":
        table = make_table(int((workdir / "rows.txt").read_text()))
        with pa.OSFile(str(workdir / "input.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table, max_chunksize=1 << 20)
        emit(result)
        return
    lib = _module(engine)  # imported before the clock starts
    import pandas  # noqa: F401  # ``import lance`` loads it; pyarrow would load it lazily inside our timing
    uri = str(workdir / f"{engine}.lance")
    if op == "write":
        with pa.memory_map(str(workdir / "input.arrow")) as src:
            table = pa.ipc.open_file(src).read_all()
        shutil.rmtree(uri, ignore_errors=True)
        result["seconds"], _ = timed(lambda: lib.write_dataset(table, uri, data_storage_version="legacy"))
    elif op in ("scan", "project"):
        cols = PROJECTION if op == "project" else None

        def scan() -> int:
            return sum(b.num_rows for b in lib.dataset(uri).to_batches(columns=cols))

        result["seconds"], result["rows"] = timed(scan)
    else:
        idx = take_indices(int((workdir / "rows.txt").read_text()))
        result["seconds"], result["rows"] = timed(lambda: lib.dataset(uri).take(idx).num_rows)
    emit(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per operation (median shown)")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "OP", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], Path(args.child[2]))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="bench_legacy_"))
    try:
        (workdir / "rows.txt").write_text(str(args.rows))
        print(f"generating {args.rows:,} rows ...", flush=True)
        run_child("benchmarks.bench_legacy", ["--child", "-", "generate", str(workdir)])
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for op in OPS:
            for _ in range(args.repeat):
                for engine in ENGINES:  # interleaved, so drift on a shared machine hits both
                    r = run_child("benchmarks.bench_legacy", ["--child", engine, op, str(workdir)])
                    runs.setdefault((engine, op), []).append(r)
        rows = []
        for op in OPS:
            med: dict[str, dict[str, Any]] = {}
            for engine in ENGINES:
                rs = runs[(engine, op)]
                err = next((r["error"] for r in rs if "error" in r), None)
                med[engine] = {"error": err} if err else {
                    "seconds": statistics.median(r["seconds"] for r in rs),
                    "peak_mib": max(r["peak_mib"] for r in rs)}
            line = [op] + ["err" if "error" in med[e] else
                           f"{fmt_seconds(med[e]['seconds'])} / {med[e]['peak_mib']}M" for e in ENGINES]
            line.append(fmt_ratio(med["ours"].get("seconds"), med["pylance"].get("seconds")))
            line.append(fmt_ratio(med["ours"].get("peak_mib"), med["pylance"].get("peak_mib")))
            rows.append(line)
            for e in ENGINES:
                if "error" in med[e]:
                    print(f"error {e}/{op}: {med[e]['error']}")
        print(f"\nLegacy (0.1) datasets, {args.rows:,} rows, fresh process per run, median of {args.repeat}\n")
        print_table(["operation", "ours", "pylance", "ours/pylance time", "ours/pylance peak"], rows)
        print("\ntarget: every line <= 1.00x pylance")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
