"""A small IVF_HNSW index with partitions of 1, 2 and 0 rows, built by pylance (shared by tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

lance = pytest.importorskip("lance")

DIM = 16


def tiny_partitions(tmp_path: Path, kind: str, **kw: Any) -> tuple[str, np.ndarray[Any, Any]]:
    """Six clusters of ~330 rows, then partitions of 1, 2 and 0 rows (centroids given to pylance's
    build), and queries near every one of them."""
    rng = np.random.default_rng(3)
    centers = rng.standard_normal((6, DIM)).astype(np.float32) * 4
    x = (centers[rng.integers(0, 6, 2000)] + rng.standard_normal((2000, DIM))).astype(np.float32)
    x[0], x[1], x[2] = 50, -50, -50.5
    table = pa.table({"id": pa.array(np.arange(2000)), "cat": pa.array(np.arange(2000) % 50),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    far = [np.full((1, DIM), v, np.float32) for v in (50, -50, 500)]
    uri = str(tmp_path / f"{kind}.lance")
    ds = lance.write_dataset(table, uri, max_rows_per_file=700)
    ds.create_index("vec", kind, num_partitions=9, ivf_centroids=np.concatenate([centers, *far]), **kw)
    sizes = [p["size"] for p in ds.stats.index_stats("vec_idx")["indices"][0]["partitions"]]
    assert sizes[6:] == [1, 2, 0]
    qs = np.concatenate([centers[:3] + 0.5, np.full((1, DIM), 49, np.float32), np.full((1, DIM), -49, np.float32),
                         np.full((1, DIM), 400, np.float32)])
    return uri, qs


