"""Spark benchmark: the ``lance`` data source side by side with its two anchors, in one run.

Run from the repository root::

    python -m benchmarks.bench_spark                          # 2M rows, file versions 2.0 and 2.2
    python -m benchmarks.bench_spark --rows 10000000 --rounds 3 --versions 2.0

Engines, each in a fresh process with its own Spark ``local[2]`` session, run interleaved
(the order rotates every round) and every number is the median over ``--rounds`` rounds:

* ``ours-<v>``: this package's ``lance`` source on a table written in Lance file version ``v``;
* ``pylance-<v>``: the anchor, :class:`PylanceSource` below — a ~60-line Python data source
  backed by pylance (one input partition per fragment, ``get_fragment(i).to_batches(columns=)``
  yielding Arrow batches; writes with ``lance.fragment.write_fragments`` + one commit);
* ``parquet``: Spark's own Parquet reader and writer on the same rows.

Python workers: ours fork from :mod:`lance_format.spark.daemon` (what
:func:`lance_format.spark.local_session` sets up: the source's modules, pyarrow and pandas
preloaded once per session), the anchors' from PySpark's default daemon; ``--daemon none``
gives every engine PySpark's daemon. Every process reads compiled bytecode (a private
``PYTHONPYCACHEPREFIX``), as an installed package would.

Lines: ``groupby`` (read + ``groupBy(category).avg(x)``), ``groupby cols`` (the same with the
``columns=category,x`` option; Parquet prunes by itself), ``filter count``
(``filter(x > 0.9).count()``), ``read+write`` (read all, write back as a new dataset). Each
line shows wall seconds and CPU seconds of the engine's whole process tree (driver, JVM and
Python workers, from ``/proc``), and the ratios ours / pylance-source and ours / Parquet
(CPU, the steadier number on a loaded machine; wall in brackets). Within a process each
query runs ``--repeat`` times and the fastest counts (the JVM warms up). Results are checked
(group count, row counts) so a fast wrong answer cannot pass.

``local-write`` (a fresh process per round, no Spark) times what a Spark write task does —
:func:`lance_format.spark.writer.write_task` over the rows in Spark's Arrow form — against a
local ``lance_format.write_dataset`` and pylance ``write_dataset`` of the same rows.
``--compact`` then runs the compaction lines of :mod:`benchmarks.bench_maintenance` (the one
place compaction is measured: ours locally and on Spark ``local[1]`` / ``local[2]``, pylance)
on ``--rows`` rows in ``--fragments`` fragments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child, tree_cpu

MODULE = "benchmarks.bench_spark"
QUERIES = ("groupby", "groupby cols", "filter count", "read+write")


# --- The anchor: a minimal pylance-backed Python data source --------------------------------


class PylanceSource(DataSource):
    """``spark.read.format("pylance_anchor")``: pylance reads, one partition per fragment."""

    @classmethod
    def name(cls) -> str:
        return "pylance_anchor"

    def schema(self) -> Any:
        import lance
        from pyspark.sql.pandas.types import from_arrow_schema

        arrow = lance.dataset(self.options["path"]).schema
        if self.options.get("columns"):
            arrow = pa.schema([arrow.field(c) for c in self.options["columns"].split(",")])
        return from_arrow_schema(arrow)

    def reader(self, schema: Any) -> PylanceReader:
        return PylanceReader(self.options["path"], schema)

    def writer(self, schema: Any, overwrite: bool) -> PylanceWriter:
        return PylanceWriter(self.options["path"], schema)


class PylanceReader(DataSourceReader):
    def __init__(self, uri: str, schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.uri, self.columns = uri, schema.fieldNames()
        self.target = to_arrow_schema(schema, timezone="UTC")

    def partitions(self) -> list[InputPartition]:
        import lance

        return [InputPartition(f.fragment_id) for f in lance.dataset(self.uri).get_fragments()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import lance

        fragment = lance.dataset(self.uri).get_fragment(partition.value)
        for batch in fragment.to_batches(columns=self.columns):
            yield batch.cast(self.target)  # Spark checks the exact Arrow types (vectors become lists)


@dataclass(frozen=True)
class PylanceFragments(WriterCommitMessage):
    fragments: tuple[str, ...]  # FragmentMetadata.to_json() of each fragment a task wrote


class PylanceWriter(DataSourceArrowWriter):
    def __init__(self, uri: str, schema: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.uri, self.schema = uri, to_arrow_schema(schema, timezone="UTC")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PylanceFragments:
        import json

        from lance.fragment import write_fragments

        reader = pa.RecordBatchReader.from_batches(self.schema, iterator)
        frags = write_fragments(reader, self.uri, schema=self.schema, mode="overwrite")
        return PylanceFragments(tuple(json.dumps(f.to_json()) for f in frags))

    def commit(self, messages: list[Any]) -> None:
        import lance
        from lance.fragment import FragmentMetadata

        frags = [FragmentMetadata.from_json(j) for m in messages for j in m.fragments]
        lance.LanceDataset.commit(self.uri, lance.LanceOperation.Overwrite(self.schema, frags))


# --- Measuring --------------------------------------------------------------------------------


def _measure(fn: Any, repeat: int) -> tuple[float, float, Any]:
    """Fastest ``(wall, cpu)`` of ``repeat`` runs (CPU of the run with the least CPU), and the result."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        c0, t0 = tree_cpu(), time.perf_counter()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, tree_cpu() - c0)
    return wall, cpu, out


