"""Hamming vector indices on uint8 vectors: we build the kinds pylance 14.0.2 builds (IVF_FLAT and
IVF_HNSW_FLAT, binary k-modes centroids), pylance plans and searches them with its recall, and we
refuse the others with pylance's error classes.

Data: 4,000 × 16-byte codes, 20 noisy copies of random codes (10% of bits flipped), 4 fragments.
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
from lance_format.errors import LanceError
from lance_format.index.store import IndexDir
from lance_format.index.vector.kmeans import assign_hamming, train_kmodes
from lance_format.index.vector.layout import FlatStorage, read_segment

N, BYTES = 4000, 16
RNG = np.random.default_rng(5)
_CENTRES = RNG.integers(0, 256, (20, BYTES), dtype=np.uint8)
CODES = np.packbits(np.unpackbits(_CENTRES[RNG.integers(0, 20, N)], axis=1) ^ (RNG.random((N, BYTES * 8)) < 0.1),
                    axis=1)
QUERIES = CODES[RNG.choice(N, 40, replace=False)]


def fresh(path: Path, floats: bool = False) -> str:
    """A new 4-fragment dataset written by pylance (float vectors of the bits when ``floats``)."""
    shutil.rmtree(path, ignore_errors=True)
    values = pa.array(np.unpackbits(CODES, axis=1).astype(np.float32).ravel()) if floats else pa.array(CODES.ravel())
    vec = pa.FixedSizeListArray.from_arrays(values, BYTES * 8 if floats else BYTES)
    lance.write_dataset(pa.table({"id": np.arange(N), "vec": vec}), str(path), max_rows_per_file=1000)
    return str(path)


def recall(ds: Any, nprobes: int = 2) -> float:
    """Share of returned rows within the true 10th-nearest hamming distance."""
    bits = np.unpackbits(CODES, axis=1)
    hits = 0.0
    for q in QUERIES:
        d = (bits != np.unpackbits(q)).sum(axis=1)
        kth = np.sort(d)[9]
        got = ds.to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": nprobes}, columns=["id"])
        hits += float(np.mean([d[i] <= kth for i in got["id"].to_pylist()]))
    return hits / len(QUERIES)


@pytest.mark.parametrize("kind", ["IVF_FLAT", "IVF_HNSW_FLAT"])
def test_pylance_plans_and_searches_our_hamming_index_with_its_recall(tmp_path: Path, kind: str) -> None:
    ours, theirs = fresh(tmp_path / "ours"), fresh(tmp_path / "theirs")
    lance_format.dataset(ours).create_index("vec", kind, num_partitions=8, metric="hamming")
    lance.dataset(theirs).create_index("vec", kind, num_partitions=8, metric="hamming")
    ds = lance.dataset(ours)
    [info] = ds.list_indices()
    assert info["type"] == kind and set(info["fragment_ids"]) == {0, 1, 2, 3}
    plan = str(ds.scanner(nearest={"column": "vec", "q": QUERIES[0], "k": 10}).explain_plan())
    assert "ANNSubIndex" in plan and "metric=Hamming" in plan
    stats = ds.stats.index_stats("vec_idx")["indices"][0]
    assert stats["metric_type"] == "hamming" and stats["num_partitions"] == 8
    seg = read_segment(IndexDir(lance_format.dataset(ours)._store, lance_format.dataset(ours).manifest.indices[0].uuid))
    assert seg.centroids.dtype == np.uint8 and isinstance(seg.storage, FlatStorage)
    assert seg.storage.vectors.dtype == np.uint8
    assert recall(ds) >= recall(lance.dataset(theirs)) - 0.02
    # and our own search of it agrees with pylance's distances
    q = QUERIES[1]
    mine = lance_format.dataset(ours).to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": 8})
    assert mine["_distance"].to_pylist() == ds.to_table(
        nearest={"column": "vec", "q": q, "k": 10, "nprobes": 8})["_distance"].to_pylist()


def test_kmodes_centroids_are_bit_majorities_of_their_members() -> None:
    km = train_kmodes(CODES, 8, tolerance=0.0, max_iters=200)  # run to a fixed point
    labels, dist = assign_hamming(CODES, km.centroids)
    bits = np.unpackbits(CODES, axis=1)
    for c in range(8):
        members = bits[labels == c]
        if len(members):
            majority = np.packbits(members.mean(axis=0) > 0.5)
            assert (np.unpackbits(majority) != np.unpackbits(km.centroids[c].astype(np.uint8))).sum() == 0
    assert dist.sum() == pytest.approx(km.loss)


@pytest.mark.parametrize(("kind", "metric", "floats"), [
    ("IVF_PQ", "hamming", False), ("IVF_SQ", "hamming", False), ("IVF_HNSW_PQ", "hamming", False),
    ("IVF_RQ", "hamming", False), ("IVF_FLAT", "l2", False), ("IVF_FLAT", "hamming", True)])
def test_kinds_pylance_refuses_are_refused_with_its_error_class(tmp_path: Path, kind: str, metric: str,
                                                                floats: bool) -> None:
    uri = fresh(tmp_path / "ds", floats)
    extra = {"num_sub_vectors": 4} if "PQ" in kind else {}
    with pytest.raises(Exception) as theirs:
        lance.dataset(uri).create_index("vec", kind, num_partitions=4, metric=metric, **extra)
    with pytest.raises(LanceError) as ours:
        lance_format.dataset(uri).create_index("vec", kind, num_partitions=4, metric=metric, **extra)
    assert isinstance(ours.value, type(theirs.value))
    assert lance.dataset(uri).list_indices() == []  # nothing half-written


def test_hamming_index_survives_compaction_and_grows_by_a_delta(tmp_path: Path) -> None:
    uri = fresh(tmp_path / "ds")
    lance_format.dataset(uri).create_index("vec", "IVF_FLAT", num_partitions=8, metric="hamming")
    lance.dataset(uri).delete("id % 10 = 0")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=4000)
    pl = lance.dataset(uri)
    assert {f.fragment_id for f in pl.get_fragments()} <= set().union(*(set(i["fragment_ids"])
                                                                         for i in pl.list_indices()))
    assert "ANNSubIndex" in str(pl.scanner(nearest={"column": "vec", "q": QUERIES[0], "k": 10}).explain_plan())
    extra = pa.table({"id": np.arange(N, N + 500),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(CODES[:500].ravel()), BYTES)})
    lance_format.write_dataset(extra, uri, mode="append")
    lance_format.dataset(uri).optimize.optimize_indices()
    stats = lance.dataset(uri).stats.index_stats("vec_idx")
    assert stats["num_indices"] == 2 and stats["num_unindexed_rows"] == 0
    nearest = {"column": "vec", "q": QUERIES[1], "k": 10, "nprobes": 8}
    assert (lance_format.dataset(uri).to_table(nearest=nearest)["_distance"].to_pylist()
            == lance.dataset(uri).to_table(nearest=nearest)["_distance"].to_pylist())
