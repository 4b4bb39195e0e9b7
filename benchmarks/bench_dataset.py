"""Dataset-level benchmark: what a user feels, ours vs pylance (and Parquet), fresh process per run.

Run from the repository root::

    python -m benchmarks.bench_dataset --rows 10000000
    python -m benchmarks.bench_dataset --rows 1000000 --versions 2.0,2.2,legacy --repeat 3

Both engines write the ``bench_file`` table (``id`` i64, ``x`` f64, ``y`` f32, ``category`` string,
``text`` string, ``vec`` fixed_size_list<f32, 16>) as a dataset for every storage version asked
for; Parquet (pyarrow dataset, one file) is the reference. Then, each in a fresh Python process
(a Dagster step or a Spark task opens a dataset cold), engines interleaved, median of ``--repeat``:

* write: load the Arrow input and write a new dataset;
* scan: open the dataset and stream every column;
* project: open and stream ``x`` and ``category``;
* take: open and take 1,000 random rows;
* count: open and ``count_rows(filter="x > 0.9")``;
* delete+scan: copy the dataset, delete 10% of the rows (``id % 10 = 0``), open and stream it;
* import: ``import lance_format`` / ``import lance`` (``pyarrow.dataset`` for Parquet), the cost
  every fresh process pays before any of the above;
* bytes (the stretch reference, printed below the table): read every data file of the dataset
  from the page cache with plain 8 MiB reads; the scan's time over this is its distance from
  the bytes alone.

Fresh processes start as an installed package would: bytecode is compiled once into a private
cache (``PYTHONPYCACHEPREFIX`` under the work directory; the repository checkout may run with
``PYTHONDONTWRITEBYTECODE``, which would recompile every module of ours in every child while
pylance's site-packages ship compiled), and pandas is imported before the clock starts for
every engine: ``import lance`` imports it, and pyarrow imports it lazily on the first
``pa.array``/``pa.scalar`` call, so without this the first operation of our process would
carry pandas' import while pylance's had it for free. The ``import`` line shows both costs.

Prints seconds, peak RSS of the measuring process and ours / pylance ratios per version.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.bench_file import PROJECTION, make_table, take_indices
from benchmarks.common import REPO_ROOT, emit, fmt_ratio, fmt_seconds, print_table, run_child, timed

OPS = ("write", "scan", "project", "take", "count", "delete+scan", "import")
FILTER = "x > 0.9"


def _lib(engine: str) -> Any:
    if engine == "ours":
        import lance_format

        return lance_format
    if engine == "pylance":
        import lance

        return lance
    import pyarrow.dataset as pads

    return pads


def _uri(workdir: Path, engine: str, version: str) -> str:
    return str(workdir / (f"{engine}-{version}.lance" if engine != "parquet" else "parquet"))


def _child(engine: str, version: str, op: str, workdir: Path) -> None:
    result: dict[str, Any] = {"engine": engine, "version": version, "op": op}
    rows = int((workdir / "rows.txt").read_text())
    if op == "generate":
        table = make_table(rows)
        with pa.OSFile(str(workdir / "input.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table, max_chunksize=1 << 20)
        emit(result)
        return
    if op == "bytes":  # the stretch reference: the dataset's files read straight from the page cache
        buf = bytearray(8 << 20)
        uri = _uri(workdir, engine, version)
        t0 = time.perf_counter()
        total = 0
        for path in sorted(Path(uri).rglob("*.lance")):
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
        result["seconds"] = time.perf_counter() - t0
        result["rows"] = total
        emit(result)
        return
    if op == "import":
        t0 = time.perf_counter()
        _lib(engine)
        result["seconds"] = time.perf_counter() - t0
        emit(result)
        return
    import pandas  # noqa: F401 - see the module docstring: pylance's import brings it, pyarrow would later

    lib = _lib(engine)  # imports are not timed
    uri = _uri(workdir, engine, version)
    if op == "write":
        with pa.memory_map(str(workdir / "input.arrow")) as src:
            table = pa.ipc.open_file(src).read_all()
        shutil.rmtree(uri, ignore_errors=True)
        if engine == "parquet":
            result["seconds"], _ = timed(lambda: lib.write_dataset(table, uri, format="parquet"))
        else:
            result["seconds"], _ = timed(lambda: lib.write_dataset(table, uri, data_storage_version=version))
    elif op in ("scan", "project"):
        cols = PROJECTION if op == "project" else None

        def scan() -> int:
            ds = lib.dataset(uri, format="parquet") if engine == "parquet" else lib.dataset(uri)
            return sum(b.num_rows for b in ds.to_batches(columns=cols))

        result["seconds"], result["rows"] = timed(scan)
    elif op == "take":
        idx = take_indices(rows)

        def take() -> int:
            ds = lib.dataset(uri, format="parquet") if engine == "parquet" else lib.dataset(uri)
            return int(ds.take(pa.array(idx) if engine == "parquet" else idx).num_rows)

        result["seconds"], result["rows"] = timed(take)
    elif op == "count":
        def count() -> int:
            if engine == "parquet":
                import pyarrow.compute as pc

                return int(lib.dataset(uri, format="parquet").count_rows(filter=pc.field("x") > 0.9))
            return int(lib.dataset(uri).count_rows(filter=FILTER))

        result["seconds"], result["rows"] = timed(count)
    elif op == "delete+scan":
        if engine == "parquet":
            emit(dict(result, error="no deletes in plain Parquet"))
            return
        copy = uri + ".del"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(uri, copy)

        def delete_scan() -> int:
            lib.dataset(copy).delete("id % 10 = 0")
            return sum(b.num_rows for b in lib.dataset(copy).to_batches())

        try:
            result["seconds"], result["rows"] = timed(delete_scan)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    emit(result)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    err = next((r["error"] for r in runs if "error" in r), None)
    if err:
        return {"error": err}
    return {"seconds": statistics.median(r["seconds"] for r in runs), "peak_mib": max(r["peak_mib"] for r in runs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--versions", default="2.0,2.2", help="storage versions, e.g. 2.0,2.2,legacy")
    parser.add_argument("--repeat", type=int, default=3, help="runs per operation (median shown)")
    parser.add_argument("--no-parquet", action="store_true")
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "VERSION", "OP", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.child[2], Path(args.child[3]))
        return 0
    versions = [v for v in args.versions.split(",") if v]
    workdir = Path(tempfile.mkdtemp(prefix="bench_dataset_"))
    # children compile our modules once into a private bytecode cache, as an install would
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    try:
        (workdir / "rows.txt").write_text(str(args.rows))
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO_ROOT / "lance_format")],
                       check=False, capture_output=True)
        print(f"generating {args.rows:,} rows ...", flush=True)
        run_child("benchmarks.bench_dataset", ["--child", "-", "-", "generate", str(workdir)])
        combos = [(e, v) for v in versions for e in ("ours", "pylance")]
        if not args.no_parquet:
            combos.append(("parquet", "-"))
        runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for op in OPS:
            for _ in range(1 if op == "write" else args.repeat):
                for engine, version in combos:  # interleaved: load drift hits every engine alike
                    r = run_child("benchmarks.bench_dataset", ["--child", engine, version, op, str(workdir)])
                    runs.setdefault((engine, version, op), []).append(r)
        print(f"\nDataset benchmark, {args.rows:,} rows, fresh process per run, median of {args.repeat}"
              " (seconds / peak RSS)\n")
        headers = ["operation"] + [f"{e} {v}" if e != "parquet" else "parquet" for e, v in combos] + \
            [f"ours/pylance {v}" for v in versions] + [f"peak ratio {v}" for v in versions]
        table = []
        for op in OPS:
            med = {(e, v): _median(runs[(e, v, op)]) for e, v in combos}
            line = [op] + ["-" if "error" in med[c] else f"{fmt_seconds(med[c]['seconds'])} / {med[c]['peak_mib']}M"
                           for c in combos]
            line += [fmt_ratio(med[("ours", v)].get("seconds"), med[("pylance", v)].get("seconds")) for v in versions]
            line += [fmt_ratio(med[("ours", v)].get("peak_mib"), med[("pylance", v)].get("peak_mib"))
                     for v in versions]
            table.append(line)
            for c in combos:
                if "error" in med[c] and c[0] != "parquet":
                    print(f"error {c[0]} {c[1]} {op}: {med[c]['error']}")
        print_table(headers, table)
        print("\ntargets: every line <= 1.00x pylance; peak memory <= 1.00x on write and scan")
        print("stretch: full scan within 3x of reading the same bytes from the page cache")
        for engine, version in combos:
            if engine == "parquet":
                continue
            reads = [run_child("benchmarks.bench_dataset", ["--child", engine, version, "bytes", str(workdir)])
                     for _ in range(args.repeat)]
            raw, scan = _median(reads), _median(runs[(engine, version, "scan")])
            if "error" not in raw and "error" not in scan:
                print(f"  {engine} {version}: {reads[0]['rows'] / 2**20:,.0f} MiB of files read in "
                      f"{fmt_seconds(raw['seconds'])}, scan {fmt_seconds(scan['seconds'])} = "
                      f"{fmt_ratio(scan['seconds'], raw['seconds'])}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
