"""Audit of issue 4 (Dagster slice): real Dagster runs, datasets checked with pylance 14.0.2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pandas as pd
import pyarrow as pa
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    DagsterInstance,
    FloatMetadataValue,
    IntMetadataValue,
    StaticPartitionsDefinition,
    TableSchema,
    TableSchemaMetadataValue,
    asset,
    materialize,
)

import lance_format
from lance_dagster import LanceIOManager, LanceResource


@pytest.fixture
def instance() -> Any:
    with DagsterInstance.ephemeral() as inst:
        yield inst


def _t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [float(i) for i in range(n)]})


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


def _mat(result: Any, key: str) -> Any:
    mats = [e.materialization for e in result.get_asset_materialization_events()
            if e.materialization.asset_key == AssetKey.from_user_string(key)]
    assert len(mats) == 1
    return mats[0]


def test_failing_first_materialization_creates_no_dataset(tmp_path: Path, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))

    @asset(name="fresh")
    def fresh() -> pa.RecordBatchReader:
        def gen() -> Any:
            for k in range(5):
                yield _t(k * 10, 10).to_batches()[0]
            raise RuntimeError("source died")
        return pa.RecordBatchReader.from_batches(_t(0, 1).schema, gen())

    res = materialize([fresh], resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert not res.success
    uri = str(tmp_path / "fresh.lance")
    with pytest.raises(ValueError):
        lance.dataset(uri)
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(uri)
    assert not res.get_asset_materialization_events()


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_midstream_failure_writes_no_version_and_no_files(tmp_path: Path, instance: DagsterInstance,
                                                          mode: str) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))
    fail = {"now": False}

    @asset(name="stream", metadata={"mode": mode})
    def stream() -> pa.RecordBatchReader:
        def gen() -> Any:
            for k in range(6):
                yield _t(k * 4, 4).to_batches()[0]
                if fail["now"] and k == 3:
                    raise RuntimeError("connection reset")
        return pa.RecordBatchReader.from_batches(_t(0, 1).schema, gen())

    assert materialize([stream], resources={"io_manager": io}, instance=instance).success
    uri = str(tmp_path / "stream.lance")
    before = _files(uri)
    want = lance.dataset(uri).to_table()
    fail["now"] = True
    res = materialize([stream], resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert not res.success and not res.get_asset_materialization_events()
    assert lance.dataset(uri).version == 1 and lance.dataset(uri).to_table().equals(want)
    assert _files(uri) == before


def test_metadata_value_classes_and_data_version(tmp_path: Path, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))

    @asset(name="parts", metadata={"mode": "append"}, code_version="cv1",
           partitions_def=StaticPartitionsDefinition(["a", "b"]))
    def parts() -> pd.DataFrame:
        return _t(0, 5).to_pandas()

    runs = [materialize([parts], resources={"io_manager": io}, instance=instance, partition_key=p)
            for p in ("a", "b", "a")]
    uri = str(tmp_path / "parts.lance")
    theirs = lance.dataset(uri)
    assert theirs.version == 3 and theirs.count_rows() == 15
    for v, run in enumerate(runs, start=1):
        mat = _mat(run, "parts")
        md = mat.metadata
        assert mat.tags["dagster/data_version"] == str(v)
        assert md["lance/version"] == IntMetadataValue(v)
        assert isinstance(md["dagster/column_schema"], TableSchemaMetadataValue)
        schema = md["dagster/column_schema"].value
        assert isinstance(schema, TableSchema)
        assert [c.name for c in schema.columns] == ["id", "v"]
        assert md["dagster/row_count"] == IntMetadataValue(5 * v)
        assert md["lance/rows_added"] == IntMetadataValue(5)
        for key, value in md.items():
            raw = getattr(value, "value", None)
            if isinstance(raw, bool):
                continue
            if isinstance(raw, int):
                assert isinstance(value, IntMetadataValue), key
            if isinstance(raw, float):
                assert isinstance(value, FloatMetadataValue), key
        # pylance sees the lineage in the transaction of exactly that version
        props = theirs.read_transaction(v).transaction_properties
        assert run.run_id in props.values()
        assert "parts" in " ".join(props.values()) and "cv1" in props.values()
        assert ("a" if v != 2 else "b") in props.values()
    assert theirs.to_table().equals(lance_format.dataset(uri).to_table())


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
    assert _mat(res, "pinned").metadata["lance/input_version/src"] == IntMetadataValue(2)


def test_resource_write_and_dataset(tmp_path: Path) -> None:
    res = LanceResource(root_uri=str(tmp_path))
    res.write("events", _t(0, 3))
    res.write("events", _t(3, 2), mode="append")
    ds = res.dataset("events")
    assert ds.version == 2
    assert lance.dataset(ds.uri).to_table().equals(pa.concat_tables([_t(0, 3), _t(3, 2)]))
    assert res.dataset("events", version=1).to_table().equals(_t(0, 3))
