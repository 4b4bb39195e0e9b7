"""Review of the IVF_HNSW_* graph walk (``lance_format/index/vector/hnsw_walk.py``): cases the
walk's own tests do not reach, each compared with pylance tie-aware (``ties.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format

from .hnsw_data import tiny_partitions
from .ties import assert_same_answers as _same

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

DIM = 16


def _answers(ds: Any, q: np.ndarray[Any, Any], k: int, nearest: dict[str, Any], **kw: Any
             ) -> tuple[list[int], list[float]]:
    t = ds.to_table(columns=["id", "_distance"], nearest={"column": "vec", "q": q, "k": k, **nearest}, **kw)
    return t.column("id").to_pylist(), t.column("_distance").to_pylist()


@pytest.mark.parametrize("kind, kw", [("IVF_HNSW_SQ", {}), ("IVF_HNSW_PQ", {"num_sub_vectors": 4}),
                                      ("IVF_HNSW_FLAT", {})])
def test_an_index_with_empty_one_and_two_row_partitions_answers_as_pylance(tmp_path: Path, kind: str,
                                                                          kw: dict[str, Any]) -> None:
    """pylance writes an empty ``lance:hnsw`` entry for a partition without rows: reading the
    graphs raised ``JSONDecodeError`` on every query of such an index."""
    uri, qs = tiny_partitions(tmp_path, kind, **kw)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for q in qs:
        for nprobes, k, extra in [(1, 10, {}), (3, 100, {}), (9, 10, {"ef": 1000})]:
            near = {"nprobes": nprobes, **extra}
            _same(_answers(theirs, q, k, near), _answers(ours, q, k, near))
        for where in ("id < 3 or cat = 7", "id = 1", "id < 0"):
            _same(_answers(theirs, q, 10, {"nprobes": 9}, filter=where, prefilter=True),
                  _answers(ours, q, 10, {"nprobes": 9}, filter=where, prefilter=True))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1e3


def test_a_level0_list_longer_than_2m_widens_only_the_partitions_read(tmp_path: Path) -> None:
    """pylance's level-0 lists reach 2m + 1 now and then (1 in ~25k nodes on a 1M-row index):
    widening the segment's neighbour matrix copied all of it, [rows, 2m] int32 written on one
    query (~160 MB at 1M rows); it must copy the partitions read so far and keep their lists."""
    from lance_format.index.vector.hnsw_walk import GraphRows

    m, big = 2, 4_000_000  # partition 2: 4M rows never read (16 MB per column of the matrix)
    lists = {0: [[1, 2], [0, 2, 3], [0, 1], [1]],  # at most 2m = 4 neighbours
             1: [[1, 2, 3, 4, 5], [0], [0], [0], [0], [0]]}  # node 0: 2m + 1

    def read(first: int, rows: int) -> pa.Table:
        part = 0 if first == 0 else 1
        nb = lists[part]
        return pa.table({"__vector_id": pa.array(np.arange(len(nb)), pa.uint32()),
                         "__neighbors": pa.array(nb, pa.list_(pa.uint32()))})

    meta = tuple({"entry_point": 0, "params": {"m": m}, "level_offsets": [0, len(lists[p])]} for p in (0, 1)) + (
        {"entry_point": 0, "params": {"m": m}, "level_offsets": [0, big]},)
    lengths = np.array([4, 6, big], np.uint32)
    graph = GraphRows(read, meta, lengths, lengths, "test")
    graph.load(np.array([0], np.int64))
    before = _rss_mb()
    graph.load(np.array([1], np.int64))
    grown = _rss_mb() - before
    assert grown < 30, grown  # the whole matrix at width 5: 80 MB
    n = graph.rows
    assert graph.level0.shape[1] == 5
    want0 = [[1, 2, n, n, n], [0, 2, 3, n, n], [0, 1, n, n, n], [1, n, n, n, n]]
    assert graph.level0[:4].tolist() == want0  # partition 0, read before the widening, intact
    assert graph.level0[4].tolist() == [5, 6, 7, 8, 9]  # partition 1 in segment rows
    assert graph.level0[n].tolist() == [n] * 5  # the sentinel row


def test_a_large_ef_answers_as_pylance_without_compacting_candidates_every_expansion(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With more live candidates than 4 × the neighbour-list width (ef in the thousands), the
    candidate arrays were compacted (an argsort of all of them) on every expansion, and all
    ``[partitions, ef]`` results re-sorted: 50 s a query at ef 2000 over 256 partitions of a
    1M-row index (pylance: 0.4 s). Compactions are now amortised (limit doubles)."""
    from lance_format.index.vector import hnsw_walk

    x = np.random.default_rng(1).standard_normal((10_000, DIM)).astype(np.float32)
    table = pa.table({"id": pa.array(np.arange(10_000)),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    uri = str(tmp_path / "ef.lance")
    lance.write_dataset(table, uri).create_index("vec", "IVF_HNSW_SQ", num_partitions=2)
    calls = {"compact": 0, "steps": 0}
    compact, score = hnsw_walk._compact, hnsw_walk._beam

    def counted_compact(*a: Any) -> Any:
        calls["compact"] += 1
        return compact(*a)

    def counted_beam(graph: Any, entry: Any, score_rows: Any, *a: Any) -> Any:
        def counted_score(rows: Any) -> Any:
            calls["steps"] += 1
            return score_rows(rows)
        return score(graph, entry, counted_score, *a)

    monkeypatch.setattr(hnsw_walk, "_compact", counted_compact)
    monkeypatch.setattr(hnsw_walk, "_beam", counted_beam)
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for q in np.random.default_rng(2).standard_normal((2, DIM)).astype(np.float32):
        near = {"nprobes": 2, "ef": 2000}
        _same(_answers(theirs, q, 100, near), _answers(ours, q, 100, near))
    assert calls["steps"] > 1500  # the walks expanded thousands of nodes
    assert calls["compact"] < 200, calls  # was one per expansion