def _generate(workdir: Path, rows: int, versions: list[str]) -> dict[str, Any]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import lance_format
    from benchmarks.bench_file import make_table

    table = make_table(rows)
    for v in versions:
        lance_format.write_dataset(table, str(workdir / f"table-{v}.lance"), data_storage_version=v)
    pq.write_table(table, str(workdir / "table.parquet"))
    return {"rows": rows, "groups": len(pc.unique(table.column("category")))}


#: ``--daemon``: which engines' Python workers fork from :mod:`lance_format.spark.daemon` (ours
#: preloads the source's modules, pyarrow and pandas); the others use PySpark's default daemon,
#: as their users would.
DAEMONS = {"ours": ("ours",), "none": ()}


def _session(kind: str, daemon: str) -> Any:
    from lance_format.spark import local_session
    from lance_format.spark.session import DAEMON_MODULE_KEY

    conf = {"spark.driver.memory": "4g"}
    if kind not in DAEMONS[daemon]:
        conf[DAEMON_MODULE_KEY] = "pyspark.daemon"
    spark = local_session("local[2]", shuffle_partitions=2, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PylanceSource)
    return spark


def _spark_child(engine: str, workdir: Path, repeat: int, rows: int, groups: int,
                 lines: tuple[str, ...] = QUERIES, daemon: str = "ours") -> dict[str, Any]:
    from pyspark.sql import functions as F

    kind, _, version = engine.partition("-")
    spark = _session(kind, daemon)
    src = str(workdir / (f"table-{version}.lance" if version else "table.parquet"))
    out = workdir / f"out-{engine}-{os.getpid()}"

    def load(columns: str | None = None) -> Any:
        if kind == "parquet":
            df = spark.read.parquet(src)
            return df.select(*columns.split(",")) if columns else df
        reader = spark.read.format("lance" if kind == "ours" else "pylance_anchor")
        return (reader.option("columns", columns) if columns else reader).load(src)

    def read_write() -> int:
        shutil.rmtree(out, ignore_errors=True)
        if kind == "parquet":
            load().write.mode("overwrite").parquet(str(out))
            return int(spark.read.parquet(str(out)).count())
        load().write.format("lance" if kind == "ours" else "pylance_anchor").mode("overwrite").save(str(out))
        import lance

        return int(lance.dataset(str(out)).count_rows())

    queries = {
        "groupby": lambda: load().groupBy("category").avg("x").collect(),
        "groupby cols": lambda: load("category,x").groupBy("category").avg("x").collect(),
        "filter count": lambda: load().filter(F.col("x") > 0.9).count(),
        "read+write": read_write,
    }
    result: dict[str, Any] = {"engine": engine}
    try:
        for name, fn in queries.items():
            if name not in lines:
                continue
            wall, cpu, value = _measure(fn, repeat if name != "read+write" else 1)
            if name.startswith("groupby"):
                assert len(value) == groups, value
            elif name == "read+write":
                assert value == rows, value
            result[name] = {"wall": wall, "cpu": cpu}
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
    return result


