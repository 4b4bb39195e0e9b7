"""Table-evolution benchmarks: lance_format side by side with pylance, in one run.

Run from the repository root::

    python -m benchmarks.bench_evolution                    # 10,000,000 rows (issue 11 sizes)
    python -m benchmarks.bench_evolution --rows 1000000     # smaller, for a shared machine

Both engines start from byte-identical copies of one dataset (written once by pylance,
``--rows`` rows in 1M-row fragments: ``id`` int64, ``v`` float64, ``s`` short strings)
and then run, each step timed on its own copy:

* ``merge_insert``: upsert of ``rows / 10`` source rows, 10% of which match existing ids
  (``when_matched_update_all().when_not_matched_insert_all()``);
* ``add_columns``: a computed column ``w = v * 2`` over every row;
* ``update``: ``v = v + 1`` on 1% of the rows (``id % 100 = 0``).

The engines alternate step by step so machine load hits both alike; each step is run
``--repeat`` times on fresh copies and the median is reported. Ratio = ours / pylance
(target: <= 1.0). After each step both engines' results are read back by pylance and
compared, so a fast but wrong run does not count.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROWS_PER_FILE = 1024 * 1024


def _base_table(rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    return pa.table({
        "id": ids,
        "v": rng.random(rows),
        "s": pa.array(np.char.add("s", (ids % 1000).astype(str)).astype(object)),
    })


def _source(rows: int, seed: int = 11) -> pa.Table:
    """``rows / 10`` rows: 10% reuse existing ids (matches), 90% are new ids."""
    rng = np.random.default_rng(seed)
    n = max(1, rows // 10)
    matched = rng.choice(rows, size=max(1, n // 10), replace=False).astype(np.int64)
    fresh = np.arange(rows, rows + n - matched.size, dtype=np.int64)
    ids = np.concatenate([matched, fresh])
    return pa.table({"id": ids, "v": rng.random(ids.size), "s": pa.array(["m"] * ids.size)})


def _engines() -> dict[str, Any]:
    import lance

    import lance_format

    return {"lance_format": lance_format, "pylance": lance}


def _merge(mod: Any, uri: str, source: pa.Table) -> Any:
    return mod.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all() \
        .execute(source)


def _add(mod: Any, uri: str, _source: pa.Table) -> Any:
    return mod.dataset(uri).add_columns({"w": "v * 2"})


def _update(mod: Any, uri: str, _source: pa.Table) -> Any:
    return mod.dataset(uri).update({"v": "v + 1"}, where="id % 100 = 0")


STEPS: list[tuple[str, Callable[[Any, str, pa.Table], Any]]] = [
    ("merge_insert", _merge), ("add_columns", _add), ("update", _update)]


def _check_same(uris: dict[str, str]) -> str:
    import lance

    tables = {name: lance.dataset(uri).to_table().sort_by("id") for name, uri in uris.items()}
    first, *rest = tables.values()
    return "same" if all(t.equals(first) for t in rest) else "DIFFERENT"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--data-storage-version", default="2.2")
    args = parser.parse_args(argv)

    import lance

    engines = _engines()
    with tempfile.TemporaryDirectory(prefix="bench_evolution_") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        lance.write_dataset(_base_table(args.rows), str(root / "base"), max_rows_per_file=ROWS_PER_FILE,
                            data_storage_version=args.data_storage_version)
        print(f"base: {args.rows:,} rows written by pylance in {time.perf_counter() - t0:.1f}s "
              f"(storage version {args.data_storage_version})")
        # Warm-up on a tiny dataset: module imports (sqlglot, decoders) are not what is measured.
        tiny = str(root / "tiny")
        for name, mod in engines.items():
            lance.write_dataset(_base_table(100), tiny + name)
            for _step_name, fn in STEPS:
                fn(mod, tiny + name, _source(100))
        source = _source(args.rows)
        timings: dict[str, dict[str, list[float]]] = {s: {e: [] for e in engines} for s, _ in STEPS}
        checks: dict[str, str] = {}
        for step_name, fn in STEPS:
            for rep in range(args.repeat):
                uris = {}
                for name in engines:
                    uri = str(root / f"{step_name}_{name}_{rep}")
                    shutil.copytree(root / "base", uri)
                    # Earlier steps are applied untimed by pylance, so every step starts alike.
                    for prev_name, prev in STEPS:
                        if prev_name == step_name:
                            break
                        prev(lance, uri, source)
                    uris[name] = uri
                for name, mod in engines.items():
                    start = time.perf_counter()
                    fn(mod, uris[name], source)
                    timings[step_name][name].append(time.perf_counter() - start)
                checks[step_name] = _check_same(uris)
                for uri in uris.values():
                    shutil.rmtree(uri, ignore_errors=True)
        print(f"\n{'step':<14}{'lance_format':>14}{'pylance':>12}{'ratio':>9}  result")
        for step_name, _ in STEPS:
            ours = statistics.median(timings[step_name]["lance_format"])
            theirs = statistics.median(timings[step_name]["pylance"])
            print(f"{step_name:<14}{ours:>13.2f}s{theirs:>11.2f}s{ours / theirs:>8.2f}x  {checks[step_name]}")


if __name__ == "__main__":
    main()
