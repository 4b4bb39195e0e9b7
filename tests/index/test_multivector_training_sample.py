"""Multivector training samples whole rows sized in vectors, as pylance 14.0.2 samples them."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.kind import TrainingData
from lance_format.index.vector import multivector as mv

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

DIM = 4


def _rows(lengths: list[int], nulls: tuple[int, ...] = ()) -> pa.Array:
    rows: list[list[list[float]] | None] = [[[float(i)] * DIM] * n for i, n in enumerate(lengths)]
    for i in nulls:
        rows[i] = None
    return pa.array(rows, pa.list_(pa.list_(pa.float32(), DIM)))


def _sampler(values: pa.Array, asked: list[int]) -> Callable[[int], TrainingData]:
    def sample(k: int) -> TrainingData:
        asked.append(k)
        take = min(k, len(values))
        return TrainingData(values.slice(0, take), np.arange(take, dtype=np.uint64))
    return sample


@pytest.mark.parametrize(("per_row", "n", "rows"), [(50, 65536, math.ceil(65536 / 50)), (50, 1024, 128),
                                                    (1, 1024, 1024), (4, 65536, 16384)])
def test_sample_asks_for_the_rows_that_hold_n_vectors(per_row: int, n: int, rows: int) -> None:
    asked: list[int] = []
    values = _rows([per_row] * 20000)
    out = mv.sample_vectors(_sampler(values, asked), n)
    assert asked == [mv.PROBE_ROWS, rows]
    assert len(out.values) == min(rows, 20000) * per_row
    assert np.array_equal(out.ids, np.repeat(np.arange(min(rows, 20000), dtype=np.uint64), per_row))


def test_null_and_empty_rows_do_not_count_towards_the_vectors_per_row() -> None:
    asked: list[int] = []
    lengths = [0, 10] * 100
    mv.sample_vectors(_sampler(_rows(lengths, nulls=(1, 3)), asked), 12800)
    assert asked == [mv.PROBE_ROWS, 1280]


def test_index_on_long_rows_is_trained_and_used_by_pylance(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n, per_row = 600, 40
    vals = rng.standard_normal((n * per_row, DIM)).astype(np.float32)
    offsets = pa.array(np.arange(0, n * per_row + 1, per_row, dtype=np.int32))
    col = pa.ListArray.from_arrays(offsets, pa.FixedSizeListArray.from_arrays(pa.array(vals.ravel()), DIM))
    uri = str(tmp_path / "mv.lance")
    lance.write_dataset(pa.table({"id": np.arange(n), "mv": col}), uri)
    lance_format.dataset(uri).create_index("mv", "IVF_PQ", metric="cosine", num_partitions=2, num_sub_vectors=2)
    stats = lance.dataset(uri).stats.index_stats("mv_idx")
    assert stats["num_indexed_rows"] == n and stats["num_unindexed_rows"] == 0
    got = lance.dataset(uri).to_table(nearest={"column": "mv", "q": vals[:2], "k": 5}, columns=["id"])
    assert got.num_rows == 5
