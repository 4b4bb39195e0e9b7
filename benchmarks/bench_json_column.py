"""JSON columns (``arrow.json``, stored as JSONB): write and read, ours vs pylance.

Each run is a fresh process per engine, the engines interleaved, the median of ``--repeat`` runs
printed with the ratio::

    .venv/bin/python -m benchmarks.bench_json_column --rows 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, shutil, sys, time
import pyarrow as pa
lib = __import__(sys.argv[1]); rows = int(sys.argv[2]); uri = sys.argv[3]
docs = [json.dumps({"id": i, "name": f"n{i}", "tags": ["a", "b", i % 7], "score": i / 3.0}) for i in range(rows)]
table = pa.table({"id": pa.array(range(rows), pa.int64()), "j": pa.array(docs, pa.json_(pa.utf8()))})
shutil.rmtree(uri, ignore_errors=True)
t0 = time.perf_counter(); lib.write_dataset(table, uri); t1 = time.perf_counter()
out = lib.dataset(uri).to_table(); t2 = time.perf_counter()
assert out.num_rows == rows
print(f"{t1 - t0:.4f} {t2 - t1:.4f}")
"""


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print one line per operation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {"lance": [], "lance_format": []}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for engine in results:
                done = subprocess.run([sys.executable, "-c", CHILD, engine, str(args.rows), str(Path(tmp) / engine)],
                                      capture_output=True, text=True, check=True)
                write, read = map(float, done.stdout.split())
                results[engine].append((write, read))
    print(f"load (1-min average) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} cores")
    for i, what in enumerate(("write", "read")):
        theirs = statistics.median(r[i] for r in results["lance"])
        ours = statistics.median(r[i] for r in results["lance_format"])
        print(f"{what} {args.rows} JSON docs: pylance {theirs * 1000:.0f} ms, ours {ours * 1000:.0f} ms, "
              f"ours/pylance {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
