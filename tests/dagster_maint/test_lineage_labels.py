"""Every materialization is labelled with its Lance version and operation; versions are text."""

from __future__ import annotations

from dagster import DagsterInstance, materialize

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.lineage import version_history
from lance_dagster.metadata import commit_summary, history_markdown, operation_label

from .helpers import appending_asset


def _latest_materialization(result, key: str):
    return next(m for m in result.asset_materializations_for_node(key))


def test_materialization_metadata_labels_the_commit(
        io_manager: LanceIOManager, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    first = materialize([events], resources={"io_manager": io_manager}, instance=instance)
    lance_format.dataset(f"{root}/events.lance").tags.create("gold", 1)
    second = materialize([events], resources={"io_manager": io_manager}, instance=instance)
    md = {k: v.value for k, v in _latest_materialization(second, "events").metadata.items()}
    assert md["lance/summary"] == "Lance v2 · Append · +3 rows"
    assert (md["lance/version"], md["lance/read_version"]) == ("2", "1")
    assert md["lance/run"] == f"/runs/{second.run_id}"
    assert md["lance/tags"] == "gold → v1"
    history = md["lance/version_history"]
    assert f"[{second.run_id[:8]}](/runs/{second.run_id})" in history
    assert f"[{first.run_id[:8]}](/runs/{first.run_id})" in history
    assert "| v2 |" in history and "| v1 |" in history
    assert list(md)[0] == "lance/summary"


def test_history_labels_external_and_maintenance_commits(root: str) -> None:
    from .conftest import batch

    uri = f"{root}/ext.lance"
    for i in range(3):
        lance_format.write_dataset(batch(i * 10), uri, mode="append" if i else "create")
    ds = lance_format.dataset(uri)
    ds.optimize.compact_files()
    records = version_history(lance_format.dataset(uri))
    labels = [operation_label(r) for r in records]
    assert labels[0] == "Compaction" and labels[-1] == "Overwrite"
    table = history_markdown(records).value
    assert "external" in table  # commits made outside Dagster have no run to link
    assert commit_summary(6, "Append", "+1,887 rows") == "Lance v6 · Append · +1,887 rows"
