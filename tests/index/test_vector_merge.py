"""``optimize_indices(num_indices_to_merge=N)`` on vector indices, as pylance 14.0.2 does it."""

from __future__ import annotations

import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

import lance_format as lf

DIM = 16


def _rows(start: int, n: int, seed: int) -> pa.Table:
    vecs = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(start, start + n)),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM)})


def _segments(uri: str) -> list[frozenset[int]]:
    ds = lf.dataset(uri)
    return sorted((m.fragment_bitmap or frozenset() for m in ds.manifest.indices if m.name == "vec_idx"),
                  key=min)


def test_merging_the_newest_deltas_matches_pylance(tmp_path: Path) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    base = lance.write_dataset(_rows(0, 3000, 0), ours)
    base.create_index("vec", "IVF_PQ", num_partitions=4, num_sub_vectors=4)
    for i, start in enumerate((3000, 3500)):
        lance.write_dataset(_rows(start, 500, i + 1), ours, mode="append")
        lance.dataset(ours).optimize.optimize_indices(num_indices_to_merge=0)  # one delta each
    shutil.copytree(ours, theirs)
    assert _segments(ours) == [frozenset({0}), frozenset({1}), frozenset({2})]
    lance.write_dataset(_rows(4000, 500, 9), ours, mode="append")
    lance.write_dataset(_rows(4000, 500, 9), theirs, mode="append")
    lf.dataset(ours).optimize.optimize_indices(num_indices_to_merge=2)
    lance.dataset(theirs).optimize.optimize_indices(num_indices_to_merge=2)
    # the two newest deltas and the new fragment become one segment; the base is untouched
    assert _segments(ours) == _segments(theirs) == [frozenset({0}), frozenset({1, 2, 3})]
    q = _rows(0, 1, 42).column("vec")[0].values.to_numpy()
    query = {"column": "vec", "q": q, "k": 10, "nprobes": 4, "refine_factor": 10}
    after = lance.dataset(ours)
    assert "ANN" in after.scanner(nearest=query).explain_plan()
    assert after.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    exact = after.to_table(nearest={**query, "use_index": False})["id"].to_pylist()
    got = after.to_table(nearest=query)["id"].to_pylist()
    assert len(set(got) & set(exact)) >= 9
