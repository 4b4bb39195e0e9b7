"""Clustered vectors where PQ codebooks bound recall, shared by the IVF_PQ training tests.

4,000 × 64 float32 around 200 Gaussian centres (noise 0.35 per dimension), written as 4
fragments: with 8 partitions many centres share a partition, so what PQ encodes is the centres'
offsets plus the noise, as in ``benchmarks/bench_vector.py`` at 100k and 1M rows.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa

N, DIM, CENTRES = 4000, 64, 200


@dataclass(frozen=True)
class Blobs:
    """Rows and queries drawn around the same centres."""

    vectors: np.ndarray[Any, Any]
    queries: np.ndarray[Any, Any]

    def fresh(self, path: Path) -> str:
        """A new dataset written by pylance: ``id`` and ``vec``, 1,000 rows per fragment."""
        shutil.rmtree(path, ignore_errors=True)
        table = pa.table({"id": np.arange(N),
                          "vec": pa.FixedSizeListArray.from_arrays(pa.array(self.vectors.ravel()), DIM)})
        lance.write_dataset(table, str(path), max_rows_per_file=1000)
        return str(path)

    def recall(self, ds: Any, nprobes: int = 2) -> float:
        """Recall@10 of ``ds``'s search against exact squared-l2 search.

        Rows with equal PQ codes tie; whichever of them a search returns, recall counts only true
        neighbours, so ties cost both engines alike and recall is compared with a margin, never
        the returned rows (``tests/search/ties.py``).
        """
        hits = 0
        for q in self.queries:
            truth = set(np.argsort(((self.vectors - q) ** 2).sum(axis=1))[:10].tolist())
            got = ds.to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": nprobes}, columns=["id"])
            hits += len(truth & set(got["id"].to_pylist()))
        return hits / (10 * len(self.queries))

    def pylance_recalls(self, root: Path, builds: int, params: dict[str, Any]) -> list[float]:
        """Recall of ``builds`` IVF_PQ indices pylance trains afresh (each draw is random)."""
        out = []
        for i in range(builds):
            uri = self.fresh(root / f"theirs{i}")
            lance.dataset(uri).create_index("vec", "IVF_PQ", **params)
            out.append(self.recall(lance.dataset(uri)))
        return out


def blobs(seed: int) -> Blobs:
    """The data of ``seed``: rows first, then 100 queries, from one generator."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIM)).astype(np.float32)
    vectors = (centres[rng.integers(0, CENTRES, N)] + rng.normal(scale=0.35, size=(N, DIM))).astype(np.float32)
    queries = (centres[rng.integers(0, CENTRES, 100)] + rng.normal(scale=0.35, size=(100, DIM))).astype(np.float32)
    return Blobs(vectors, queries)
