"""HNSW graph tasks run their matrix products on one BLAS thread, so a graph is the same on
threads and on worker processes, and large groups weigh each row's candidates on the row's own
small distance matrix with the rule the whole-matrix path applies.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.store import IndexDir
from lance_format.index.vector import blas, hnsw
from lance_format.index.vector.layout import read_segment
from lance_format.maintenance.runner import LocalRunner, ProcessRunner

DIM = 32
needs_openblas = pytest.mark.skipif(blas._openblas() is None, reason="numpy is not linked to OpenBLAS here")


def _clustered(n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, DIM))
    return (centres[rng.integers(0, 30, n)] + 0.4 * rng.standard_normal((n, DIM))).astype(np.float32)


def _dataset(uri: str, n: int = 3000) -> str:
    x = _clustered(n)
    lance.write_dataset(pa.table({"id": np.arange(n), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()),
                                                                                               DIM)}),
                        uri, max_rows_per_file=1000)
    return uri


def _segment(uri: str) -> Any:
    ds = lance_format.dataset(uri)
    return read_segment(IndexDir(ds._store, ds.manifest.indices[0].uuid))


@needs_openblas
def test_graph_tasks_use_one_blas_thread_and_give_the_count_back(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    setter, getter = blas._openblas()  # type: ignore[misc]
    before = getter()
    setter(2)  # as numpy starts on a 2-core machine, whatever this one has
    seen: list[int] = []
    build = hnsw.build_graphs

    def recording(*args: Any, **kw: Any) -> Any:
        seen.append(int(getter()))
        return build(*args, **kw)

    monkeypatch.setattr(hnsw, "build_graphs", recording)
    try:
        uri = _dataset(str(tmp_path / "d"))
        lance_format.dataset(uri).create_index("vec", "IVF_HNSW_SQ", num_partitions=2)
        assert seen and set(seen) == {1}
        assert getter() == 2
    finally:
        setter(before)


@needs_openblas
def test_overlapping_tasks_restore_the_count_when_the_last_one_ends() -> None:
    setter, getter = blas._openblas()  # type: ignore[misc]
    before = getter()
    setter(2)
    inside, release = threading.Event(), threading.Event()
    counts: list[int] = []

    def task() -> None:
        with blas.one_blas_thread():
            inside.set()
            release.wait(10)
            counts.append(int(getter()))

    try:
        t = threading.Thread(target=task)
        t.start()
        inside.wait(10)
        with blas.one_blas_thread():
            counts.append(int(getter()))
        counts.append(int(getter()))  # the other task still runs
        release.set()
        t.join(10)
        assert counts == [1, 1, 1] and getter() == 2
    finally:
        setter(before)


def test_a_graph_built_on_worker_processes_equals_the_one_built_on_threads(tmp_path: Path) -> None:
    uris = {}
    for name, runner in (("threads", LocalRunner(2)), ("processes", ProcessRunner(2))):
        uris[name] = _dataset(str(tmp_path / name))
        lance_format.dataset(uris[name]).create_index("vec", "IVF_HNSW_SQ", num_partitions=3, runner=runner)
    a, b = _segment(uris["threads"]), _segment(uris["processes"])
    assert np.array_equal(a.row_ids, b.row_ids) and a.lengths.tolist() == b.lengths.tolist()
    assert a.hnsw is not None and b.hnsw is not None and a.hnsw.table.equals(b.hnsw.table)
    assert a.hnsw.partitions == b.hnsw.partitions
    plan = lance.dataset(uris["processes"]).scanner(
        nearest={"column": "vec", "q": np.zeros(DIM, np.float32), "k": 5}, columns=["id"]).explain_plan()
    assert "ANNSubIndex" in plan and "KNNVectorDistance" not in plan


@pytest.mark.parametrize("metric", ["l2", "dot"])
def test_each_rows_own_candidate_matrix_keeps_what_the_whole_matrix_keeps(metric: str) -> None:
    x = _clustered(600, seed=8)
    if metric == "dot":
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    d = hnsw._pair_dist(x, x, metric)  # type: ignore[arg-type]
    np.fill_diagonal(d, np.inf)
    li, ld = hnsw._nearest(d[:200], 40)
    local = hnsw._local_dist(x, li, metric)  # type: ignore[arg-type]
    exact = d[li[:, :, None], li[:, None, :]]
    # the same distances up to the products' rounding (off the diagonal: a candidate to itself is never read)
    off = ~np.eye(40, dtype=bool)
    assert np.allclose(local[:, off], exact[:, off], rtol=1e-4, atol=1e-3)
    # and the same rule: fed the whole matrix's own values, both paths keep the same candidates
    assert np.array_equal(hnsw._heuristic_local(exact, ld, 8), hnsw._heuristic(d, li, ld, 8))


def test_a_blockwise_graph_is_searched_by_pylance_as_well_as_the_whole_matrix_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _dataset(str(tmp_path / "whole"), 4000)
    lance_format.dataset(uri).create_index("vec", "IVF_HNSW_FLAT", num_partitions=1)
    monkeypatch.setattr(hnsw, "FULL_LIMIT", 0)  # every group by blocks: heuristics on each row's own matrix
    blocks = _dataset(str(tmp_path / "blocks"), 4000)
    lance_format.dataset(blocks).create_index("vec", "IVF_HNSW_FLAT", num_partitions=1)
    x = _clustered(4000)
    qs = x[np.random.default_rng(4).choice(4000, 30, replace=False)] + np.float32(0.05)
    truth = [set(np.argsort(((x - q) ** 2).sum(1))[:10].tolist()) for q in qs]
    recalls = []
    for path in (uri, blocks):
        ds = lance.dataset(path)
        hits = sum(len(t & set(ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10,
                                                                     "ef": 20})["id"].to_pylist()))
                   for q, t in zip(qs, truth, strict=True))
        recalls.append(hits / (10 * len(qs)))
    assert recalls[1] >= recalls[0] - 0.02, recalls