def _local_write_child(workdir: Path, version: str) -> dict[str, Any]:
    import lance
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    import lance_format
    from lance_format.spark.options import WriteOptions
    from lance_format.spark.types import spark_schema, write_schema
    from lance_format.spark.writer import plan_write, write_task

    table = pq.read_table(str(workdir / "table.parquet"))
    spark = spark_schema(table.schema)  # as a DataFrame read from Lance: vectors carry their size
    spark_arrow = to_arrow_schema(spark, timezone="UTC")
    batches = table.cast(spark_arrow).to_batches(max_chunksize=10_000)  # Spark's Arrow batches
    result: dict[str, Any] = {"engine": f"local-write-{version}"}

    def timed(name: str, fn: Any) -> None:
        out = workdir / f"lw-{name}-{os.getpid()}.lance"
        c0, t0 = tree_cpu(), time.perf_counter()
        fn(str(out))
        result[name] = {"wall": time.perf_counter() - t0, "cpu": tree_cpu() - c0}
        shutil.rmtree(out, ignore_errors=True)

    def task(uri: str) -> None:
        opts = WriteOptions.parse({"path": uri, "data_storage_version": version}, overwrite=True)
        plan = plan_write(opts, write_schema(spark))
        write_task(plan, iter(batches))

    timed("spark task", task)
    timed("ours write_dataset", lambda uri: lance_format.write_dataset(table, uri, data_storage_version=version))
    timed("pylance write_dataset", lambda uri: lance.write_dataset(table, uri, data_storage_version=version))
    return result


def _child(args: argparse.Namespace) -> None:
    engine, workdir = args.child[0], Path(args.child[1])
    if engine == "generate":
        emit(_generate(workdir, args.rows, args.versions.split(",")))
    elif engine.startswith("local-write-"):
        emit(_local_write_child(workdir, engine.removeprefix("local-write-")))
    else:
        emit(_spark_child(engine, workdir, args.repeat, args.rows, args.groups, tuple(args.lines.split(",")),
                          args.daemon))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--versions", default="2.0,2.2", help="Lance file versions of the tables read")
    parser.add_argument("--rounds", type=int, default=3, help="fresh-process rounds (medians are shown)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each read query per process (fastest)")
    parser.add_argument("--engines", default=None, help="comma-separated subset: ours,pylance,parquet,local-write")
    parser.add_argument("--lines", default=",".join(QUERIES),
                        help="comma-separated subset of the Spark lines (e.g. read+write)")
    parser.add_argument("--compact", action="store_true", help="also bench_maintenance's compaction lines")
    parser.add_argument("--fragments", type=int, default=100, help="fragments of the compaction input")
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed after)")
    parser.add_argument("--daemon", choices=sorted(DAEMONS), default="ours",
                        help="ours: our engine's workers fork from lance_format.spark.daemon (local_session's "
                             "default), the anchors' from PySpark's; none: every engine uses PySpark's daemon")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--groups", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    versions = args.versions.split(",")
    kinds = set((args.engines or "ours,pylance,parquet,local-write").split(","))
    engines = [f"{k}-{v}" for v in versions for k in ("ours", "pylance") if k in kinds]
    engines += ["parquet"] if "parquet" in kinds else []
    engines += [f"local-write-{v}" for v in versions] if "local-write" in kinds else []
    workdir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_spark_"))
    workdir.mkdir(parents=True, exist_ok=True)
    common = ["--rows", str(args.rows), "--versions", args.versions, "--repeat", str(args.repeat),
              "--lines", args.lines, "--daemon", args.daemon]
    # Every child and Spark worker reads compiled bytecode, as from an installed package (a checkout
    # run with PYTHONDONTWRITEBYTECODE would recompile our modules in every fresh worker).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    try:
        print(f"generating {args.rows:,} rows ...", flush=True)
        gen = run_child(MODULE, ["--child", "generate", str(workdir), *common])
        if "error" in gen:
            print(f"data generation failed: {gen['error']}")
            return 1
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        for rnd in range(args.rounds):
            shift = rnd % len(engines)
            for engine in engines[shift:] + engines[:shift]:  # interleaved, order rotating
                res = run_child(MODULE, ["--child", engine, str(workdir), *common, "--groups", str(gen["groups"])])
                runs[engine].append(res)
                print(f"  round {rnd + 1} {engine:16s} {_short(res)}", flush=True)
        _report(runs, args.rows, versions)
        if args.compact:
            from benchmarks import bench_maintenance

            bench_maintenance.main(["--ops", "compact", "--rows", str(args.rows), "--fragments", str(args.fragments),
                                    "--repeat", str(args.rounds)])
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _short(res: dict[str, Any]) -> str:
    if "error" in res:
        return f"error: {res['error']}"
    return "  ".join(f"{k}={v['wall']:.2f}s/{v.get('cpu', 0):.2f}cpu" for k, v in res.items()
                     if isinstance(v, dict))


