"""The example's ``nearest_events`` asset: vector and full-text indices on the event log, kept by maintenance."""

from __future__ import annotations

from pathlib import Path

import lance
import pytest
from dagster import DagsterInstance, materialize

import lance_format
from example_project.assets import (
    clean_events,
    embedding_centroids,
    event_log,
    nearest_events,
    raw_events,
)
from lance_dagster import LanceIOManager, LanceResource

pytestmark = pytest.mark.slow


def test_nearest_events_builds_indices_that_pylance_uses_and_maintenance_keeps(tmp_path: Path) -> None:
    root = str(tmp_path / "lance")
    lance_res = LanceResource(root_uri=root)
    resources = {"io_manager": LanceIOManager(root_uri=root), "lance": lance_res}
    chain = [raw_events, clean_events, event_log, embedding_centroids, nearest_events]
    with DagsterInstance.ephemeral() as instance:
        for _ in range(2):
            assert materialize(chain, resources=resources, instance=instance).success
    out = lance_format.dataset(f"{root}/nearest_events.lance").to_table()
    assert out.num_rows == 25 and set(out.column("centroid_of").to_pylist()) == {
        "view", "click", "search", "add_to_cart", "purchase"}
    log_uri = f"{root}/event_log.lance"
    theirs = lance.dataset(log_uri)
    assert {i["type"] for i in theirs.list_indices()} == {"IVF_PQ", "Inverted"}
    # The second run appended: the indices lag one fragment until maintenance folds it in.
    ours = lance_format.dataset(log_uri)
    assert ours.stats.index_stats("embedding_idx").num_unindexed_rows > 0
    ours.optimize.compact_files()
    ours.optimize.optimize_indices()
    theirs = lance.dataset(log_uri)
    live = {f.fragment_id for f in theirs.get_fragments()}
    for name in ("embedding_idx", "category_idx"):
        assert theirs.stats.index_stats(name)["num_unindexed_rows"] == 0
        covered = set().union(*(set(i["fragment_ids"]) for i in theirs.list_indices() if i["name"] == name))
        assert live <= covered
    q = ours.to_table(columns=["embedding"], limit=1).column("embedding")[0].values.to_numpy()
    assert "ANN" in theirs.scanner(nearest={"column": "embedding", "q": q, "k": 5}).explain_plan()
    assert theirs.to_table(full_text_query="purchase").num_rows == ours.to_table(full_text_query="purchase").num_rows
