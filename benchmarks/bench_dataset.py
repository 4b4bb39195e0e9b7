"""Dataset-level benchmark: what a user feels, ours vs pylance (and Parquet), fresh or warm processes.

Run from the repository root::

    python -m benchmarks.bench_dataset --rows 10000000
    python -m benchmarks.bench_dataset --rows 1000000 --versions 2.0,2.2,legacy --repeat 3
    python -m benchmarks.bench_dataset --rows 2000000 --ops scan,project --mode fresh,warm --hog none,pinned

Both engines write the ``bench_file`` table (``id`` i64, ``x`` f64, ``y`` f32, ``category`` string,
``text`` string, ``vec`` fixed_size_list<f32, 16>) as a dataset for every storage version asked
for; Parquet (pyarrow dataset, one file) is the reference. Then, engines interleaved:

* write: load the Arrow input and write a new dataset;
* scan: open the dataset and stream every column;
* project: open and stream ``x`` and ``category``;
* take: open and take 1,000 random rows;
* count: open and ``count_rows(filter="x > 0.9")``;
* delete+scan: copy the dataset, delete 10% of the rows (``id % 10 = 0``), open and stream it;
* ``--read-from pylance``: ours reads the datasets pylance wrote (the read operations above), so
  both engines read the same files; ``--read-from both`` measures ours on both, interleaved in
  one run (column ``ours-pf``: ours on pylance's files, with its own ratio column);
* import: ``import lance_format`` / ``import lance`` (``pyarrow.dataset`` for Parquet), the cost
  every fresh process pays before any of the above (fresh mode only);
* bytes (the stretch reference, printed below the fresh table): read every data file of the
  dataset from the page cache with plain 8 MiB reads; the scan's time over this is its distance
  from the bytes alone.

Modes (``--mode``, both may be given):

* ``fresh``: each run in a new Python process (a Dagster step or a Spark task opens a dataset
  cold), median of ``--repeat``.
* ``warm``: one long-lived process per engine and version (a Dagster code server, a Spark
  executor) runs each operation once, then ``--warm-runs`` more times; the first run and the
  median of the rest are shown. The processes take turns, operation by operation.

Contention (``--hog``): ``none``, ``pinned`` (a busy-loop process pinned to the last CPU this
process may use: "the other core" of a 2-core machine) or ``free`` (the busy loop unpinned); it
runs for the whole of every measurement. Several values give one table each.

Fresh processes start as an installed package would: bytecode is compiled once into a private
cache (``PYTHONPYCACHEPREFIX`` under the work directory; the repository checkout may run with
``PYTHONDONTWRITEBYTECODE``, which would recompile every module of ours in every child while
pylance's site-packages ship compiled), and pandas is imported before the clock starts for
every engine: ``import lance`` imports it, and pyarrow imports it lazily on the first
``pa.array``/``pa.scalar`` call, so without this the first operation of our process would
carry pandas' import while pylance's had it for free. The ``import`` line shows both costs.

Prints wall seconds, peak RSS of the measuring process, ours / pylance ratios per version of the
wall time and of the process's CPU time (all its threads), and the process's OS threads after
the operation (pylance's Rust runtime threads included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from benchmarks.bench_file import PROJECTION, make_table, take_indices
from benchmarks.common import REPO_ROOT, emit, fmt_ratio, fmt_seconds, print_table, run_child

OPS = ("write", "scan", "project", "take", "count", "delete+scan", "import")
FILTER = "x > 0.9"
#: The busy loop of ``--hog``: pins itself when given a CPU, says it runs, then spins.
_HOG = ("import os, sys\nif len(sys.argv) > 1: os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "sys.stdout.write('x'); sys.stdout.flush()\nwhile True: pass\n")


#: Ours reading the datasets pylance wrote (``--read-from both``): a third engine of the same run.
OURS_ON_PYLANCE_FILES = "ours-pf"


def _lib(engine: str) -> Any:
    if engine in ("ours", OURS_ON_PYLANCE_FILES):
        import lance_format

        # lance_format loads its public names on first use (PEP 562) where ``import lance``
        # loads pylance whole: load what the operations call here, so the ``import`` line holds
        # the whole import cost of both engines and no timed operation carries part of ours.
        _ = (lance_format.dataset, lance_format.write_dataset)
        return lance_format
    if engine == "pylance":
        import lance

        return lance
    import pyarrow.dataset as pads

    return pads


def _uri(workdir: Path, engine: str, version: str) -> str:
    return str(workdir / (f"{engine}-{version}.lance" if engine != "parquet" else "parquet"))


def _read_uri(workdir: Path, engine: str, version: str) -> str:
    """The dataset a read operation opens: the engine's own, or pylance's for ours with
    ``--read-from pylance`` (the files users mostly have; pylance encodes some columns
    differently, e.g. FSST strings)."""
    marker = workdir / "read_from.txt"
    if engine == OURS_ON_PYLANCE_FILES or (engine == "ours" and marker.exists() and marker.read_text() == "pylance"):
        engine = "pylance"
    return _uri(workdir, engine, version)


def _os_threads() -> int:
    """Threads of this process as the OS counts them (Rust and numpy threads too)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _measure(result: dict[str, Any], fn: Any) -> None:
    """Run ``fn`` once: wall and CPU seconds, its row count and the threads alive after it."""
    c0, t0 = time.process_time(), time.perf_counter()
    rows = fn()
    result["seconds"] = time.perf_counter() - t0
    result["cpu"] = time.process_time() - c0
    result["rows"] = rows
    result["threads"] = _os_threads()


