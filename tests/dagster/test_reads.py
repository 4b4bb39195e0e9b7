"""Pinned and projected reads through AssetIn metadata, and the recorded upstream version."""

import pyarrow as pa
import pytest
from dagster import AssetIn, DagsterInstance, asset, materialize
from dg_helpers import materialization, meta, requires_table_layer

import lance_format
from lance_dagster import LanceIOManager

pytestmark = requires_table_layer

COUNTER = {"n": 0}


@asset(metadata={"mode": "append"})
def source() -> pa.Table:
    COUNTER["n"] += 1
    n = COUNTER["n"]
    return pa.table({"batch": pa.array([n] * n, pa.int64()), "payload": [f"p{n}"] * n, "extra": [0.5] * n})


@asset(ins={"source": AssetIn(metadata={"version": 1})})
def pinned(source: pa.Table) -> pa.Table:
    return source


@asset(ins={"source": AssetIn(metadata={"columns": ["batch"]})})
def projected(source: pa.Table) -> pa.Table:
    return source


@asset
def latest(source: pa.Table) -> pa.Table:
    return source


def test_pinned_version_columns_and_recorded_input(root: str, io_manager: LanceIOManager,
                                                   instance: DagsterInstance) -> None:
    COUNTER["n"] = 0
    resources = {"io_manager": io_manager}
    materialize([source], resources=resources, instance=instance)
    materialize([source], resources=resources, instance=instance)
    result = materialize([source, pinned, projected, latest], resources=resources, instance=instance)
    assert result.success
    # source now has versions 1 (1 row), 2 (+2 rows), 3 (+3 rows)
    pinned_ds = lance_format.dataset(f"{root}/pinned.lance")
    assert pinned_ds.to_table().column("batch").to_pylist() == [1]
    projected_ds = lance_format.dataset(f"{root}/projected.lance")
    assert projected_ds.schema.names == ["batch"]
    assert projected_ds.count_rows() == 6
    assert lance_format.dataset(f"{root}/latest.lance").count_rows() == 6
    assert meta(materialization(result, "pinned"))["lance/input_version/source"] == 1
    assert meta(materialization(result, "projected"))["lance/input_version/source"] == 3
    assert meta(materialization(result, "latest"))["lance/input_version/source"] == 3


def test_pinned_tag(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    COUNTER["n"] = 0
    resources = {"io_manager": io_manager}
    materialize([source], resources=resources, instance=instance)
    materialize([source], resources=resources, instance=instance)
    ds = lance_format.dataset(f"{root}/source.lance")
    tags = getattr(ds, "tags", None)
    if tags is None or not hasattr(tags, "create"):
        pytest.skip("lance_format dataset has no tags API yet")
    tags.create("gold", 2)

    @asset(ins={"source": AssetIn(metadata={"tag": "gold"})})
    def from_tag(source: pa.Table) -> pa.Table:
        return source

    materialize([source], resources=resources, instance=instance)  # version 3 moves past the tag
    result = materialize([source, from_tag], resources=resources, instance=instance, selection=[from_tag])
    assert lance_format.dataset(f"{root}/from_tag.lance").count_rows() == 3
    assert meta(materialization(result, "from_tag"))["lance/input_version/source"] == 2


def test_missing_version_fails_clearly(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    COUNTER["n"] = 0

    @asset(ins={"source": AssetIn(metadata={"version": 99})})
    def too_new(source: pa.Table) -> pa.Table:
        return source

    materialize([source], resources={"io_manager": io_manager}, instance=instance)
    result = materialize([source, too_new], resources={"io_manager": io_manager}, instance=instance,
                         selection=[too_new], raise_on_error=False)
    assert not result.success
    assert "99" in str(result.get_step_failure_events()[0].event_specific_data.error)
