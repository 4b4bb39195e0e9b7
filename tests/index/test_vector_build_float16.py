"""Vector indices on a float16 column: ours is listed, planned and searched by pylance 14.0.2 with
its own build's recall, and the stored centroids keep the column's element type."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.store import IndexDir
from lance_format.index.vector.layout import read_segment
from tests.index.test_vector_build import DIM, QUERIES, VECTORS, N

HALF = VECTORS.astype(np.float16)


def _fresh(path: Path) -> str:
    shutil.rmtree(path, ignore_errors=True)
    tbl = pa.table({"id": np.arange(N), "vec": pa.FixedSizeListArray.from_arrays(pa.array(HALF.ravel()), DIM)})
    lance.write_dataset(tbl, str(path), max_rows_per_file=1000)
    return str(path)


def _recall(ds: Any) -> float:
    x = HALF.astype(np.float32)
    hits = 0
    for q in QUERIES:
        truth = set(np.argsort(((x - q) ** 2).sum(1))[:10].tolist())
        got = ds.to_table(nearest={"column": "vec", "q": q.astype(np.float16), "k": 10, "nprobes": 4},
                          columns=["id"])
        hits += len(truth & set(got["id"].to_pylist()))
    return hits / (10 * len(QUERIES))


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_PQ", "IVF_HNSW_SQ"])
def test_float16_column_index_is_pylances(tmp_path: Path, kind: str) -> None:
    params: dict[str, Any] = {"num_partitions": 16, **({"num_sub_vectors": 16} if "PQ" in kind else {})}
    ours, theirs = _fresh(tmp_path / "ours"), _fresh(tmp_path / "theirs")
    lance_format.dataset(ours).create_index("vec", kind, **params)
    lance.dataset(theirs).create_index("vec", kind, **params)
    ds = lance.dataset(ours)
    assert ds.list_indices()[0]["type"] == kind
    plan = str(ds.scanner(nearest={"column": "vec", "q": HALF[0], "k": 10}, columns=["id"]).explain_plan())
    assert "ANNSubIndex" in plan and "KNNVectorDistance" not in plan
    # pylance trains from random starts, ours from k-means++ seeds: ours may beat it, not trail it
    assert _recall(ds) >= _recall(lance.dataset(theirs)) - 0.02
    mine = lance_format.dataset(ours)
    seg = read_segment(IndexDir(mine._store, mine.manifest.indices[0].uuid))
    pds = lance_format.dataset(theirs)
    ref = read_segment(IndexDir(pds._store, pds.manifest.indices[0].uuid))
    assert seg.centroids.dtype == ref.centroids.dtype
