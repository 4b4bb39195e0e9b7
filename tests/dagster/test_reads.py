"""Pinned and projected reads through AssetIn metadata, and the recorded upstream version."""

from pathlib import Path

import lance
import pandas as pd
import pyarrow as pa
import pytest
from dagster import AssetIn, DagsterInstance, TextMetadataValue, asset, materialize
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
    assert meta(materialization(result, "pinned"))["lance/input_version/source"] == "1"
    assert meta(materialization(result, "projected"))["lance/input_version/source"] == "3"
    assert meta(materialization(result, "latest"))["lance/input_version/source"] == "3"


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
    assert meta(materialization(result, "from_tag"))["lance/input_version/source"] == "2"


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


def test_loaded_input_event_records_the_pin(root: str, io_manager: LanceIOManager, instance: DagsterInstance) -> None:
    COUNTER["n"] = 0
    resources = {"io_manager": io_manager}
    materialize([source], resources=resources, instance=instance)
    materialize([source], resources=resources, instance=instance)
    result = materialize([source, pinned], resources=resources, instance=instance, selection=[pinned])
    loaded = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    md = {k: v.value for k, v in loaded[0].event_specific_data.metadata.items()}
    assert (md["lance/input_version"], md["lance/input_latest_version"], md["lance/input_pinned_version"]) == (
        "1", "2", "1")
    assert meta(materialization(result, "pinned"))["lance/input_version/source"] == "1"


def _t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [float(i) for i in range(n)]})


def test_pinned_tag_columns_and_pandas_input(tmp_path: Path, instance: DagsterInstance) -> None:
    root = str(tmp_path)
    io = LanceIOManager(root_uri=root)
    counter = {"n": 0}

    @asset(name="src", metadata={"mode": "append"})
    def src() -> pa.Table:
        counter["n"] += 1
        return _t(counter["n"] * 100, counter["n"])

    for _ in range(3):
        materialize([src], resources={"io_manager": io}, instance=instance)
    lance.dataset(f"{root}/src.lance").tags.create("gold", 2)  # a tag made by pylance

    @asset(ins={"src": AssetIn(metadata={"tag": "gold", "columns": ["id"]})})
    def pinned(src: pd.DataFrame) -> pd.DataFrame:
        assert isinstance(src, pd.DataFrame)
        return src

    res = materialize([src, pinned], resources={"io_manager": io}, instance=instance, selection=[pinned])
    assert res.success
    out = lance.dataset(f"{root}/pinned.lance").to_table()
    assert out.equals(lance.dataset(f"{root}/src.lance", version="gold").to_table(columns=["id"]))
    assert out.column("id").to_pylist() == [100, 200, 201]
    # Issue 12 records versions as identifiers (text), as the tests above check.
    assert materialization(res, "pinned").metadata["lance/input_version/src"] == TextMetadataValue("2")
