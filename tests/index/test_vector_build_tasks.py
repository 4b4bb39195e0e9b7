"""Vector index builds split into several encode tasks write the index one task writes.

Vector kinds cut their builds into tasks of ~50k rows (``VectorKind.task_rows``) so local
threads and Spark executors share the encoding; rows are merged sorted by (partition, row id),
so the split must not show in what is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import build as index_build
from lance_format.index.kinds.vector import VectorKind
from lance_format.index.store import IndexDir
from lance_format.index.vector.layout import read_segment

N, DIM = 4000, 16


def _segment(uri: str) -> Any:
    ds = lance_format.dataset(uri)
    return read_segment(IndexDir(ds._store, ds.manifest.indices[0].uuid))


def _table() -> pa.Table:
    x = np.random.default_rng(5).standard_normal((N, DIM)).astype(np.float32)
    return pa.table({"id": np.arange(N), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


@pytest.mark.parametrize(("kind", "kw"), [("IVF_PQ", {"num_sub_vectors": 4}), ("IVF_SQ", {}),
                                          ("IVF_RQ", {}), ("IVF_HNSW_SQ", {})])
def test_a_build_in_several_tasks_writes_what_one_task_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              kind: str, kw: dict[str, Any]) -> None:
    segs = []
    for name, task_rows in (("one", 10**9), ("four", 1000)):
        monkeypatch.setattr(VectorKind, "task_rows", task_rows)
        monkeypatch.setattr(index_build, "TASK_ROWS", 10**9)
        uri = str(tmp_path / name)
        shutil.rmtree(uri, ignore_errors=True)
        lance.write_dataset(_table(), uri, max_rows_per_file=1000)
        ds = lance_format.dataset(uri)
        plan = index_build.plan_index_build(ds, "vec", kind, params={"num_partitions": 4, **kw})
        assert len(plan.tasks) == (1 if name == "one" else 4)
        ds.create_index("vec", kind, num_partitions=4, **kw)
        segs.append(_segment(uri))
        assert "ANNSubIndex" in str(lance.dataset(uri).scanner(
            nearest={"column": "vec", "q": np.zeros(DIM, np.float32), "k": 5}, columns=["id"]).explain_plan())
    one, four = segs
    assert np.array_equal(one.centroids, four.centroids)
    assert one.lengths.tolist() == four.lengths.tolist()
    assert np.array_equal(one.row_ids, four.row_ids)
    assert one.loss == pytest.approx(four.loss, rel=1e-9)
    assert type(one.storage) is type(four.storage)
    fields = [f for f in ("codes", "codebook", "start", "end", "columns") if hasattr(one.storage, f)]
    assert fields
    for field in fields:
        a, b = getattr(one.storage, field), getattr(four.storage, field)
        assert a.equals(b) if isinstance(a, pa.Table) else np.array_equal(np.asarray(a), np.asarray(b))
    if one.hnsw is not None:
        assert four.hnsw is not None and one.hnsw.table.equals(four.hnsw.table)


def test_vector_builds_cut_a_million_rows_into_several_tasks(tmp_path: Path) -> None:
    uri = str(tmp_path / "big")
    x = np.random.default_rng(6).standard_normal((600_000, 2)).astype(np.float32)
    lance.write_dataset(pa.table({"vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 2)}), uri,
                        max_rows_per_file=100_000)
    plan = index_build.plan_index_build(lance_format.dataset(uri), "vec", "IVF_FLAT", params={"num_partitions": 2})
    assert [len(t.fragment_ids) for t in plan.tasks] == [1] * 6  # one 100k-row fragment per task
