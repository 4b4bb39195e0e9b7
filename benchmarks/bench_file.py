"""Lance file format benchmark: our 2.0 writer/reader vs pylance's 2.0 file API vs Parquet.

Run from the repository root::

    python -m benchmarks.bench_file                   # 10M rows
    python -m benchmarks.bench_file --rows 1000000    # quicker

The table (fixed seed): ``id`` int64, ``x`` float64, ``y`` float32, ``category`` string with
~100 distinct values, ``text`` string of ~20 random characters, ``vec``
fixed_size_list<float32, 16>. It is generated once and stored as an uncompressed Arrow IPC
file; every measurement then runs in its own Python process (so peak memory, ``ru_maxrss``,
is per engine and operation):

* write: load the IPC file, write it with the engine;
* scan: stream every column as record batches (``--batch-size`` rows);
* project: stream two columns (``x``, ``category``);
* take: read 1,000 random rows (sorted, fixed seed);

and prints seconds (read operations: fastest of ``--repeat`` runs; imports are not timed),
peak MiB and the ours / pylance ratios. Parquet (pyarrow, default
snappy) is a reference; it has no random access, so its take reads the file and takes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child, timed

ENGINES = ("ours", "pylance", "parquet")
OPS = ("write", "scan", "project", "take")
PROJECTION = ["x", "category"]
TAKE_ROWS = 1000
SEED = 42


def make_table(rows: int, seed: int = SEED) -> pa.Table:
    """The benchmark table, built with vectorized numpy from a fixed seed."""
    rng = np.random.default_rng(seed)
    cats = pa.array([f"category_{i:03d}" for i in range(100)])
    lengths = rng.integers(15, 26, rows)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    letters = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
    text = pa.Array.from_buffers(
        pa.large_string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(letters)]
    )
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16)
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "x": pa.array(rng.standard_normal(rows)),
            "y": pa.array(rng.random(rows, dtype=np.float32)),
            "category": cats.take(pa.array(rng.integers(0, 100, rows))),
            "text": text.cast(pa.string()),
            "vec": vec,
        }
    )


def take_indices(rows: int) -> list[int]:
    """The sorted random row offsets used by the take benchmark."""
    rng = np.random.default_rng(SEED + 1)
    count = min(TAKE_ROWS, rows)
    return sorted(rng.choice(rows, size=count, replace=False).tolist())


# -- child side -------------------------------------------------------------------------------


def _load_input(workdir: Path) -> pa.Table:
    with pa.memory_map(str(workdir / "input.arrow")) as src:
        return pa.ipc.open_file(src).read_all()


def _child(engine: str, op: str, workdir: Path, batch_size: int) -> None:
    path = str(workdir / ("data.parquet" if engine == "parquet" else f"{engine}.lance"))
    result: dict[str, Any] = {"engine": engine, "op": op}
    if op == "generate":
        rows = int((workdir / "rows.txt").read_text())
        table = make_table(rows)
        with pa.OSFile(str(workdir / "input.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table, max_chunksize=1 << 20)
        emit(result)
        return
    # import the engine before the clock starts: only the operation itself is timed
    if engine == "ours":
        import lance_format.file  # noqa: F401
    elif engine == "pylance":
        import lance.file  # noqa: F401
    else:
        import pyarrow.parquet  # noqa: F401
    if op == "write":
        table = _load_input(workdir)
        result["seconds"], _ = timed(lambda: _write(engine, path, table))
        result["bytes"] = os.path.getsize(path)
    elif op in ("scan", "project"):
        cols = PROJECTION if op == "project" else None
        result["seconds"], result["rows"] = timed(lambda: _scan(engine, path, cols, batch_size))
    elif op == "take":
        rows = int((workdir / "rows.txt").read_text())
        idx = take_indices(rows)
        result["seconds"], result["rows"] = timed(lambda: _take(engine, path, idx))
    emit(result)


def _write(engine: str, path: str, table: pa.Table) -> None:
    if engine == "ours":
        from lance_format.file import LanceFileWriter

        with LanceFileWriter(path, table.schema) as w:
            w.write_batch(table)
    elif engine == "pylance":
        import lance.file

        with lance.file.LanceFileWriter(path, table.schema, version="2.0") as pw:
            pw.write_batch(table)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, path)


def _scan(engine: str, path: str, columns: list[str] | None, batch_size: int) -> int:
    total = 0
    if engine == "ours":
        from lance_format.file import LanceFileReader

        for b in LanceFileReader(path, columns=columns).read_all(batch_size=batch_size).to_batches():
            total += b.num_rows
    elif engine == "pylance":
        import lance.file

        for b in (
            lance.file.LanceFileReader(path, columns=columns).read_all(batch_size=batch_size).to_batches()
        ):
            total += b.num_rows
    else:
        import pyarrow.parquet as pq

        for b in pq.ParquetFile(path).iter_batches(batch_size=batch_size, columns=columns):
            total += b.num_rows
    return total


def _take(engine: str, path: str, idx: list[int]) -> int:
    if engine == "ours":
        from lance_format.file import LanceFileReader

        return int(LanceFileReader(path).take_rows(idx).to_table().num_rows)
    if engine == "pylance":
        import lance.file

        return int(lance.file.LanceFileReader(path).take_rows(idx).to_table().num_rows)
    import pyarrow.parquet as pq

    return int(pq.read_table(path).take(pa.array(idx)).num_rows)


# -- parent side ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeat", type=int, default=3, help="runs per read operation (fastest is shown)")
    parser.add_argument(
        "--dir", default=None, help="work directory (default: a temporary one, removed after)"
    )
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "OP", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], Path(args.child[2]), args.batch_size)
        return 0

    engines = [e for e in args.engines.split(",") if e]
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_file_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"generating {args.rows:,} rows ...", flush=True)
        # in a child, so this process stays small: a child's ru_maxrss starts from its parent's RSS
        (workdir / "rows.txt").write_text(str(args.rows))
        gen = run_child("benchmarks.bench_file", ["--child", "-", "generate", str(workdir)])
        if "error" in gen:
            print(f"data generation failed: {gen['error']}")
            return 1
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for engine in engines:
            for op in OPS:
                runs = [
                    run_child(
                        "benchmarks.bench_file",
                        ["--child", engine, op, str(workdir), "--batch-size", str(args.batch_size)],
                    )
                    for _ in range(1 if op == "write" else args.repeat)
                ]
                res = next((r for r in runs if "error" in r), None) or dict(
                    runs[0],
                    seconds=min(r["seconds"] for r in runs),
                    peak_mib=max(r["peak_mib"] for r in runs),
                )
                results[(engine, op)] = res
                shown = (
                    res.get("error") or f"{fmt_seconds(res.get('seconds'))}  peak {res.get('peak_mib')} MiB"
                )
                print(f"  {engine:8s} {op:8s} {shown}", flush=True)
        _report(results, engines, args.rows)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _report(results: dict[tuple[str, str], dict[str, Any]], engines: list[str], rows: int) -> None:
    print(f"\nLance file benchmark, {rows:,} rows (seconds; peak RSS MiB of the measuring process)\n")
    headers = ["operation", *engines, "ours/pylance time", "ours/pylance peak"]
    table_rows = []
    for op in OPS:
        line = [op]
        for e in engines:
            r = results.get((e, op), {})
            line.append("err" if "error" in r else f"{fmt_seconds(r.get('seconds'))} / {r.get('peak_mib')}M")
        ours, theirs = results.get(("ours", op), {}), results.get(("pylance", op), {})
        line.append(fmt_ratio(ours.get("seconds"), theirs.get("seconds")))
        line.append(fmt_ratio(ours.get("peak_mib"), theirs.get("peak_mib")))
        table_rows.append(line)
    sizes = (
        ["file size"]
        + [f"{results.get((e, 'write'), {}).get('bytes', 0) / 2**20:.0f} MiB" for e in engines]
        + ["", ""]
    )
    table_rows.append(sizes)
    print_table(headers, table_rows)
    errors = [(k, v["error"]) for k, v in results.items() if "error" in v]
    for (engine, op), err in errors:
        print(f"error {engine}/{op}: {err}")
    print("\ntargets: write and scan <= 1.00x pylance; project and take <= 1.50x")


if __name__ == "__main__":
    sys.exit(main())
