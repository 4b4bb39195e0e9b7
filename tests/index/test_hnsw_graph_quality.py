"""Our HNSW graphs are sound and as navigable as pylance 14.0.2's: degree caps, reachability,
the neighbour heuristic's rule, the blockwise path agreeing with the whole-matrix one, and
pylance's search over our graph at small ``ef`` (where a poor graph shows first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.vector import hnsw

DIM = 64


def _clustered(n: int, dim: int = DIM, centres: int = 40, seed: int = 11, spread: float = 0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim))
    return (c[rng.integers(0, centres, n)] + spread * rng.standard_normal((n, dim))).astype(np.float32)


def _level(vid: np.ndarray, nb: pa.Array, meta: dict[str, Any], level: int
           ) -> tuple[np.ndarray, list[list[int]]]:
    lo, hi = meta["level_offsets"][level], meta["level_offsets"][level + 1]
    return vid[lo:hi], nb.slice(lo, hi - lo).to_pylist()


def _reached(nodes: np.ndarray, lists: list[list[int]], start: int) -> set[int]:
    pos = {int(v): i for i, v in enumerate(nodes.tolist())}
    seen, todo = {start}, [start]
    while todo:
        nxt = [t for s in todo for t in lists[pos[s]] if t not in seen]
        seen.update(nxt)
        todo = list(set(nxt))
    return seen


@pytest.mark.parametrize("metric", ["l2", "dot"])
def test_every_level_respects_the_degree_caps_and_reaches_every_node_from_the_entry_point(metric: str) -> None:
    x = _clustered(1500)
    params = hnsw.HnswParams()
    vid, nb, ds, meta = hnsw.build_partition(x, params, metric, np.random.default_rng(3))  # type: ignore[arg-type]
    offsets = meta["level_offsets"]
    assert offsets[1] == 1500 and offsets[-1] == len(vid)
    for level in range(params.max_level):
        nodes, lists = _level(vid, nb, meta, level)
        if nodes.size == 0:
            continue
        cap = 2 * params.m if level == 0 else params.m
        members = set(nodes.tolist())
        for node, lst in zip(nodes.tolist(), lists, strict=True):
            assert len(lst) <= cap and len(set(lst)) == len(lst) and node not in lst
            assert set(lst) <= members
        # pylance descends from the entry point: every node of the level must be reachable
        assert _reached(nodes, lists, meta["entry_point"]) == members
    # the stored distances are the graph's distances (squared l2, or 1 - dot)
    lists0, d0 = nb.slice(0, 1500).to_pylist(), ds.slice(0, 1500).to_pylist()
    for node in (0, 700, 1499):
        want = (((x[lists0[node]] - x[node]) ** 2).sum(1) if metric == "l2" else 1.0 - x[lists0[node]] @ x[node])
        assert np.allclose(d0[node], want, rtol=1e-3, atol=1e-3)


def test_heuristic_keeps_a_candidate_only_if_nearer_to_the_node_than_to_every_kept_one() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 8)).astype(np.float32)
    d = hnsw._pair_dist(x, x, "l2")
    np.fill_diagonal(d, np.inf)
    cand, dist = hnsw._nearest(d[:40], 30)
    keep = hnsw._heuristic(d, cand, dist, 6)
    for r in range(40):  # the rule, one candidate at a time
        kept: list[int] = []
        for j in range(30):
            if len(kept) < 6 and all(d[k, cand[r, j]] >= dist[r, j] for k in kept):
                kept.append(int(cand[r, j]))
        assert kept == cand[r][keep[r]].tolist()


def test_blockwise_distances_give_the_graph_of_the_whole_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _clustered(1200)
    whole = hnsw.build_partition(x, hnsw.HnswParams(), "l2", np.random.default_rng(1))
    monkeypatch.setattr(hnsw, "FULL_LIMIT", 0)  # every group computed by blocks of rows
    monkeypatch.setattr(hnsw, "_BLOCK", 200 * 1200)  # several blocks
    blocks = hnsw.build_partition(x, hnsw.HnswParams(), "l2", np.random.default_rng(1))
    assert np.array_equal(whole[0], blocks[0]) and whole[3] == blocks[3]
    a, b = whole[1].to_pylist(), blocks[1].to_pylist()
    # the same candidates; a distance may differ in its last bit between matrix shapes
    assert np.mean([p == q for p, q in zip(a, b, strict=True)]) >= 0.98


def test_pylance_search_over_our_graph_keeps_its_recall_at_small_ef(tmp_path: Path) -> None:
    x = _clustered(6000)
    tbl = pa.table({"id": np.arange(len(x)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    rng = np.random.default_rng(12)
    centres = np.random.default_rng(11).standard_normal((40, DIM))  # the data's centres: queries near the data
    qs = (centres[rng.integers(0, 40, 40)] + 0.4 * rng.standard_normal((40, DIM))).astype(np.float32)
    truth = [set(np.argsort(((x - q) ** 2).sum(1))[:10].tolist()) for q in qs]
    recalls = {}
    for who in ("ours", "theirs"):
        uri = str(tmp_path / who)
        lance.write_dataset(tbl, uri, max_rows_per_file=2000)
        # one partition and FLAT storage: exact distances over one graph, so recall measures the graph alone
        if who == "ours":
            lance_format.dataset(uri).create_index("vec", "IVF_HNSW_FLAT", num_partitions=1)
        else:
            lance.dataset(uri).create_index("vec", "IVF_HNSW_FLAT", num_partitions=1)
        ds = lance.dataset(uri)
        for ef in (10, 30):
            hits = 0
            for q, t in zip(qs, truth, strict=True):
                got = ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": 1, "ef": ef})
                hits += len(t & set(got["id"].to_pylist()))
            recalls[(who, ef)] = hits / (10 * len(qs))
    for ef in (10, 30):
        assert recalls[("ours", ef)] >= recalls[("theirs", ef)] - 0.02, recalls
