"""Full-text benchmark: our INVERTED build and ``full_text_query=`` latency vs pylance's, side by side.

Run from the repository root::

    python -m benchmarks.bench_fts --rows 100000
    python -m benchmarks.bench_fts --rows 1000000 --repeat 3

The dataset (fixed seed, written once by pylance): ``id`` int64 and ``text``, ~20 words per row
(16 to 24) drawn from a fixed 5,000-word vocabulary with Zipf-like frequencies. Every measurement
runs in a fresh process; the two engines alternate (ours, pylance, ours, pylance, ...) so machine
load hits both alike, and each line reports the median of ``--repeat`` runs and ours / pylance.

* ``build``: ``create_scalar_index("text", "INVERTED")`` (default parameters) on a fresh copy;
* ``build+pos``: the same with ``with_position=True`` (the index the queries use);
* queries, each engine on its own index, ``limit=10``, ``columns=["id"]``:
  ``1-term`` (a frequent word), ``3-term`` (OR of three words of different frequencies),
  ``phrase`` (two adjacent words of one row). ``cold`` is the first query of a freshly opened
  dataset in a fresh process (index files read); ``warm`` the best of five more on the same
  dataset object (what a long-lived process such as a Dagster code server sees).

The children also return the rows they found: ``same`` says whether both engines return the same
float32 scores and the same ids above the score of the last row. At that score both keep some of the
tied rows: we keep the lowest row ids, pylance 14.0.2 a subset its WAND walk happens to meet (not
stable across limits), so the ids of that tie are not compared.
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
import pyarrow as pa

from benchmarks.common import fmt_ratio, fmt_seconds, print_table, run_child

SEED = 11
VOCAB = 5000
QUERIES = ("1-term", "3-term", "phrase")


def vocabulary() -> list[str]:
    """5,000 distinct lower-case pseudo-words (4 to 9 letters, no English stop word among them)."""
    rng = np.random.default_rng(SEED)
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    out: dict[str, None] = {}
    while len(out) < VOCAB:
        n = int(rng.integers(2, 5))
        word = "".join(consonants[rng.integers(len(consonants))] + vowels[rng.integers(len(vowels))]
                       for _ in range(n))
        out[word + consonants[rng.integers(len(consonants))]] = None
    return list(out)


def make_table(rows: int) -> pa.Table:
    """The benchmark table from a fixed seed (Zipf-like word frequencies)."""
    words = np.array(vocabulary(), dtype=object)
    rng = np.random.default_rng(SEED + 1)
    weights = 1.0 / (np.arange(VOCAB) + 10.0)
    weights /= weights.sum()
    lengths = rng.integers(16, 25, rows)
    picks = rng.choice(VOCAB, size=int(lengths.sum()), p=weights)
    flat = words[picks]
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    texts = [" ".join(flat[bounds[i]:bounds[i + 1]]) for i in range(rows)]
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "text": pa.array(texts, pa.string())})


def queries(table: pa.Table) -> dict[str, str]:
    """The query strings: a frequent word, three words of falling frequency, a phrase of one row."""
    words = vocabulary()
    row = table.column("text")[min(12345, table.num_rows - 1)].as_py().split()
    return {"1-term": words[40], "3-term": f"{words[5]} {words[300]} {words[2500]}",
            "phrase": f"{row[3]} {row[4]}"}


# -- children -----------------------------------------------------------------------------------
def _child_build(engine: str, src: str, dst: str, positions: bool) -> dict[str, Any]:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    if engine == "ours":
        import lance_format
        ds: Any = lance_format.dataset(dst)
    else:
        import lance
        ds = lance.dataset(dst)
    t0 = time.perf_counter()
    ds.create_scalar_index("text", "INVERTED", with_position=positions)
    seconds = time.perf_counter() - t0
    shutil.rmtree(dst, ignore_errors=True)
    return {"seconds": seconds}


def _child_query(engine: str, path: str, name: str, text: str) -> dict[str, Any]:
    from lance.query import PhraseQuery
    if engine == "ours":
        import lance_format
        from lance_format.search.fts_query import PhraseQuery as OurPhrase
        ds: Any = lance_format.dataset(path)
        query: Any = OurPhrase(text, "text") if name == "phrase" else text
    else:
        import lance
        ds = lance.dataset(path)
        query = PhraseQuery(text, "text") if name == "phrase" else text

    def run() -> pa.Table:
        return ds.to_table(full_text_query=query, columns=["id"], limit=10)

    t0 = time.perf_counter()
    out = run()
    cold = time.perf_counter() - t0
    warm = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        run()
        warm = min(warm, time.perf_counter() - t0)
    return {"cold": cold, "warm": warm, "scores": [float(v) for v in out.column("_score").to_pylist()],
            "ids": out.column("id").to_pylist()}


def child(argv: list[str]) -> None:
    """Entry point of a measuring child process (prints one JSON line)."""
    kind, engine, *rest = argv
    if kind == "build":
        result = _child_build(engine, rest[0], rest[1], rest[2] == "1")
    else:
        result = _child_query(engine, rest[0], rest[1], rest[2])
    print(json.dumps(result), flush=True)


# -- driver -------------------------------------------------------------------------------------
def _agree(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Same scores, and the same ids above the last row's score (its tie may be cut differently)."""
    if ours["scores"] != theirs["scores"]:
        return False
    if not ours["scores"]:
        return True
    cut = min(theirs["scores"])
    above = [{i for i, s in zip(r["ids"], r["scores"], strict=True) if s > cut} for r in (ours, theirs)]
    return above[0] == above[1]


