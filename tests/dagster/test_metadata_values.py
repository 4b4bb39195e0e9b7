"""Materialization metadata uses Dagster's typed value classes; the data version is the Lance version."""

from pathlib import Path

import lance
import pandas as pd
import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    DagsterInstance,
    FloatMetadataValue,
    IntMetadataValue,
    StaticPartitionsDefinition,
    TableSchema,
    TableSchemaMetadataValue,
    TextMetadataValue,
    asset,
    materialize,
)
from dg_helpers import materialization

import lance_format
from lance_dagster import LanceIOManager


def _t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [float(i) for i in range(n)]})


def test_metadata_value_classes_and_data_version(tmp_path: Path, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))

    # Issue 12: a partitioned asset names the column its partition key is stored in.
    @asset(name="parts", metadata={"mode": "append", "partition_expr": "p"}, code_version="cv1",
           partitions_def=StaticPartitionsDefinition(["a", "b"]))
    def parts(context: AssetExecutionContext) -> pd.DataFrame:
        return _t(0, 5).append_column("p", pa.array([context.partition_key] * 5)).to_pandas()

    runs = [materialize([parts], resources={"io_manager": io}, instance=instance, partition_key=p)
            for p in ("a", "b", "a")]
    uri = str(tmp_path / "parts.lance")
    theirs = lance.dataset(uri)
    assert theirs.version == 3 and theirs.count_rows() == 15
    for v, run in enumerate(runs, start=1):
        mat = materialization(run, "parts")
        md = mat.metadata
        assert mat.tags["dagster/data_version"] == str(v)
        # Issue 12 made the version an identifier (text), as test_io_manager.py checks.
        assert md["lance/version"] == TextMetadataValue(str(v))
        assert isinstance(md["dagster/column_schema"], TableSchemaMetadataValue)
        schema = md["dagster/column_schema"].value
        assert isinstance(schema, TableSchema)
        assert [c.name for c in schema.columns] == ["id", "v", "p"]
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
