"""Vector index build benchmark: our IVF_PQ (and IVF_HNSW_SQ) ``create_index`` vs pylance's.

Run from the repository root::

    python -m benchmarks.bench_vector_build                    # 100,000 x 128, 64 partitions, IVF_PQ
    python -m benchmarks.bench_vector_build --kinds IVF_PQ IVF_HNSW_SQ --rows 200000

The data are :mod:`benchmarks.bench_vector`'s (clustered float32 vectors written once by pylance
in 10 fragments). Every build runs in a fresh process on a fresh copy of the data; the engines
alternate (ours, pylance, ours, ...) so machine load hits both alike; each line is the median
of ``--repeat`` builds and the ratio ours / pylance. ``recall`` is recall@10 (l2, nprobes 10)
of the built index against exact search, measured once per engine with pylance's search, so
only the build differs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_vector import exact_ids, query_vectors, write_data
from benchmarks.common import emit, fmt_ratio, fmt_seconds, print_table, run_child

ENGINES = ("ours", "pylance")
K = 10


def child_build(engine: str, src: str, dst: str, index_type: str, params: dict[str, Any],
                queries: str | None) -> dict[str, Any]:
    """Copy ``src`` to ``dst`` (untimed), build the index, then (optionally) pylance's recall ids."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    if engine == "ours":
        import lance_format
        ds: Any = lance_format.dataset(dst)
    else:
        import lance
        ds = lance.dataset(dst)
    t0 = time.perf_counter()
    ds.create_index("vec", index_type, **params)
    out: dict[str, Any] = {"seconds": time.perf_counter() - t0}
    if queries is not None:
        import lance

        pds = lance.dataset(dst)
        out["ids"] = [pds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": K, "nprobes": 10})
                      .column("id").to_pylist() for q in np.load(queries)]
    return out


def _child(**kw: Any) -> dict[str, Any]:
    out = run_child("benchmarks.bench_vector_build", ["--child", json.dumps(kw)])
    if "error" in out:
        print(f"  ! {kw.get('engine')} {kw.get('index_type')}: {out['error']}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    """Parse arguments, write the data once, time every build and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--sub-vectors", type=int, default=16)
    ap.add_argument("--kinds", nargs="+", default=["IVF_PQ"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if args.child:
        emit(child_build(**json.loads(args.child)))
        return
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_vector_build_"))
    src = str(work / "data.lance")
    if not Path(src).exists():
        write_data(src, args.rows, max(1, args.rows // 10))
    qs = query_vectors()
    qpath = str(work / "queries.npy")
    np.save(qpath, qs)
    truth, _ = exact_ids(src, qs)
    rows = []
    for kind in args.kinds:
        params: dict[str, Any] = {"num_partitions": args.partitions, "metric": "l2"}
        if kind.endswith("PQ"):
            params["num_sub_vectors"] = args.sub_vectors
        times: dict[str, list[float]] = {e: [] for e in ENGINES}
        recalls: dict[str, float] = {}
        for i in range(args.repeat):
            for engine in ENGINES:
                out = _child(engine=engine, src=src, dst=str(work / f"{engine}.lance"), index_type=kind,
                             params=params, queries=qpath if i == 0 else None)
                if "seconds" in out:
                    times[engine].append(out["seconds"])
                if "ids" in out:
                    found = out["ids"]
                    recalls[engine] = float(np.mean([len(set(f) & set(t)) / K for f, t in
                                                     zip(found, truth, strict=True)]))
        med = {e: statistics.median(v) if v else None for e, v in times.items()}
        rows.append([f"build {kind}", fmt_seconds(med["ours"]), fmt_seconds(med["pylance"]),
                     fmt_ratio(med["ours"], med["pylance"]),
                     f"{recalls.get('ours', float('nan')):.3f}", f"{recalls.get('pylance', float('nan')):.3f}"])
    print(f"\n{args.rows:,} x 128 float32, {args.partitions} partitions, median of {args.repeat}")
    print_table(["what", "ours", "pylance", "ratio", "recall ours", "recall pylance"], rows)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
