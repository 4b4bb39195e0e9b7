"""Blob columns on Spark: read as their bytes (v1 and v2), written from a binary column as blobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

VALUES = [b"hello", b"", None, b"x" * 3000, b"world" * 10] * 8

pytestmark = pytest.mark.slow


def _pylance_blobs(uri: str, version: str) -> None:
    if version == "blob_v2":
        table = pa.table({"id": pa.array(range(len(VALUES)), pa.int64()), "b": lance.blob_array(VALUES)})
        lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=15)
        return
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    lance.write_dataset(pa.table({"id": list(range(len(VALUES))), "b": VALUES}, schema=schema), uri,
                        data_storage_version=version, max_rows_per_file=15)


def _pylance_bytes(uri: str) -> list[bytes | None]:
    ds = lance.dataset(uri)
    files = ds.take_blobs("b", indices=list(range(ds.count_rows())))
    ids = ds.to_table(columns=["id"]).column("id").to_pylist()
    by_id = {i: (None if f is None else f.read()) for i, f in zip(ids, files, strict=True)}
    return [by_id[i] for i in sorted(by_id)]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2", "blob_v2"])
def test_spark_reads_blob_columns_as_their_bytes(spark: Any, tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "blobs.lance")
    _pylance_blobs(uri, version)
    df = spark.read.format("lance").load(uri)
    assert df.schema["b"].dataType.simpleString() == "binary"
    rows = sorted(df.collect(), key=lambda r: r["id"])
    assert [None if r["b"] is None else bytes(r["b"]) for r in rows] == _pylance_bytes(uri)
    assert spark.read.format("lance").option("columns", "id").load(uri).count() == len(VALUES)


def test_spark_writes_a_blob_column_pylance_reads(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    rows = [(i, v if v is None else bytearray(v)) for i, v in enumerate(VALUES)]
    by_option = str(tmp_path / "opt.lance")
    df = spark.createDataFrame(rows, "id bigint, b binary")
    df.write.format("lance").mode("append").option("b.lance.encoding", "blob").option("data_storage_version", "2.1").save(by_option)
    by_meta = str(tmp_path / "meta.lance")
    df.withColumn("b", F.col("b").alias("b", metadata={"lance-encoding:blob": "true"})).write.format("lance").mode("append") \
        .option("data_storage_version", "2.1").save(by_meta)
    for uri in (by_option, by_meta):
        ds = lance.dataset(uri)
        assert ds.schema.field("b").metadata == {b"lance-encoding:blob": b"true"}
        assert _pylance_bytes(uri) == VALUES
        back = sorted(spark.read.format("lance").load(uri).collect(), key=lambda r: r["id"])
        assert [None if r["b"] is None else bytes(r["b"]) for r in back] == VALUES
