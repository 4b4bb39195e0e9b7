"""Maintenance benchmarks: compaction and version cleanup, lance_format side by side with pylance.

Run from the repository root::

    python -m benchmarks.bench_maintenance                     # 10M rows in 100 fragments, 200 versions
    python -m benchmarks.bench_maintenance --ops compact --rows 1000000,10000000 --slots 1,2 \
        --variants plain,indexed                               # the compaction scaling table
    python -m benchmarks.bench_maintenance --ops compact --rows 1000000 --variants plain \
        --engines ours,pylance --dir /tmp/maint              # inputs built once, reused by later runs

Every measured run is a fresh Python process; engines run interleaved (the order rotates
each round) and every figure is the median of ``--repeat`` rounds.

Compaction (``compact``): ``compact_files()`` with default options on ``--rows`` rows (each
count of the comma-separated list) in ``--fragments`` fragments with 10% of the rows deleted
(``id % 10 = 0``), columns ``id`` int64, ``x`` float64, ``y`` float32, ``category`` string
(20 values), ``text`` string (three words of a 5,000-word vocabulary), ``vec``
fixed_size_list<float32, 16>. Inputs are built once by pylance (``--storage``: data storage
versions, e.g. ``2.0,2.2``); every run gets its own copy (data and index files hard-linked:
both engines only ever add files). Both children load pandas before the timer: ``import
lance`` does, and pyarrow does on ours' first ``pa.array`` of a numpy array; ours' line
reports what that import cost it (``pandas_import``, once per process).

* variant ``plain``: no index; variant ``indexed``: BTREE on ``id``, BITMAP on ``category``,
  IVF_PQ on ``vec`` (16 partitions, 4 sub-vectors), INVERTED on ``text`` — all built by
  pylance before the deletes, so the compaction's time includes remapping each of them;
* engines: ``ours`` (``ds.optimize.compact_files()``, local threads), ``pylance``
  (``compact_files()``), ``proc`` (ours with ``ProcessRunner``), ``spark``
  (``lance_format.spark.compact_files`` in a ``local[N]`` session for each N of ``--slots``:
  one vs two task slots; start-up — the session plus a first job that starts the Python
  workers and imports ``lance_format`` in them — is timed apart from the compaction).

Each line shows wall seconds and CPU seconds of the engine's process tree, and ours /
pylance ratios. After each run the result is checked with pylance (rows; every index still
listed and covering every fragment, i.e. remapped rather than left stale), so a fast
wrong answer cannot pass. Target (issue 28): ratio ≤ 1.0, and Spark within its start-up of
the local time.

Cleanup: ``cleanup_old_versions(older_than=0)`` on a dataset of ``--versions`` versions
(appends, deletes and an overwrite every 50 versions), and on ``--files`` data files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import compile_bytecode, emit, print_table, run_child, timed, tree_cpu

MODULE = "benchmarks.bench_maintenance"
INDICES = (("id", "BTREE", {}), ("category", "BITMAP", {}),
           ("vec", "IVF_PQ", {"num_partitions": 16, "num_sub_vectors": 4}), ("text", "INVERTED", {}))


def _table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": ids.astype(np.float64) * 0.5,
                     "s": pa.array([f"s{i % 1000}" for i in range(start, start + n)])})


def _compaction_table(start: int, n: int, seed: int) -> pa.Table:
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    vocab = pa.array([f"w{i}" for i in range(5000)])
    words = [vocab.take(pa.array(rng.integers(0, 5000, n))) for _ in range(3)]
    cats = pa.array([f"category_{i:02d}" for i in range(20)])
    return pa.table({
        "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "y": pa.array(rng.random(n, dtype=np.float32)),
        "category": cats.take(pa.array(rng.integers(0, 20, n))),
        "text": pc.binary_join_element_wise(*words, " "),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 16, dtype=np.float32)), 16),
    })


def build_compaction_input(uri: str, rows: int, fragments: int, indexed: bool = False,
                           storage: str = "2.2") -> None:
    """``rows`` rows in ``fragments`` fragments (indexed: the four indices), 10% deleted; written by pylance
    in data storage version ``storage``."""
    import lance

    per = max(1, rows // fragments)

    def batches() -> Any:
        for n, start in enumerate(range(0, rows, per)):
            yield from _compaction_table(start, min(per, rows - start), n).to_batches()

    schema = _compaction_table(0, 1, 0).schema
    lance.write_dataset(pa.RecordBatchReader.from_batches(schema, batches()), uri, max_rows_per_file=per,
                        max_rows_per_group=min(per, 1024 * 1024), data_storage_version=storage)
    ds = lance.dataset(uri)
    if indexed:
        for column, kind, params in INDICES:
            if kind == "IVF_PQ":
                ds.create_index(column, kind, **params)
            else:
                ds.create_scalar_index(column, kind, **params)
    ds.delete("id % 10 = 0")


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


def _check_compacted(uri: str, indexed: bool) -> dict[str, Any]:
    """What the compaction left, read by pylance (the oracle)."""
    import lance

    ds = lance.dataset(uri)
    frags = {f.fragment_id for f in ds.get_fragments()}
    out: dict[str, Any] = {"rows": ds.count_rows(), "fragments": len(frags)}
    if indexed:
        listed = ds.list_indices()
        # remapped: the index answers for every fragment (not left naming the removed ones)
        out["indices_covering_all"] = sum(frags <= set(i["fragment_ids"]) for i in listed)
        out["indices"] = len(listed)
    return out


def _warm_worker(_: int) -> int:
    import lance_format  # noqa: F401  (what a compaction task imports first)

    return os.getpid()


def compact_child(engine: str, uri: str, indexed: bool, target_rows: int | None) -> None:
    """One compaction in this fresh process: ``ours`` / ``pylance`` / ``proc`` / ``spark-<slots>``."""
    opts: dict[str, Any] = {"target_rows_per_fragment": target_rows} if target_rows else {}
    result: dict[str, Any] = {}
    if engine.startswith("spark-"):
        from lance_format.spark import compact_files, local_session

        slots = int(engine.removeprefix("spark-"))
        t0 = time.perf_counter()
        spark = local_session(f"local[{slots}]", shuffle_partitions=slots, conf={"spark.driver.memory": "4g"})
        spark.sparkContext.setLogLevel("ERROR")
        result["session"] = time.perf_counter() - t0
        # Python workers start (and import lance_format) on a first job: counted as start-up,
        # so the compaction line is the work a long-lived session would do.
        spark.sparkContext.parallelize(range(slots), slots).map(_warm_worker).collect()
        result["startup"] = time.perf_counter() - t0
        try:
            c0, t0 = tree_cpu(), time.perf_counter()
            metrics = compact_files(spark, uri, **opts)
            result["seconds"], result["cpu"] = time.perf_counter() - t0, tree_cpu() - c0
        finally:
            spark.stop()
    else:
        if engine == "pylance":
            import lance as mod
        else:
            import lance_format as mod  # type: ignore[no-redef]
            if engine == "proc":
                from lance_format.maintenance import ProcessRunner

                opts["runner"] = ProcessRunner()
        # ``import lance`` loads pandas; pyarrow loads it on ours' first ``pa.array`` of a numpy
        # array (inside the timed call): loaded here first, so both time the compaction's work.
        # What that cost ours (once per process) is reported as ``pandas_import``.
        c0 = time.process_time()
        import pandas  # noqa: F401

        if engine != "pylance":
            result["pandas_import"] = time.process_time() - c0
        ds = mod.dataset(uri)
        c0, t0 = tree_cpu(), time.perf_counter()
        metrics = ds.optimize.compact_files(**opts)
        result["seconds"], result["cpu"] = time.perf_counter() - t0, tree_cpu() - c0
    emit({**result, "fragments_removed": metrics.fragments_removed, **_check_compacted(uri, indexed)})


def cleanup_child(op: str, engine: str, uri: str) -> None:
    """One cleanup in this fresh process; emits its figures."""
    if engine == "ours":
        import lance_format as mod
    else:
        import lance as mod  # type: ignore[no-redef]
    ds = mod.dataset(uri)
    # Ours keeps versions superseded within its commit grace (commits in flight); the
    # benchmark compares the removal pylance does, so the grace is 0 here.
    extra = {"commit_grace": dt.timedelta(0)} if engine == "ours" else {}
    c0 = time.process_time()  # the cleanup's threads are this process's: process CPU covers them
    seconds, stats = timed(lambda: ds.cleanup_old_versions(older_than=dt.timedelta(0), **extra))
    cpu = time.process_time() - c0
    emit({"seconds": seconds, "cpu": cpu, "old_versions": stats.old_versions, "bytes_removed": stats.bytes_removed,
          "versions_left": len(mod.dataset(uri).versions())})


def _fresh_copy(src: Path, dst: Path) -> None:
    """A run's private copy: data and index files hard-linked (never rewritten), the rest copied."""

    def link_or_copy(a: str, b: str) -> None:
        if f"{os.sep}data{os.sep}" in a or f"{os.sep}_indices{os.sep}" in a:
            os.link(a, b)
        else:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link_or_copy)


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def _sec(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def run_compaction(root: Path, rows_list: list[int], variants: list[str], engines: list[str],
                   args: argparse.Namespace) -> None:
    """The compaction grid: rows × variant × engine, interleaved rounds, medians, ratios."""
    lines: list[list[str]] = []
    checks: dict[str, Any] = {}
    for rows in rows_list:
        for storage, variant in [(st, v) for st in args.storage.split(",") for v in variants]:
            indexed = variant == "indexed"
            src = root / f"compact_{rows}_{variant}_{storage}"
            t0 = time.perf_counter()
            done = root / f"{src.name}.built"  # written after the build: a half-built input is rebuilt
            reuse = args.dir is not None and done.exists()
            if not reuse:
                shutil.rmtree(src, ignore_errors=True)
                build_compaction_input(str(src), rows, args.fragments, indexed, storage)
                done.touch()
            print(f"{'reused' if reuse else 'built'} {rows:,} rows / {args.fragments} fragments ({variant}, "
                  f"{storage}) in {time.perf_counter() - t0:.0f}s", flush=True)
            runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
            for rnd in range(args.repeat):
                shift = rnd % len(engines)
                for engine in engines[shift:] + engines[:shift]:
                    uri = root / f"run_{engine}"
                    shutil.rmtree(uri, ignore_errors=True)  # left by an interrupted run in a kept --dir
                    _fresh_copy(src, uri)
                    child_args = ["--compact-child", engine, str(uri), variant, str(args.target_rows or 0)]
                    res = run_child(MODULE, child_args)
                    shutil.rmtree(uri, ignore_errors=True)
                    runs[engine].append(res)
                    shown = res.get("error") or " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                                         for k, v in res.items() if k != "peak_mib")
                    print(f"  {rows:,} {variant} {storage} round {rnd + 1} {engine:8s} {shown}", flush=True)
            if args.dir is None:
                shutil.rmtree(src, ignore_errors=True)
            py_wall, py_cpu = _median(runs.get("pylance", []), "seconds"), _median(runs.get("pylance", []), "cpu")
            local = _median(runs.get("ours", []), "seconds")
            for engine in engines:
                ok = [r for r in runs[engine] if "error" not in r]
                wall, cpu, start = (_median(ok, k) for k in ("seconds", "cpu", "startup"))
                over = f"{wall - local:+.2f}s vs start-up {start:.2f}s" if start is not None and wall and local else ""
                lines.append([f"{rows:,}", variant, storage, engine, _sec(wall), _sec(cpu), _sec(start),
                              _ratio(wall, py_wall), _ratio(cpu, py_cpu), over,
                              f"{len(ok)}/{len(runs[engine])}"])
                checks[f"{rows}/{variant}/{storage}/{engine}"] = sorted({json.dumps(
                    {k: v for k, v in r.items() if k not in ("seconds", "cpu", "startup", "session", "peak_mib",
                                                              "pandas_import")}, sort_keys=True)
                    for r in runs[engine]})
    headers = ["rows", "variant", "storage", "engine", "wall s", "CPU s", "start-up s", "wall/pylance", "CPU/pylance",
               "Spark - local (vs start-up)", "ok"]
    print(f"\ncompaction, {args.fragments} fragments, 10% deleted, medians of {args.repeat} interleaved "
          f"fresh-process rounds; load {os.getloadavg()[0]:.1f}\n")
    print_table(headers, lines)
    print("\nchecks:", json.dumps(checks))


def main(argv: list[str] | None = None) -> int:
    """Build the inputs once, copy them per run, measure each engine in a child process."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="10000000", help="compaction input rows; comma-separated for a scaling table")
    p.add_argument("--fragments", type=int, default=100)
    p.add_argument("--variants", default="plain,indexed", help="plain (no index) and/or indexed (four indices)")
    p.add_argument("--storage", default="2.2", help="data storage versions of the compaction input (e.g. 2.0,2.2)")
    p.add_argument("--engines", default="ours,pylance,spark", help="compaction engines: ours,pylance,proc,spark")
    p.add_argument("--slots", default="1,2", help="Spark task slots (local[N]) for the spark engine")
    p.add_argument("--target-rows", type=int, default=None, help="target_rows_per_fragment (default pylance's)")
    p.add_argument("--versions", type=int, default=200)
    p.add_argument("--files", type=int, default=10_000, help="data files the cleanup_files line removes")
    p.add_argument("--ops", default="compact,cleanup,cleanup_files", help="comma-separated lines to run")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds per engine (median shown)")
    p.add_argument("--dir", default=None,
                   help="work directory kept between runs: compaction inputs built there are reused "
                        "(default: a fresh temporary directory, removed at the end)")
    p.add_argument("--child", nargs=3, metavar=("OP", "ENGINE", "URI"), help=argparse.SUPPRESS)
    p.add_argument("--compact-child", nargs=4, metavar=("ENGINE", "URI", "VARIANT", "TARGET"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    compile_bytecode()  # as installed: no child compiles our edited modules inside its timer
    if args.compact_child:
        engine, uri, variant, target = args.compact_child
        compact_child(engine, uri, variant == "indexed", int(target) or None)
        return 0
    if args.child:
        cleanup_child(*args.child)
        return 0
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_maint_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        ops = [o for o in args.ops.split(",") if o]
        print(f"uptime load {os.getloadavg()}; work dir {root}", flush=True)
        if "compact" in ops:
            engines: list[str] = []
            for e in args.engines.split(","):
                engines += [f"spark-{n}" for n in args.slots.split(",")] if e == "spark" else [e]
            run_compaction(root, [int(r) for r in args.rows.split(",")], args.variants.split(","), engines, args)
        table: dict[str, dict[str, dict[str, Any]]] = {}
        cleanup_runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
        if "cleanup" in ops:
            build_cleanup_input(str(root / "cleanup_src"), args.versions)
        if "cleanup_files" in ops:
            build_cleanup_files_input(str(root / "cleanup_files_src"), args.files)
        for op, src in (("cleanup", "cleanup_src"), ("cleanup_files", "cleanup_files_src")):
            if op not in ops:
                continue
            results: dict[str, list[dict[str, Any]]] = {"pylance": [], "ours": []}
            for i in range(args.repeat):
                # alternate which engine goes first so a warm page cache does not favour one
                for engine in ("pylance", "ours") if i % 2 == 0 else ("ours", "pylance"):
                    uri = str(root / f"{op}_{engine}")
                    shutil.copytree(root / src, uri)  # copy2: modification times kept
                    results[engine].append(run_child(MODULE, ["--child", op, engine, uri]))
                    shutil.rmtree(uri, ignore_errors=True)
                    r = results[engine][-1]
                    print(f"  {op} {engine}: " + (f"{r['seconds']:.3f}s wall, {r['cpu']:.3f}s CPU" if "error" not in r
                                                  else r["error"]), flush=True)
            table[op] = {}
            cleanup_runs[op] = results
            for engine, got in results.items():
                ok = sorted((r for r in got if "error" not in r), key=lambda r: r["seconds"])
                # the median run; the first error when any run failed
                table[op][engine] = ok[len(ok) // 2] if len(ok) == len(got) else next(r for r in got if "error" in r)
        if table:
            print(f"\nmedian of {args.repeat}, fresh process per run, engines interleaved "
                  f"(ours/pylance of the medians; CPU = the process's, cleanup threads included)")
            print(f"{'':<14} {'ours':>10} {'pylance':>10} {'ratio':>8} {'ours CPU':>9} {'py CPU':>9} {'CPU ratio':>9} "
                  f"{'ours MiB':>9} {'py MiB':>9}")
            for op in table:
                print(_cleanup_row(op, table[op], cleanup_runs[op]))
            print("\nchecks:", json.dumps({op: {e: {k: v for k, v in r.items() if k not in ("seconds", "peak_mib")}
                                                 for e, r in res.items()} for op, res in table.items()}))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def _cleanup_row(name: str, results: dict[str, dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> str:
    ours, theirs = results["ours"], results["pylance"]
    if "error" in ours or "error" in theirs:
        return _row(name, results)
    med = {e: {k: statistics.median(r[k] for r in got) for k in ("seconds", "cpu")} for e, got in runs.items()}
    o, t = med["ours"], med["pylance"]
    return (f"{name:<14} {o['seconds']:>9.2f}s {t['seconds']:>9.2f}s {o['seconds'] / t['seconds']:>7.2f}x "
            f"{o['cpu']:>8.2f}s {t['cpu']:>8.2f}s {o['cpu'] / t['cpu']:>8.2f}x "
            f"{ours['peak_mib']:>9.0f} {theirs['peak_mib']:>9.0f}")


def _row(name: str, results: dict[str, dict[str, Any]]) -> str:
    ours, theirs = results["ours"], results["pylance"]
    if "error" in ours or "error" in theirs:
        return f"{name:<14} ours: {ours.get('error', ours.get('seconds'))}  pylance: {theirs.get('error', theirs.get('seconds'))}"
    ratio = ours["seconds"] / theirs["seconds"] if theirs["seconds"] else float("inf")
    return (f"{name:<14} {ours['seconds']:>9.2f}s {theirs['seconds']:>9.2f}s {ratio:>7.2f}x "
            f"{ours['peak_mib']:>9.0f} {theirs['peak_mib']:>9.0f}")


if __name__ == "__main__":
    sys.exit(main())
