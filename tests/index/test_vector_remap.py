"""Vector segments survive compaction both ways (ours compacting pylance's index, pylance compacting ours)
and grow by delta segments in optimize_indices, as pylance 14.0.2 sees them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import pytest

import lance_format
from tests.index.test_vector_build import ann_plan, recall, table

KW: dict[str, dict[str, Any]] = {"IVF_PQ": {"num_partitions": 16, "num_sub_vectors": 16},
                                 "IVF_HNSW_SQ": {"num_partitions": 16}}


def small_fragments(path: Path) -> str:
    """10 fragments of 500 rows, written by pylance."""
    shutil.rmtree(path, ignore_errors=True)
    lance.write_dataset(table(), str(path), max_rows_per_file=500)
    return str(path)


@pytest.mark.parametrize("kind", ["IVF_PQ", "IVF_HNSW_SQ"])
@pytest.mark.parametrize(("builder", "compactor"), [("pylance", "ours"), ("ours", "pylance"), ("ours", "ours")])
def test_compaction_keeps_every_live_fragment_covered_and_recall_unchanged(
        tmp_path: Path, kind: str, builder: str, compactor: str) -> None:
    uri = small_fragments(tmp_path / "ds")
    (lance.dataset(uri) if builder == "pylance" else lance_format.dataset(uri)).create_index("vec", kind, **KW[kind])
    lance.dataset(uri).delete("id % 10 = 0")
    before = recall(lance.dataset(uri), "l2")
    ds: Any = lance.dataset(uri) if compactor == "pylance" else lance_format.dataset(uri)
    ds.optimize.compact_files(target_rows_per_fragment=2500)
    pl = lance.dataset(uri)
    live = {f.fragment_id for f in pl.get_fragments()}
    covered = set().union(*(set(i["fragment_ids"]) for i in pl.list_indices()))
    assert live <= covered and min(live) >= 10  # only rewritten fragments are left
    assert "ANNSubIndex" in ann_plan(pl) and "KNNVectorDistance" not in ann_plan(pl)
    assert abs(recall(pl, "l2") - before) <= 0.02


def test_deferred_remap_of_pylances_pq_index_is_honoured(tmp_path: Path) -> None:
    uri = small_fragments(tmp_path / "ds")
    lance.dataset(uri).create_index("vec", "IVF_PQ", **KW["IVF_PQ"])
    lance.dataset(uri).delete("id % 10 = 0")
    before = recall(lance.dataset(uri), "l2")
    lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=2500, defer_index_remap=True)
    assert abs(recall(lance.dataset(uri), "l2") - before) <= 0.02
    lance_format.dataset(uri).optimize.optimize_indices()  # rebuilds against the new addresses
    pl = lance.dataset(uri)
    stats = pl.stats.index_stats("vec_idx")
    assert "ANNSubIndex" in ann_plan(pl) and stats["num_unindexed_rows"] == 0
    # as pylance after a deferred compaction: one segment, partitions from the default target size
    assert stats["num_indices"] == 1 and stats["indices"][0]["num_partitions"] == 1


def test_optimize_adds_a_delta_with_the_same_model(tmp_path: Path) -> None:
    uri = small_fragments(tmp_path / "ds")
    lance_format.dataset(uri).create_index("vec", "IVF_PQ", **KW["IVF_PQ"])
    lance_format.write_dataset(table().slice(0, 500), uri, mode="append")
    ds = lance_format.dataset(uri)
    ds.optimize.optimize_indices()
    pl = lance.dataset(uri)
    segs = pl.stats.index_stats("vec_idx")
    assert segs["num_unindexed_rows"] == 0 and segs["num_indices"] == 2
    base, delta = segs["indices"]
    assert base["centroids"] == delta["centroids"]
    assert sorted(i["fragment_ids"] for i in pl.list_indices())[-1] == {10}
    assert "deltas=2" in ann_plan(pl)
    lance_format.dataset(uri).optimize.optimize_indices(retrain=True)
    pl = lance.dataset(uri)
    assert pl.stats.index_stats("vec_idx")["num_indices"] == 1
    assert pl.list_indices()[0]["type"] == "IVF_PQ"
