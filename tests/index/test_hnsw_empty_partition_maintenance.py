"""Compaction and index optimisation of a pylance IVF_HNSW index with an empty partition.

pylance writes an empty string as the ``lance:hnsw`` entry of a partition without rows; reading
the segment whole for a remap or a delta build parsed it as JSON and failed. Neither needs the
graph (both build graphs again), so neither reads it now.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from tests.search.hnsw_data import DIM, tiny_partitions
from tests.search.ties import assert_same_answers

lance = pytest.importorskip("lance")


def _answers(ds: object, q: np.ndarray) -> tuple[list[int], list[float]]:
    t = ds.to_table(columns=["id", "_distance"],  # type: ignore[attr-defined]
                    nearest={"column": "vec", "q": q, "k": 10, "nprobes": 9})
    return t.column("id").to_pylist(), t.column("_distance").to_pylist()


def test_our_compaction_remaps_an_hnsw_index_with_an_empty_partition(tmp_path: Path) -> None:
    uri, qs = tiny_partitions(tmp_path, "IVF_HNSW_SQ")
    lance.dataset(uri).delete("id % 9 = 4")
    lance_format.dataset(uri).optimize.compact_files()
    theirs = lance.dataset(uri)
    stats = theirs.stats.index_stats("vec_idx")
    assert stats["num_unindexed_rows"] == 0
    for q in qs:
        assert "ANN" in theirs.scanner(nearest={"column": "vec", "q": q, "k": 10}).explain_plan()
        assert_same_answers(_answers(theirs, q), _answers(lance_format.dataset(uri), q))


def test_our_optimize_indices_adds_rows_to_an_hnsw_index_with_an_empty_partition(tmp_path: Path) -> None:
    uri, qs = tiny_partitions(tmp_path, "IVF_HNSW_SQ")
    x = np.random.default_rng(9).standard_normal((300, DIM)).astype(np.float32)
    lance.write_dataset(pa.table({"id": pa.array(np.arange(2000, 2300)), "cat": pa.array(np.arange(300) % 50),
                                  "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)}),
                        uri, mode="append")
    ours = lance_format.dataset(uri)
    ours.optimize.optimize_indices(num_indices_to_merge=0)
    theirs = lance.dataset(uri)
    assert theirs.stats.index_stats("vec_idx")["num_unindexed_rows"] == 0
    for q in qs:
        assert_same_answers(_answers(theirs, q), _answers(lance_format.dataset(uri), q))
