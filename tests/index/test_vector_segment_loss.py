"""The loss a vector segment records is that of every indexed vector, as pylance 14.0.2 records it.

pylance sums each vector's distance to its centroid while it assigns the rows (squared L2, on the
normalised vectors for cosine), not the k-means loss of its training sample; ``index_statistics``
shows it per segment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.store import IndexDir
from lance_format.index.vector.kmeans import normalize
from lance_format.index.vector.layout import read_segment

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

DIM = 8


def _single(n: int = 6000) -> tuple[pa.Table, np.ndarray[Any, Any]]:
    x = np.random.default_rng(0).standard_normal((n, DIM)).astype(np.float32)
    return pa.table({"v": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)}), x


def _multi(n: int = 2000) -> tuple[pa.Table, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(1)
    lens = rng.integers(1, 4, n)
    x = rng.standard_normal((int(lens.sum()), DIM)).astype(np.float32)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    col = pa.ListArray.from_arrays(offsets, pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM))
    return pa.table({"v": col}), x


def _recorded_and_full(uri: str, vectors: np.ndarray[Any, Any], metric: str) -> tuple[float, float]:
    """The segment's recorded loss (as pylance reports it) and the loss of every vector under its centroids."""
    stats = lance.dataset(uri).stats.index_stats("v_idx")
    seg = read_segment(IndexDir(lance_format.dataset(uri)._store, lance.dataset(uri).list_indices()[0]["uuid"]))
    x = normalize(vectors) if metric == "cosine" else vectors
    c = np.asarray(seg.centroids, np.float64)
    full = ((x[:, None, :].astype(np.float64) - c[None]) ** 2).sum(-1).min(axis=1).sum()
    assert seg.loss == pytest.approx(stats["indices"][0]["loss"])
    return float(stats["indices"][0]["loss"]), float(full)


@pytest.mark.parametrize(("data", "kind", "metric"), [(_single, "IVF_FLAT", "l2"), (_single, "IVF_PQ", "cosine"),
                                                      (_single, "IVF_HNSW_SQ", "l2"), (_multi, "IVF_PQ", "cosine"),
                                                      (_multi, "IVF_HNSW_FLAT", "cosine")])
def test_segment_records_the_loss_of_every_indexed_vector(tmp_path: Path, data: Any, kind: str, metric: str) -> None:
    table, vectors = data()
    kw: dict[str, Any] = {"metric": metric, "num_partitions": 4}
    if "PQ" in kind:
        kw["num_sub_vectors"] = 2
    for who in ("pylance", "ours"):
        uri = str(tmp_path / f"{who}.lance")
        lance.write_dataset(table, uri, max_rows_per_file=1500)
        (lance.dataset(uri) if who == "pylance" else lance_format.dataset(uri)).create_index("v", kind, **kw)
        recorded, full = _recorded_and_full(uri, vectors, metric)
        assert recorded == pytest.approx(full, rel=1e-4), who
