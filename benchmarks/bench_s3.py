"""Object-store benchmark: open, take, filtered count and full scan on S3, ours vs pylance.

Run from the repository root::

    python -m benchmarks.bench_s3                      # 1M rows in 10 fragments
    python -m benchmarks.bench_s3 --rows 200000 --versions 2.2

An S3-compatible server (moto) runs on loopback in its own process, so its request handling
does not share a Python interpreter with either engine. Both engines write the ``bench_file``
table as a dataset of ``--fragments`` fragments for every storage version asked for; then,
each in a fresh Python process, engines interleaved, median of ``--repeat``:

* open: open the dataset (what every other line pays first: client set-up, version listing);
* open_read: a fresh process's first touch of a dataset: ``import`` of the engine (pyarrow is
  imported before the clock starts: both engines need it), open, and ``take`` of 10 rows;
* take: open and take 1,000 random rows;
* count: open and ``count_rows(filter="x > 0.9")``;
* scan: open and stream every column;
* cleanup: ``cleanup_old_versions(older_than=0)`` of a dataset of ``--cleanup-versions``
  versions (built by pylance afresh before every run: cleanup is destructive, and a server-side
  copy would make every file newer than the kept manifest, which both engines then keep);
* cleanup_files: the same on a dataset whose old version holds ``--files`` data files.

``--ops`` picks the lines. Each line shows wall and CPU seconds of the measured call (the CPU
column tells a loaded machine's scheduling apart from work).

Loopback has no network latency, so this measures request counts and per-request work more
than waiting; a real bucket makes every request cost more. Prints seconds and ours / pylance.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child

MODULE = "benchmarks.bench_s3"
OPS = ("open", "open_read", "take", "count", "scan", "cleanup", "cleanup_files")
CLEANUP_OPS = ("cleanup", "cleanup_files")
BUCKET = "bench-bucket"


def _options(endpoint: str) -> dict[str, str]:
    return {"aws_access_key_id": "bench", "aws_secret_access_key": "bench", "aws_region": "us-east-1",
            "aws_endpoint": endpoint, "allow_http": "true"}


def _child(engine: str, uri: str, op: str, endpoint: str, rows: int) -> None:
    import datetime as dt

    import pyarrow  # noqa: F401 - both engines need it; not counted

    opts = _options(endpoint)
    if op == "open_read":
        t0, c0 = time.perf_counter(), time.process_time()
        lib: Any = __import__("lance_format" if engine == "ours" else "lance")
        n = lib.dataset(uri, storage_options=opts).take(list(range(10))).num_rows
        emit({"engine": engine, "op": op, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
              "rows": int(n)})
        return
    import pandas  # noqa: F401 - as in bench_dataset: pylance's import brings it

    lib = __import__("lance_format" if engine == "ours" else "lance")
    # ``import lance`` loads pylance's whole native module; ours loads its public names on first
    # use, so resolve the one measured here before the clock too (the storage backend for s3://
    # still loads inside the clock, on first use, for ours).
    open_dataset = lib.dataset
    from benchmarks.bench_file import take_indices

    idx = take_indices(rows) if op == "take" else None
    t0, c0 = time.perf_counter(), time.process_time()
    ds = open_dataset(uri, storage_options=opts)
    if op == "take":
        n = ds.take(idx).num_rows
    elif op == "count":
        n = ds.count_rows(filter="x > 0.9")
    elif op == "scan":
        n = sum(b.num_rows for b in ds.to_batches())
    elif op in CLEANUP_OPS:
        # ours keeps versions superseded within its commit grace; pylance has none
        extra = {"commit_grace": dt.timedelta(0)} if engine == "ours" else {}
        stats = ds.cleanup_old_versions(older_than=dt.timedelta(0), **extra)
        n = stats.old_versions + stats.data_files_removed
    else:
        n = ds.version
    emit({"engine": engine, "op": op, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
          "rows": int(n)})


def _build_cleanup(uri: str, op: str, versions: int, files: int, endpoint: str) -> None:
    """The cleanup input, written by pylance (the same builder for both engines)."""
    import lance
    import pyarrow as pa

    from benchmarks.bench_maintenance import build_cleanup_input

    opts = _options(endpoint)
    if op == "cleanup":
        build_cleanup_input(uri, versions, storage_options=opts)
        return
    # version 1: ``files`` one-row data files; version 2 replaces them, so cleanup removes them all
    lance.write_dataset(pa.table({"id": list(range(files))}), uri, max_rows_per_file=1, storage_options=opts)
    lance.write_dataset(pa.table({"id": [0]}), uri, mode="overwrite", storage_options=opts)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the S3 server did not listen on port {port}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--fragments", type=int, default=10)
    parser.add_argument("--versions", default="2.0,2.2")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ops", default="open,take,count,scan", help=f"comma-separated, of {','.join(OPS)}")
    parser.add_argument("--cleanup-versions", type=int, default=200)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--child", nargs=5, metavar=("ENGINE", "URI", "OP", "ENDPOINT", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], args.child[2], args.child[3], int(args.child[4]))
        return 0
    import boto3
    import lance

    import lance_format
    from benchmarks.bench_file import make_table

    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        versions = [v for v in args.versions.split(",") if v]
        ops = [o for o in args.ops.split(",") if o]
        unknown = set(ops) - set(OPS)
        if unknown:
            raise SystemExit(f"unknown ops {sorted(unknown)}; known: {OPS}")
        if any(op not in CLEANUP_OPS for op in ops):
            print(f"writing {args.rows:,} rows in {args.fragments} fragments per dataset ...", flush=True)
            table = make_table(args.rows)
            per_file = max(1, -(-args.rows // args.fragments))
            for version in versions:
                for engine, lib in (("ours", lance_format), ("pylance", lance)):
                    lib.write_dataset(table, f"s3://{BUCKET}/{engine}-{version}", data_storage_version=version,
                                      max_rows_per_file=per_file, storage_options=_options(endpoint))
        # fresh processes compile our modules once into a private cache, as an install would
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        runs: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        serial = 0
        for op in ops:
            # a cleanup's dataset has no storage-version axis: the default one
            op_versions = versions[-1:] if op in CLEANUP_OPS else versions
            for _ in range(args.repeat):
                for version in op_versions:
                    for engine in ("ours", "pylance"):
                        uri = f"s3://{BUCKET}/{engine}-{version}"
                        if op in CLEANUP_OPS:
                            serial += 1
                            uri = f"s3://{BUCKET}/{op}-{serial}"
                            _build_cleanup(uri, op, args.cleanup_versions, args.files, endpoint)
                        r = run_child(MODULE, ["--child", engine, uri, op, endpoint, str(args.rows)])
                        if "error" in r:
                            raise RuntimeError(f"{engine} {version} {op}: {r['error']}")
                        runs.setdefault((engine, version, op), []).append((float(r["seconds"]), float(r["cpu"])))
                        print(f"  {op} {version} {engine}: {r['seconds']:.3f}s wall, {r['cpu']:.3f}s CPU"
                              + (f", {r['rows']} versions + data files removed" if op in CLEANUP_OPS else ""),
                              flush=True)
        print(f"\nS3 (moto on loopback), {args.rows:,} rows in {args.fragments} fragments; cleanup: "
              f"{args.cleanup_versions} versions / {args.files:,} files; fresh process per run, "
              f"median of {args.repeat} (wall seconds, CPU seconds)\n")
        headers = ["operation"] + [f"{e} {v}" for v in versions for e in ("ours", "pylance")] + \
            [f"ours/pylance {v} (cpu)" for v in versions]
        lines = []
        for op in ops:
            line = [op]
            for v in versions:
                for e in ("ours", "pylance"):
                    got = runs.get((e, v, op))
                    line.append(f"{fmt_seconds(statistics.median(w for w, _ in got))} "
                                f"({fmt_seconds(statistics.median(c for _, c in got))})" if got else "-")
            for v in versions:
                ours, theirs = runs.get(("ours", v, op)), runs.get(("pylance", v, op))
                if not ours or not theirs:
                    line.append("-")
                    continue
                line.append(f"{fmt_ratio(statistics.median(w for w, _ in ours), statistics.median(w for w, _ in theirs))}"
                            f" ({fmt_ratio(statistics.median(c for _, c in ours), statistics.median(c for _, c in theirs))})")
            lines.append(line)
        print_table(headers, lines)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
