"""Multivector ``nearest=`` (late interaction) side by side with pylance 14.0.2.

Data: ``--rows`` rows of 1-8 float32 vectors of 64 dimensions (``list<fixed_size_list>``), in
fragments of 25,000 rows, written once by pylance. Measured, each engine in a fresh process,
alternating (ours, pylance, ours, pylance, ...), median of ``--repeat``:

* ``flat``: a 4×64 query, k=10, no index (cold: first query of the opened dataset);
* ``build``: ``create_index("mv", "IVF_PQ", metric="cosine", num_partitions=64, num_sub_vectors=16)``;
* ``ann``: a 4×64 query through that index (nprobes=8; warm: best of 5 after the first).

Run: ``.venv/bin/python -m benchmarks.bench_multivector --rows 50000 --repeat 3``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.common import emit, run_child

DIM = 64


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(0)
    lens = rng.integers(1, 9, rows)
    vals = rng.standard_normal((int(lens.sum()), DIM)).astype(np.float32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    col = pa.ListArray.from_arrays(offsets, pa.FixedSizeListArray.from_arrays(pa.array(vals.ravel()), DIM))
    return pa.table({"id": pa.array(np.arange(rows)), "mv": col})


def _open(engine: str, path: str) -> Any:
    if engine == "ours":
        import lance_format

        return lance_format.dataset(path)
    import lance

    return lance.dataset(path)


def _query() -> np.ndarray[Any, Any]:
    return np.random.default_rng(1).standard_normal((4, DIM)).astype(np.float32)


def child(argv: list[str]) -> None:
    what, engine, path = argv[0], argv[1], argv[2]
    if what == "build":
        dst = argv[3]
        shutil.copytree(path, dst)
        ds = _open(engine, dst)
        t0 = time.perf_counter()
        ds.create_index("mv", "IVF_PQ", metric="cosine", num_partitions=64, num_sub_vectors=16)
        emit({"seconds": time.perf_counter() - t0})
        return
    ds = _open(engine, path)
    nearest = {"column": "mv", "q": _query(), "k": 10}
    if what == "ann":
        nearest["nprobes"] = 8
    else:
        nearest["use_index"] = False
        nearest["metric"] = "cosine"
    t0 = time.perf_counter()
    first = ds.to_table(nearest=nearest, columns=["id"])
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(5 if what == "ann" else 0):
        t0 = time.perf_counter()
        ds.to_table(nearest=nearest, columns=["id"])
        warm.append(time.perf_counter() - t0)
    emit({"seconds": min(warm) if warm else cold, "ids": first["id"].to_pylist()})


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import lance

    root = Path(tempfile.mkdtemp(prefix="bench_mv_"))
    try:
        src = str(root / "src.lance")
        lance.write_dataset(make_table(args.rows), src, max_rows_per_file=25_000)
        indexed = str(root / "indexed.lance")
        shutil.copytree(src, indexed)
        lance.dataset(indexed).create_index("mv", "IVF_PQ", metric="cosine", num_partitions=64, num_sub_vectors=16)
        print(f"rows={args.rows} dim={DIM} repeat={args.repeat}")
        for what, path in (("flat", src), ("build", src), ("ann", indexed)):
            times: dict[str, list[float]] = {"ours": [], "pylance": []}
            ids: dict[str, Any] = {}
            for i in range(args.repeat):
                for engine in ("ours", "pylance"):
                    extra = [str(root / f"b_{engine}_{i}.lance")] if what == "build" else []
                    res = run_child("benchmarks.bench_multivector", ["--child", what, engine, path, *extra])
                    if "error" in res:
                        raise SystemExit(f"{what} {engine}: {res['error']}")
                    times[engine].append(res["seconds"])
                    ids[engine] = res.get("ids")
            ours, theirs = statistics.median(times["ours"]), statistics.median(times["pylance"])
            same = "" if ids["ours"] is None else f"  same rows: {ids['ours'] == ids['pylance']}"
            print(f"{what:6s} ours {ours:8.3f}s  pylance {theirs:8.3f}s  ratio {ours / theirs:6.2f}x{same}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
