"""Spark benchmark: the ``lance`` data source and Spark-run compaction, side by side with anchors.

Run from the repository root::

    python -m benchmarks.bench_spark                    # 10M rows (the benchmark table of bench_file)
    python -m benchmarks.bench_spark --rows 1000000     # quicker, for a shared machine

One run measures, on Spark ``local[2]`` (session start-up and imports not timed):

* ``groupby``: read + ``groupBy("category").avg("x")`` — Lance (``columns`` option, since the
  Python data source API has no column-pruning hook) vs Spark on Parquet (the anchor);
* ``read+write``: read the whole table and write it back (Lance → Lance overwrite vs
  Parquet → Parquet overwrite);
* ``compact``: ``lance_format.spark.compact_files`` on Spark vs pylance ``compact_files``
  (and our local one) on identical copies of a fragmented dataset with deletions.

Read queries are run ``--repeat`` times in the same session (fastest shown: the JVM warms
up). Every engine runs in its own process; each result is checked (row counts / group
count) so a fast wrong answer cannot pass. Targets (issue 10): Lance/Parquet ≤ 1.0 and
Spark compaction / pylance ≤ 1.0.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child

MODULE = "benchmarks.bench_spark"


def _generate(workdir: Path, rows: int, fragments: int) -> dict[str, Any]:
    import lance
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import lance_format
    from benchmarks.bench_file import make_table

    table = make_table(rows)
    lance_format.write_dataset(table, str(workdir / "table.lance"))
    pq.write_table(table, str(workdir / "table.parquet"))
    # Compaction input: small fragments, 10% of rows deleted, built by pylance and copied.
    small = table.select(["id", "x", "category"])
    frag = str(workdir / "frag.lance")
    lance.write_dataset(small, frag, max_rows_per_file=max(1, rows // fragments))
    lance.dataset(frag).delete("id % 10 = 0")
    for name in ("frag_spark.lance", "frag_pylance.lance", "frag_local.lance"):
        shutil.copytree(frag, workdir / name)
    return {"rows": rows, "groups": len(pc.unique(table.column("category")))}


def _session() -> Any:
    from lance_format.spark import local_session

    spark = local_session("local[2]", shuffle_partitions=2, conf={"spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _child(engine: str, workdir: Path, repeat: int, rows: int, groups: int) -> None:
    result: dict[str, Any] = {"engine": engine}
    if engine == "pylance":
        import lance

        ds = lance.dataset(str(workdir / "frag_pylance.lance"))
        t0 = time.perf_counter()
        metrics = ds.optimize.compact_files()
        result["compact"] = time.perf_counter() - t0
        result["compact_fragments_added"] = metrics.fragments_added
        assert lance.dataset(str(workdir / "frag_pylance.lance")).count_rows() == rows - -(-rows // 10)
        emit(result)
        return
    if engine == "local":
        import lance_format

        ds = lance_format.dataset(str(workdir / "frag_local.lance"))
        t0 = time.perf_counter()
        metrics = ds.optimize.compact_files()
        result["compact"] = time.perf_counter() - t0
        result["compact_fragments_added"] = metrics.fragments_added
        emit(result)
        return
    spark = _session()
    try:
        if engine == "lance":
            src = str(workdir / "table.lance")

            def groupby() -> Any:
                df = spark.read.format("lance").option("columns", "category,x").load(src)
                return df.groupBy("category").avg("x").collect()

            def read_write() -> int:
                out = str(workdir / "out.lance")
                spark.read.format("lance").load(src).write.format("lance").mode("overwrite").save(out)
                import lance_format

                return lance_format.dataset(out).count_rows()
        else:
            src = str(workdir / "table.parquet")

            def groupby() -> Any:
                return spark.read.parquet(src).groupBy("category").avg("x").collect()

            def read_write() -> int:
                out = str(workdir / "out.parquet")
                spark.read.parquet(src).write.mode("overwrite").parquet(out)
                return int(spark.read.parquet(out).count())

        result["groupby"], out = _best(groupby, repeat)
        assert len(out) == groups, out
        result["read+write"], n = _best(read_write, 1)
        assert n == rows, n
        if engine == "lance":
            from lance_format.spark import compact_files

            t0 = time.perf_counter()
            metrics = compact_files(spark, str(workdir / "frag_spark.lance"))
            result["compact"] = time.perf_counter() - t0
            result["compact_fragments_added"] = metrics.fragments_added
    finally:
        spark.stop()
    emit(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fragments", type=int, default=100, help="fragments of the compaction input")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the read query (fastest is shown)")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], Path(args.child[1]), args.repeat, args.rows, args.groups)
        return 0
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_spark_"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        print(f"generating {args.rows:,} rows ...", flush=True)
        gen = run_child(MODULE, ["--child", "generate", str(workdir), "--rows", str(args.rows),
                                 "--fragments", str(args.fragments)])
        if "error" in gen:
            print(f"data generation failed: {gen['error']}")
            return 1
        results: dict[str, dict[str, Any]] = {}
        for engine in ("lance", "parquet", "pylance", "local"):
            res = run_child(MODULE, ["--child", engine, str(workdir), "--rows", str(args.rows),
                                     "--repeat", str(args.repeat), "--groups", str(gen["groups"])])
            results[engine] = res
            print(f"  {engine:8s} {res}", flush=True)
        _report(results, args.rows)
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _report(results: dict[str, dict[str, Any]], rows: int) -> None:
    lance_r, parquet, pylance, local = (results[k] for k in ("lance", "parquet", "pylance", "local"))
    print(f"\nSpark local[2] benchmark, {rows:,} rows (seconds)\n")
    table = []
    for op in ("groupby", "read+write"):
        table.append([op, fmt_seconds(lance_r.get(op)), fmt_seconds(parquet.get(op)), "-", "-",
                      fmt_ratio(lance_r.get(op), parquet.get(op))])
    table.append(["compact", fmt_seconds(lance_r.get("compact")), "-", fmt_seconds(pylance.get("compact")),
                  fmt_seconds(local.get("compact")), fmt_ratio(lance_r.get("compact"), pylance.get("compact"))])
    print_table(["operation", "lance on Spark", "Parquet on Spark", "pylance", "ours local",
                 "ratio (lance/Parquet; Spark/pylance)"], table)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1:3] == ["--child", "generate"]:
        parsed = argparse.ArgumentParser()
        parsed.add_argument("--child", nargs=2)
        parsed.add_argument("--rows", type=int)
        parsed.add_argument("--fragments", type=int)
        ns = parsed.parse_args()
        emit(_generate(Path(ns.child[1]), ns.rows, ns.fragments))
    else:
        sys.exit(main())
