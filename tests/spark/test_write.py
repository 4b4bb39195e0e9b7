"""Writing DataFrames with ``df.write.format("lance")``: one commit per job, nothing left on failure."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

from .helpers import data_files

pytestmark = pytest.mark.slow


def _df(spark: Any, n: int, start: int = 0, partitions: int = 2) -> Any:
    return spark.range(start, start + n, numPartitions=partitions).selectExpr(
        "id", "concat('c', cast(id % 3 as string)) as category", "cast(id as double) * 0.5 as x")


def test_spark_written_dataset_reads_identically_in_pylance(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "out.lance")
    nullable = {f.name: f.nullable for f in _df(spark, 1).schema.fields}
    _df(spark, 20).write.format("lance").mode("append").save(uri)
    _df(spark, 10, start=20, partitions=3).write.format("lance").mode("append").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 2  # one commit per job
    assert [(f.name, f.type) for f in ds.schema] == [
        ("id", pa.int64()), ("category", pa.string()), ("x", pa.float64())]
    assert {f.name: f.nullable for f in ds.schema} == nullable  # Spark's nullability is kept
    tbl = ds.to_table().sort_by("id")
    assert tbl.column("id").to_pylist() == list(range(30))
    assert tbl.column("category").to_pylist() == [f"c{i % 3}" for i in range(30)]
    assert lance.dataset(uri, version=1).count_rows() == 20
    # and through Spark again
    assert sorted(r.id for r in spark.read.format("lance").load(uri).collect()) == list(range(30))


def test_overwrite_replaces_rows_and_schema(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "ow.lance")
    _df(spark, 10).write.format("lance").mode("append").save(uri)
    spark.range(3).selectExpr("id * 10 as k").write.format("lance").mode("overwrite").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 2 and ds.schema.names == ["k"]
    assert sorted(ds.to_table().column("k").to_pylist()) == [0, 10, 20]


def test_create_mode_refuses_an_existing_dataset(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "create.lance")
    _df(spark, 4).write.format("lance").mode("append").option("mode", "create").save(uri)
    before = data_files(uri)
    with pytest.raises(Exception, match="already exists"):
        _df(spark, 4).write.format("lance").mode("append").option("mode", "create").save(uri)
    assert lance.dataset(uri).version == 1 and data_files(uri) == before


def test_write_options_reach_the_dataset(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "opts.lance")
    props = {"dagster/run_id": "r-1", "asset": "events"}
    (_df(spark, 25, partitions=1).write.format("lance").mode("append")
     .option("data_storage_version", "2.1").option("max_rows_per_file", 10)
     .option("enable_stable_row_ids", "true").option("transaction_properties", json.dumps(props))
     .option("commit_message", "from spark").save(uri))
    ds = lance.dataset(uri)
    assert ds.data_storage_version == "2.1"
    assert [f.count_rows() for f in ds.get_fragments()] == [10, 10, 5]
    assert ds.has_stable_row_ids
    assert sorted(ds.to_table(with_row_id=True).column("_rowid").to_pylist()) == list(range(25))
    txn = lance_format.dataset(uri).read_transaction()
    assert txn is not None
    assert {k: txn.transaction_properties[k] for k in props} == props


def test_unsigned_columns_round_trip_through_spark(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "u64.lance")
    lance.write_dataset(pa.table({"id": pa.array([2**64 - 1, 3], pa.uint64()), "v": pa.array([1, 2], pa.uint8())}),
                        uri)
    spark.read.format("lance").load(uri).write.format("lance").mode("append").save(uri)
    tbl = lance.dataset(uri).to_table()
    assert tbl.schema.field("id").type == pa.uint64()
    assert sorted(tbl.column("id").to_pylist()) == [3, 3, 2**64 - 1, 2**64 - 1]


def test_appending_an_unknown_column_is_refused(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "extra.lance")
    _df(spark, 3).write.format("lance").mode("append").save(uri)
    with pytest.raises(Exception, match="surprise"):
        _df(spark, 3).selectExpr("*", "1 as surprise").write.format("lance").mode("append").save(uri)
    assert lance.dataset(uri).version == 1


def _ids_in_new_files(uri: str, before: set[str]) -> set[int]:
    """``id`` values in the complete data files of ``uri`` that are not in ``before``."""
    from lance_format.file import LanceFileReader
    from lance_format.storage import open_store

    store = open_store(str(Path(uri) / "data"))
    ids: set[int] = set()
    for name in data_files(uri) - before:
        if name.endswith(".lance"):  # complete files only (writes land by rename)
            ids.update(LanceFileReader(None, store=store, key=name).read_all().to_table().column("id").to_pylist())
    return ids


def test_a_failing_task_leaves_no_version_and_no_files(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "fail.lance")

    def _fail_late(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows and batch.column(0)[0].as_py() >= 30:
                yield batch  # this task writes full data files first ...
                # ... and fails once the other task has written all its rows: a task still
                # running when the job fails is cancelled, which is not what this tests.
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not set(range(30)) <= _ids_in_new_files(uri, before):
                    time.sleep(0.1)
                time.sleep(1.0)  # the other task reports its fragments to the driver
                raise RuntimeError("boom in a write task")
            yield batch

    _df(spark, 5).write.format("lance").mode("append").save(uri)
    before = data_files(uri)
    df = spark.range(0, 60, numPartitions=2).mapInArrow(_fail_late, "id long")
    df = df.selectExpr("id", "concat('c', cast(id % 3 as string)) as category", "cast(id as double) * 0.5 as x")
    with pytest.raises(Exception, match="boom in a write task"):
        df.write.format("lance").mode("append").option("max_rows_per_file", 10).save(uri)
    assert lance.dataset(uri).version == 1
    assert data_files(uri) == before
    assert not list((Path(uri) / "_versions").glob("2*"))


def test_concurrent_spark_and_local_appends_both_land(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "concurrent.lance")

    def _append_locally(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Runs inside the Spark job (defined here so Spark pickles it by value), after the writer pinned its read version.
        for batch in batches:
            uri = batch.column(0)[0].as_py() if batch.num_rows else None
            if uri is not None:
                tbl = pa.table({"id": pa.array([-1], pa.int64()), "category": ["local"], "x": [0.0]})
                lance_format.write_dataset(tbl, uri, mode="append")
            yield pa.record_batch({"id": pa.array([7, 8], pa.int64())})

    _df(spark, 3).write.format("lance").mode("append").save(uri)
    df = spark.createDataFrame([(uri,)], "uri string").coalesce(1).mapInArrow(_append_locally, "id long")
    df = df.selectExpr("id", "'spark' as category", "1.5 as x")
    df.write.format("lance").mode("append").save(uri)
    ds = lance.dataset(uri)
    assert ds.version == 3
    cats = ds.to_table().column("category").to_pylist()
    assert cats.count("local") == 1 and cats.count("spark") == 2


def test_writes_to_s3_with_storage_options(spark: Any, s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    writer = _df(spark, 12).write.format("lance").mode("append").option("storage_options", json.dumps(options))
    writer.save(s3_uri)
    ds = lance_format.dataset(s3_uri, storage_options=options)
    assert ds.version == 1 and sorted(ds.to_table().column("id").to_pylist()) == list(range(12))


def test_write_dataframe_returns_the_version_it_committed(spark: Any, tmp_path: Path) -> None:
    from lance_format.spark import write_dataframe

    uri = str(tmp_path / "wd.lance")
    first = write_dataframe(_df(spark, 4), uri, mode="create", transaction_properties={"run": "a"})
    lance_format.write_dataset(pa.table({"id": pa.array([99], pa.int64()), "category": ["z"], "x": [1.0]}), uri,
                               mode="append")
    second = write_dataframe(_df(spark, 3), uri, mode="overwrite", max_rows_per_file=2)
    assert (first.version, second.version) == (1, 3)
    assert first.count_rows() == 4 and second.count_rows() == 3 and len(second.get_fragments()) == 2
    txn = first.read_transaction()
    assert txn is not None and txn.transaction_properties["run"] == "a"
