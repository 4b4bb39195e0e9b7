"""An index of a kind we cannot rebuild is kept, reported, and never makes the health check ask for maintenance."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa

import lance_format as lf
from lance_dagster.coverage import unindexed_rows, unmaintained_indices
from lance_dagster.maintenance import engine
from lance_dagster.maintenance.events import index_label, index_metrics
from lance_dagster.maintenance.health import measure
from lance_format.table.index_metadata import IndexDetails
from lance_format.table.transaction import LanceOperation


def _with_foreign_index(tmp_path: Path) -> lf.LanceDataset:
    uri = str(tmp_path / "t.lance")
    ds = lf.write_dataset(pa.table({"id": pa.array(range(300))}), uri)
    ds.create_scalar_index("id", "BTREE")
    # A segment of a kind no registry entry knows (a newer client's), on the same column.
    btree = ds.manifest.indices[0]
    foreign = dataclasses.replace(btree, uuid="00000000-0000-4000-8000-000000000001", name="future_idx",
                                  index_details=IndexDetails("/lance.table.FutureIndexDetails"))
    lf.LanceDataset.commit(ds, LanceOperation.CreateIndex([foreign], []), read_version=ds.version)
    lf.write_dataset(pa.table({"id": pa.array(range(300, 2300))}), uri, mode="append")
    return lf.dataset(uri)


def test_unmaintained_index_is_named_and_left_intact(tmp_path: Path) -> None:
    ds = _with_foreign_index(tmp_path)
    assert unmaintained_indices(ds) == ("future_idx",)
    assert unindexed_rows(ds) == {"future_idx": 2000, "id_idx": 2000}
    # Health counts only what maintenance can fix.
    assert measure(ds, small_fragment_rows=100).unindexed_rows == 2000
    outcome = engine.optimize_indices(ds, dry_run=False)
    assert outcome.indices == ("id_idx",) and outcome.unmaintained == ("future_idx",)
    assert "left behind (kind not maintained here): future_idx" in index_label(outcome)[1]
    assert index_metrics(outcome)["lance/indices_unmaintained"].value == "future_idx"
    after = lf.dataset(ds.uri)
    assert unindexed_rows(after) == {"future_idx": 2000, "id_idx": 0}
    assert measure(after, small_fragment_rows=100).unindexed_rows == 0  # nothing left to ask for
    assert "future_idx" in {i.name for i in after.list_indices()}
    assert after.to_table(filter="id = 2100").num_rows == 1
