"""Read and write options as a lance-spark user gives them: checked, time travel, metadata columns, URIs."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

from lance_format.spark.source import LanceDataSource

from .helpers import spark_table

pytestmark = pytest.mark.slow


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def test_a_misspelt_read_option_is_an_error_naming_the_valid_ones(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(3), uri)
    with pytest.raises(Exception, match=r"unknown read option\(s\) 'verison' \(did you mean 'version'\?\)") as err:
        spark.read.format("lance").option("verison", 1).load(uri).collect()
    assert "timestamp" in str(err.value) and "fragment_ids" in str(err.value)
    with pytest.raises(Exception, match="'max_rows_per_fil' \\(did you mean 'max_rows_per_file'\\?\\)"):
        spark.range(2).write.format("lance").mode("append").option("max_rows_per_fil", 1).save(uri)
    assert lance.dataset(uri).version == 1
    with pytest.raises(Exception, match="give one of 'version', 'tag' or 'timestamp'"):
        spark.read.format("lance").option("version", 1).option("timestamp", "2024-01-01").load(uri).collect()


def test_timestamp_opens_the_version_pylance_opens_asof(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(3), uri)
    for start in (10, 20):
        time.sleep(0.05)
        lance.write_dataset(_table(2, start=start), uri, mode="append")
    stamps = [v["timestamp"] for v in lance.dataset(uri).versions()]
    for when in (stamps[1] + dt.timedelta(microseconds=10), stamps[2] - dt.timedelta(microseconds=10),
                 stamps[2] + dt.timedelta(seconds=1)):
        expected = lance.dataset(uri, asof=when).to_table().sort_by("id")
        got = spark_table(spark.read.format("lance").option("timestamp", when.isoformat(sep=" ")).load(uri))
        assert got.equals(expected), when
    with pytest.raises(Exception, match="no version was committed before"):
        spark.read.format("lance").option("timestamp", "2001-01-01T00:00:00").load(uri).collect()


@pytest.mark.parametrize("version", ["legacy", "2.0", "2.1", "2.2", "stable-row-ids"])
def test_metadata_columns_equal_pylances_row_ids_and_addresses(spark: Any, tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "m.lance")
    kwargs: dict[str, Any] = ({"enable_stable_row_ids": True} if version == "stable-row-ids"
                              else {"data_storage_version": version})
    lance.write_dataset(_table(30), uri, max_rows_per_file=12, **kwargs)
    lance.dataset(uri).delete("id % 5 = 2")
    lance.write_dataset(_table(4, start=100), uri, mode="append")
    if version == "stable-row-ids":
        lance.dataset(uri).update({"name": "'changed'"}, where="id < 3")   # moves rows: ids stay, addresses change
    expected = lance.dataset(uri).to_table(columns=["id"], with_row_id=True, with_row_address=True).sort_by("id")
    df = spark.read.format("lance").option("columns", "id,_rowid,_rowaddr,_fragid").load(uri)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "bigint"), ("_rowid", "bigint"), ("_rowaddr", "bigint"), ("_fragid", "int")]
    got = spark_table(df)
    assert got.column("_rowid").to_pylist() == expected.column("_rowid").to_pylist()
    assert got.column("_rowaddr").to_pylist() == expected.column("_rowaddr").to_pylist()
    assert got.column("_fragid").to_pylist() == [a >> 32 for a in expected.column("_rowaddr").to_pylist()]
    # metadata_columns appends them to every column; a user schema may name them too
    every = spark.read.format("lance").option("metadata_columns", "_fragid").load(uri)
    assert every.columns == ["id", "name", "_fragid"]
    typed = spark.read.format("lance").schema("_rowid bigint, id bigint").load(uri)
    assert spark_table(typed).column("_rowid").to_pylist() == expected.column("_rowid").to_pylist()


def test_fragment_ids_read_only_those_fragments(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "f.lance")
    lance.write_dataset(_table(40), uri, max_rows_per_file=10)
    ds = lance.dataset(uri)
    ids = [f.fragment_id for f in ds.get_fragments()]
    chosen = [ids[3], ids[1]]
    df = spark.read.format("lance").option("fragment_ids", ",".join(map(str, chosen))).load(uri)
    expected = ds.scanner(fragments=[ds.get_fragment(i) for i in chosen]).to_table()
    assert df.rdd.getNumPartitions() == 2
    assert spark_table(df).equals(expected.sort_by("id"))
    with pytest.raises(Exception, match="has no fragment 99"):
        spark.read.format("lance").option("fragment_ids", "99").load(uri).collect()


def test_batch_size_cuts_the_batches_the_source_hands_spark(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "b.lance")
    lance.write_dataset(_table(40), uri, max_rows_per_file=20)
    lance.dataset(uri).delete("id % 9 = 0")
    df = spark.read.format("lance").option("batch_size", "7").load(uri)
    assert spark_table(df).equals(lance.dataset(uri).to_table().sort_by("id"))
    # what Spark's Python worker gets from the source for each partition: batches of at most 7 rows
    source = LanceDataSource(options={"path": uri, "batch_size": "7"})
    reader = source.reader(source.schema())
    sizes = [b.num_rows for p in reader.partitions() for b in reader.read(p)]
    assert max(sizes) <= 7 and sum(sizes) == lance.dataset(uri).count_rows()
    with pytest.raises(Exception, match="'batch_size' must be positive"):
        spark.read.format("lance").option("batch_size", "0").load(uri).collect()


def test_hadoop_file_uris_name_the_local_dataset(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "with space"
    root.mkdir()
    path = root / "u.lance"
    lance.write_dataset(_table(5), str(path))
    expected = lance.dataset(str(path)).to_table()
    for uri in (f"file:{path}", f"file://{path}", f"file:{str(path).replace(' ', '%20')}",
                f"file://localhost{path}"):
        assert spark_table(spark.read.format("lance").load(uri)).equals(expected), uri
    spark.createDataFrame(_table(2, start=50)).write.format("lance").mode("append").save(f"file:{path}")
    assert lance.dataset(str(path)).count_rows() == 7


def test_s3a_uris_and_storage_options_reach_the_object_store(spark: Any, s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    s3a = "s3a://" + s3_uri[len("s3://"):]
    writer = spark.createDataFrame(_table(6)).write.format("lance").mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(s3a)
    assert lance.dataset(s3_uri, storage_options=options).count_rows() == 6
    reader = spark.read.format("lance")
    for key, value in options.items():
        reader = reader.option(f"storage.{key}", value)
    assert sorted(r.id for r in reader.load(s3a).collect()) == list(range(6))