def _median(runs: list[dict[str, Any]], line: str, key: str) -> float | None:
    values = [r[line][key] for r in runs if isinstance(r.get(line), dict) and key in r[line]]
    return statistics.median(values) if values else None


def _report(runs: dict[str, list[dict[str, Any]]], rows: int, versions: list[str]) -> None:
    parquet = runs.get("parquet", [])
    print(f"\nSpark local[2], {rows:,} rows, medians of {max(map(len, runs.values()))} fresh-process rounds "
          "(wall s / CPU s of the process tree)\n")
    table = []
    for v in versions:
        ours, anchor = runs.get(f"ours-{v}", []), runs.get(f"pylance-{v}", [])
        for line in QUERIES:
            o, a, p = ((_median(r, line, "wall"), _median(r, line, "cpu")) for r in (ours, anchor, parquet))
            table.append([f"{line} ({v})", _cell(o), _cell(a), _cell(p),
                          f"{fmt_ratio(o[1], a[1])} [{fmt_ratio(o[0], a[0])}]",
                          f"{fmt_ratio(o[1], p[1])} [{fmt_ratio(o[0], p[0])}]"])
    print_table(["line", "ours", "pylance source", "Spark+Parquet", "ours/pylance CPU [wall]",
                 "ours/Parquet CPU [wall]"], table)
    local = [(v, runs.get(f"local-write-{v}", [])) for v in versions]
    if any(r for _, r in local):
        print("\nWhat one Spark write task does, locally (no Spark), same rows\n")
        rows_out = []
        for v, r in local:
            task, ours_w, py_w = (_median(r, k, "wall") for k in
                                  ("spark task", "ours write_dataset", "pylance write_dataset"))
            rows_out.append([v, fmt_seconds(task), fmt_seconds(ours_w), fmt_seconds(py_w),
                             fmt_ratio(task, ours_w), fmt_ratio(task, py_w)])
        print_table(["version", "write_task", "ours write_dataset", "pylance write_dataset",
                     "task/ours", "task/pylance"], rows_out)


def _cell(pair: tuple[float | None, float | None]) -> str:
    wall, cpu = pair
    return f"{fmt_seconds(wall)} / {fmt_seconds(cpu)}"


if __name__ == "__main__":
    import sys

    sys.exit(main())