def _run_op(lib: Any, engine: str, version: str, op: str, workdir: Path) -> dict[str, Any]:
    """One timed operation (pandas and the engine already imported); the result to emit."""
    result: dict[str, Any] = {"engine": engine, "version": version, "op": op}
    uri = _uri(workdir, engine, version) if op == "write" else _read_uri(workdir, engine, version)
    if op in ("write", "delete+scan") and engine == OURS_ON_PYLANCE_FILES:
        return dict(result, error="reads only")
    if op == "write":
        with pa.memory_map(str(workdir / "input.arrow")) as src:
            table = pa.ipc.open_file(src).read_all()
        out = uri + ".w"  # the measured write never replaces the dataset the other operations read
        shutil.rmtree(out, ignore_errors=True)

        def write() -> int:
            if engine == "parquet":
                lib.write_dataset(table, out, format="parquet")
            else:
                lib.write_dataset(table, out, data_storage_version=version)
            return int(table.num_rows)

        try:
            _measure(result, write)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    elif op in ("scan", "project"):
        cols = PROJECTION if op == "project" else None

        def scan() -> int:
            ds = lib.dataset(uri, format="parquet") if engine == "parquet" else lib.dataset(uri)
            return sum(b.num_rows for b in ds.to_batches(columns=cols))

        _measure(result, scan)
    elif op == "take":
        idx = take_indices(int((workdir / "rows.txt").read_text()))

        def take() -> int:
            ds = lib.dataset(uri, format="parquet") if engine == "parquet" else lib.dataset(uri)
            return int(ds.take(pa.array(idx) if engine == "parquet" else idx).num_rows)

        _measure(result, take)
    elif op == "count":
        def count() -> int:
            if engine == "parquet":
                import pyarrow.compute as pc

                return int(lib.dataset(uri, format="parquet").count_rows(filter=pc.field("x") > 0.9))
            return int(lib.dataset(uri).count_rows(filter=FILTER))

        _measure(result, count)
    elif op == "delete+scan":
        if engine == "parquet":
            return dict(result, error="no deletes in plain Parquet")
        copy = uri + ".del"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(uri, copy)

        def delete_scan() -> int:
            lib.dataset(copy).delete("id % 10 = 0")
            return sum(b.num_rows for b in lib.dataset(copy).to_batches())

        try:
            _measure(result, delete_scan)
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    else:
        return dict(result, error=f"unknown operation {op!r}")
    return result


