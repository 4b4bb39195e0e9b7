"""Scalar index benchmark: our BTREE / BITMAP build and indexed queries vs pylance's, side by side.

Run from the repository root::

    python -m benchmarks.bench_index                   # 10M rows
    python -m benchmarks.bench_index --rows 1000000    # quicker

The dataset (fixed seed, written once by pylance in fragments of ``--fragment-rows``):
``id`` int64, ``k`` int64 uniform in ``[0, rows)`` (high cardinality: BTREE), ``cat``
string with 100 distinct values (BITMAP). It is copied so each engine builds and queries
its own indices. Measured, in this process, one after the other:

* build: ``create_scalar_index("k", "BTREE")`` and ``create_scalar_index("cat", "BITMAP")``;
* query (fastest of ``--repeat``, each on a freshly opened dataset, so index loading is
  included): ``k = <v>`` (point), ``k BETWEEN <lo> AND <hi>`` (~0.01% of rows) and
  ``cat = 'category_042'`` (1%), each with our index, pylance's index and our full scan
  (same filter, no index).

Prints seconds and the ours / pylance and index / full-scan ratios, and checks that every
engine returned the same number of rows.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import fmt_ratio, fmt_seconds, print_table

SEED = 7


def make_table(rows: int) -> pa.Table:
    """The benchmark table from a fixed seed."""
    rng = np.random.default_rng(SEED)
    cats = np.array([f"category_{i:03d}" for i in range(100)], dtype=object)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "k": pa.array(rng.integers(0, rows, rows, dtype=np.int64)),
        "cat": pa.array(cats[rng.integers(0, 100, rows)], pa.string()),
    })


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fragment-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--storage-version", default="2.2")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()

    import lance

    import lance_format
    from lance_format.sql import to_expression

    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_index_"))
    ours_path, theirs_path = str(scratch / "ours.lance"), str(scratch / "theirs.lance")
    for p in (ours_path, theirs_path):
        shutil.rmtree(p, ignore_errors=True)
    table = make_table(args.rows)
    lance.write_dataset(table, ours_path, max_rows_per_file=args.fragment_rows,
                        data_storage_version=args.storage_version)
    shutil.copytree(ours_path, theirs_path)
    print(f"{args.rows:,} rows in {-(-args.rows // args.fragment_rows)} fragments, "
          f"storage {args.storage_version}, scratch {scratch}")

    rows: list[list[str]] = []
    for column, kind in (("k", "BTREE"), ("cat", "BITMAP")):
        t_ours, _ = _time(lambda c=column, k=kind: lance_format.dataset(ours_path).create_scalar_index(c, k), 1)
        t_theirs, _ = _time(lambda c=column, k=kind: lance.dataset(theirs_path).create_scalar_index(c, k), 1)
        rows.append([f"build {kind} on {column}", fmt_seconds(t_ours), fmt_seconds(t_theirs),
                     fmt_ratio(t_ours, t_theirs), "-", "-", "-"])

    rng = np.random.default_rng(SEED + 1)
    point = int(table.column("k")[int(rng.integers(0, args.rows))].as_py())  # a value that occurs
    del table
    lo = int(rng.integers(0, max(1, args.rows - args.rows // 10_000)))
    queries = [("point k", f"k = {point}"), ("range k", f"k BETWEEN {lo} AND {lo + args.rows // 10_000}"),
               ("bitmap cat", "cat = 'category_042'")]
    for label, flt in queries:
        t_ours, n_ours = _time(lambda f=flt: lance_format.dataset(ours_path).to_table(filter=f).num_rows,
                               args.repeat)
        t_theirs, n_theirs = _time(lambda f=flt: lance.dataset(theirs_path).to_table(filter=f).num_rows,
                                   args.repeat)
        # The same predicate as an Arrow expression: our scanner uses indices only for SQL text.
        expr = to_expression(flt, lance_format.dataset(ours_path).schema)
        t_scan, n_scan = _time(lambda e=expr: lance_format.dataset(ours_path).to_table(filter=e).num_rows, 1)
        plan = lance_format.dataset(ours_path).scanner(filter=flt).explain_plan()
        assert "ScalarIndexQuery" in plan, plan
        if not n_ours == n_theirs == n_scan:
            raise SystemExit(f"{label}: row counts differ: ours {n_ours}, pylance {n_theirs}, scan {n_scan}")
        rows.append([f"{label} ({n_ours} rows)", fmt_seconds(t_ours), fmt_seconds(t_theirs),
                     fmt_ratio(t_ours, t_theirs), fmt_seconds(t_scan), fmt_ratio(t_ours, t_scan), flt])
    print_table(["operation", "ours", "pylance", "ours/pylance", "our full scan", "index/scan", "filter"], rows)
    if args.dir is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