def _run(args: list[str]) -> dict[str, Any]:
    got = run_child("benchmarks.bench_fts", ["--child", *args])
    if "error" in got:
        raise SystemExit(f"child {args[:3]} failed: {got['error']}")
    return got


def main() -> None:
    """Run the benchmark and print the table."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-build", action="store_true", help="measure queries only")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()

    import lance

    import lance_format

    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_fts_"))
    base = scratch / "base.lance"
    table = make_table(args.rows)
    if not base.exists():
        lance.write_dataset(table, str(base), max_rows_per_file=max(args.rows // 4, 1))
    texts = queries(table)
    engines = ("ours", "pylance")
    samples: dict[tuple[str, str], list[float]] = {}
    ids: dict[tuple[str, str], dict[str, Any]] = {}

    def add(line: str, engine: str, value: float) -> None:
        samples.setdefault((line, engine), []).append(value)

    # Query datasets: one copy per engine, indexed (with positions) by that engine.
    indexed = {}
    for engine in engines:
        path = scratch / f"q_{engine}.lance"
        if not path.exists():
            shutil.copytree(base, path)
            ds: Any = lance_format.dataset(str(path)) if engine == "ours" else lance.dataset(str(path))
            ds.create_scalar_index("text", "INVERTED", with_position=True)
        indexed[engine] = str(path)

    for r in range(args.repeat):
        order = engines if r % 2 == 0 else engines[::-1]
        if not args.skip_build:
            for line, pos in (("build", "0"), ("build+pos", "1")):
                for engine in order:
                    got = _run(["build", engine, str(base), str(scratch / f"b_{engine}.lance"), pos])
                    add(line, engine, got["seconds"])
        for name in QUERIES:
            for engine in order:
                got = _run(["query", engine, indexed[engine], name, texts[name]])
                add(f"{name} cold", engine, got["cold"])
                add(f"{name} warm", engine, got["warm"])
                ids[(name, engine)] = got

    lines = list(dict.fromkeys(line for line, _ in samples))
    rows = []
    for line in lines:
        ours = statistics.median(samples[(line, "ours")])
        theirs = statistics.median(samples[(line, "pylance")])
        name = line.split()[0]
        same = "" if name not in QUERIES else ("yes" if _agree(ids[(name, "ours")], ids[(name, "pylance")]) else "NO")
        rows.append([line, fmt_seconds(ours), fmt_seconds(theirs), fmt_ratio(ours, theirs), same])
    print(f"rows={args.rows} repeat={args.repeat} queries={texts}")
    print_table(["line", "ours", "pylance", "ours/pylance", "same"], rows)
    if args.dir is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