def _child(engine: str, version: str, op: str, workdir: Path) -> None:
    result: dict[str, Any] = {"engine": engine, "version": version, "op": op}
    rows = int((workdir / "rows.txt").read_text())
    if op == "generate":
        table = make_table(rows)
        with pa.OSFile(str(workdir / "input.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table, max_chunksize=1 << 20)
        emit(result)
        return
    if op == "setup":  # the datasets every other operation reads, all in one process (not timed)
        with pa.memory_map(str(workdir / "input.arrow")) as src:
            table = pa.ipc.open_file(src).read_all()
        for item in engine.split(","):
            name, ver = item.split("@")
            uri = _uri(workdir, name, ver)
            shutil.rmtree(uri, ignore_errors=True)
            if name == "parquet":
                _lib(name).write_dataset(table, uri, format="parquet")
            else:
                _lib(name).write_dataset(table, uri, data_storage_version=ver)
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
        c0, t0 = time.process_time(), time.perf_counter()
        _lib(engine)
        result["seconds"] = time.perf_counter() - t0
        result["cpu"] = time.process_time() - c0
        emit(result)
        return
    import pandas  # noqa: F401 - see the module docstring: pylance's import brings it, pyarrow would later

    emit(_run_op(_lib(engine), engine, version, op, workdir))  # imports are not timed


def _serve(engine: str, version: str, workdir: Path) -> None:
    """The warm mode's long-lived process: one operation per stdin line, one JSON line back each."""
    import pandas  # noqa: F401 - as in a fresh child

    lib = _lib(engine)
    emit({"engine": engine, "version": version, "op": "ready"})
    for line in sys.stdin:
        op = line.strip()
        if not op:
            break
        try:
            emit(_run_op(lib, engine, version, op, workdir))
        except Exception as exc:  # noqa: BLE001 - reported in the table, the process keeps serving
            emit({"engine": engine, "version": version, "op": op, "error": f"{type(exc).__name__}: {exc}"})


@contextlib.contextmanager
def _hog(mode: str) -> Iterator[None]:
    """A busy-loop process for the duration of the block (``none``: nothing)."""
    if mode == "none":
        yield
        return
    args = [sys.executable, "-c", _HOG]
    if mode == "pinned":
        args.append(str(max(os.sched_getaffinity(0))))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        proc.stdout.read(1)  # spinning before the measurement starts
        yield
    finally:
        proc.kill()
        proc.wait()


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    err = next((r["error"] for r in runs if "error" in r), None)
    if err:
        return {"error": err}
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "cpu": statistics.median(r.get("cpu", 0.0) for r in runs),
        "peak_mib": max(r["peak_mib"] for r in runs),
        "threads": max(r.get("threads", 0) for r in runs),
    }


def _ours(combos: list[tuple[str, str]]) -> list[str]:
    """Our engines of the run: ``ours``, and ``ours-pf`` with ``--read-from both``."""
    return [e for e in ("ours", OURS_ON_PYLANCE_FILES) if any(c[0] == e for c in combos)]


def _ratio_headers(combos: list[tuple[str, str]], versions: list[str], what: str) -> list[str]:
    return [f"{what} {v}" if e == "ours" else f"{what} {v} ({e})" for e in _ours(combos) for v in versions]


def _ratios(med: dict[tuple[str, str], dict[str, Any]], versions: list[str], key: str) -> list[str]:
    engines = [e for e in ("ours", OURS_ON_PYLANCE_FILES) if any(k[0] == e for k in med)]
    return [fmt_ratio(med[(e, v)].get(key), med[("pylance", v)].get(key)) for e in engines for v in versions]


def _cell(m: dict[str, Any]) -> str:
    if "error" in m:
        return "-"
    threads = f" {m['threads']}t" if m.get("threads") else ""
    return f"{fmt_seconds(m['seconds'])} / {m['peak_mib']}M{threads}"


def _fresh(args: argparse.Namespace, ops: list[str], combos: list[tuple[str, str]], versions: list[str],
           workdir: Path, hog: str) -> None:
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for op in ops:
        for _ in range(1 if op == "write" else args.repeat):
            for engine, version in combos:  # interleaved: load drift hits every engine alike
                with _hog(hog):
                    r = run_child("benchmarks.bench_dataset", ["--child", engine, version, op, str(workdir)])
                runs.setdefault((engine, version, op), []).append(r)
    print(f"\nDataset benchmark, {args.rows:,} rows, fresh process per run, median of {args.repeat}, hog {hog}"
          f" (wall seconds / peak RSS / OS threads; load {_load()})\n")
    headers = ["operation"] + [f"{e} {v}" if e != "parquet" else "parquet" for e, v in combos] + \
        _ratio_headers(combos, versions, "ours/pylance") + _ratio_headers(combos, versions, "cpu ratio") + \
        _ratio_headers(combos, versions, "peak ratio")
    table = []
    for op in ops:
        med = {(e, v): _median(runs[(e, v, op)]) for e, v in combos}
        table.append([op] + [_cell(med[c]) for c in combos] + _ratios(med, versions, "seconds")
                     + _ratios(med, versions, "cpu") + _ratios(med, versions, "peak_mib"))
        for c in combos:
            if "error" in med[c] and c[0] != "parquet":
                print(f"error {c[0]} {c[1]} {op}: {med[c]['error']}")
    print_table(headers, table)
    print("\ntargets: every line <= 1.00x pylance; peak memory <= 1.00x on write and scan")
    if "scan" not in ops:
        return
    print("stretch: full scan within 3x of reading the same bytes from the page cache")
    for engine, version in combos:
        if engine in ("parquet", OURS_ON_PYLANCE_FILES):
            continue
        reads = [run_child("benchmarks.bench_dataset", ["--child", engine, version, "bytes", str(workdir)])
                 for _ in range(args.repeat)]
        raw, scan = _median(reads), _median(runs[(engine, version, "scan")])
        if "error" not in raw and "error" not in scan:
            print(f"  {engine} {version}: {reads[0]['rows'] / 2**20:,.0f} MiB of files read in "
                  f"{fmt_seconds(raw['seconds'])}, scan {fmt_seconds(scan['seconds'])} = "
                  f"{fmt_ratio(scan['seconds'], raw['seconds'])}")


def _ask(proc: subprocess.Popen[str], op: str) -> dict[str, Any]:
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    stdin.write(op + "\n")
    stdin.flush()
    return _reply(stdout)


def _reply(stdout: IO[str]) -> dict[str, Any]:
    for line in stdout:
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    return {"error": "the warm process ended"}


def _warm(args: argparse.Namespace, ops: list[str], combos: list[tuple[str, str]], versions: list[str],
          workdir: Path, hog: str) -> None:
    ops = [op for op in ops if op != "import"]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs: dict[tuple[str, str], subprocess.Popen[str]] = {}
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    try:
        for engine, version in combos:
            proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_dataset", "--serve", engine, version,
                                     str(workdir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    cwd=REPO_ROOT, env=env)
            procs[(engine, version)] = proc
            assert proc.stdout is not None
            _reply(proc.stdout)  # imported and ready
        for op in ops:
            for _ in range(1 + args.warm_runs):
                for combo in combos:  # the processes take turns: load drift hits every engine alike
                    with _hog(hog):
                        runs.setdefault((*combo, op), []).append(_ask(procs[combo], op))
    finally:
        for proc in procs.values():
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            proc.wait()
    print(f"\nDataset benchmark, {args.rows:,} rows, one warm process per engine: first run, then median of"
          f" {args.warm_runs} more, hog {hog} (wall seconds / peak RSS / OS threads; load {_load()})\n")
    headers = ["operation"] + [f"{e} {v}" if e != "parquet" else "parquet" for e, v in combos] + \
        _ratio_headers(combos, versions, "ours/pylance") + _ratio_headers(combos, versions, "cpu ratio")
    table = []
    for op in ops:
        first = {c: _median(runs[(*c, op)][:1]) for c in combos}
        rest = {c: _median(runs[(*c, op)][1:] or runs[(*c, op)][:1]) for c in combos}
        for label, med in (("first", first), ("warm", rest)):
            table.append([f"{op} {label}"] + [_cell(med[c]) for c in combos] + _ratios(med, versions, "seconds")
                         + _ratios(med, versions, "cpu"))
        for c in combos:
            if "error" in rest[c] and c[0] != "parquet":
                print(f"error {c[0]} {c[1]} {op}: {rest[c]['error']}")
    print_table(headers, table)
    print("\ntargets: every line <= 1.00x pylance")


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--versions", default="2.0,2.2", help="storage versions, e.g. 2.0,2.2,legacy")
    parser.add_argument("--repeat", type=int, default=3, help="fresh runs per operation (median shown)")
    parser.add_argument("--ops", default=",".join(OPS), help="operations to measure, e.g. scan,project")
    parser.add_argument("--mode", default="fresh", help="fresh, warm or fresh,warm (a table each)")
    parser.add_argument("--warm-runs", type=int, default=5, help="warm runs after the first (median shown)")
    parser.add_argument("--hog", default="none", help="none, pinned, free, or several: none,pinned (a table each)")
    parser.add_argument("--no-parquet", action="store_true")
    parser.add_argument("--read-from", default="own", choices=("own", "pylance", "both"),
                        help="which engine's files ours reads: its own (default), pylance's, or both (a column each)")
    parser.add_argument("--dir", default=None,
                        help="work directory to use and keep (data, datasets); datasets already there are reused")
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "VERSION", "OP", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--serve", nargs=3, metavar=("ENGINE", "VERSION", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.child[2], Path(args.child[3]))
        return 0
    if args.serve:
        _serve(args.serve[0], args.serve[1], Path(args.serve[2]))
        return 0
    versions = [v for v in args.versions.split(",") if v]
    ops = [op for op in args.ops.split(",") if op]
    modes = [m for m in args.mode.split(",") if m]
    hogs = [h for h in args.hog.split(",") if h]
    for value, allowed, what in ((ops, OPS, "operation"), (modes, ("fresh", "warm"), "mode"),
                                 (hogs, ("none", "pinned", "free"), "hog")):
        bad = [v for v in value if v not in allowed]
        if bad:
            parser.error(f"unknown {what} {bad[0]!r}: choose from {', '.join(allowed)}")
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_dataset_"))
    workdir.mkdir(parents=True, exist_ok=True)
    keep = args.dir is not None
    # children compile our modules once into a private bytecode cache, as an install would
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    try:
        rows_file = workdir / "rows.txt"
        # a kept directory of the same row count keeps its input and datasets (delete it to rewrite)
        reuse = keep and rows_file.exists() and rows_file.read_text() == str(args.rows)
        rows_file.write_text(str(args.rows))
        (workdir / "read_from.txt").write_text(args.read_from)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO_ROOT / "lance_format")],
                       check=False, capture_output=True)
        if not (reuse and (workdir / "input.arrow").exists()):
            print(f"generating {args.rows:,} rows ...", flush=True)
            run_child("benchmarks.bench_dataset", ["--child", "-", "-", "generate", str(workdir)])
        engines = ("ours", OURS_ON_PYLANCE_FILES, "pylance") if args.read_from == "both" else ("ours", "pylance")
        combos = [(e, v) for v in versions for e in engines]
        if not args.no_parquet:
            combos.append(("parquet", "-"))
        every = ",".join(f"{e}@{v}" for e, v in combos if e != OURS_ON_PYLANCE_FILES
                         and not (reuse and Path(_uri(workdir, e, v)).exists()))
        if every:
            r = run_child("benchmarks.bench_dataset", ["--child", every, "-", "setup", str(workdir)])
            if "error" in r:
                print(f"error writing the datasets: {r['error']}")
        for mode in modes:
            for hog in hogs:
                (_fresh if mode == "fresh" else _warm)(args, ops, combos, versions, workdir, hog)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
