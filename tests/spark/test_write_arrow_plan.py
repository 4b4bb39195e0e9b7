"""Spark write tasks write what the driver planned: the table's field ids and file version.

These run the executor's path (``plan_write`` on the driver, ``write_task`` on Spark's Arrow
batches, one commit) without a Spark session, and read the result back with pylance 14.0.2.
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from lance_format.spark.options import WriteOptions
from lance_format.spark.writer import commit_fragments, plan_write, write_task


def _write(uri: str, batches: list[pa.RecordBatch], *, overwrite: bool, **options: str) -> None:
    opts = WriteOptions.parse({"path": uri, **options}, overwrite=overwrite)
    plan = plan_write(opts, batches[0].schema)
    message = write_task(plan, iter(batches))
    commit_fragments(plan, message.fragments)


def test_append_task_writes_the_tables_field_ids(tmp_path: Path) -> None:
    uri = str(tmp_path / "gaps.lance")
    lance.write_dataset(pa.table({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]}), uri)
    lance.dataset(uri).drop_columns(["b"])  # the table's ids are now 0 and 2
    spark_batch = pa.record_batch({"c": [2.5, 3.5, 4.5], "a": [3, 4, 5]})  # Spark's column order
    _write(uri, [spark_batch.slice(0, 0), spark_batch], overwrite=False)
    ds = lance.dataset(uri)
    assert [f.id() for f in ds.lance_schema.fields()] == [0, 2]
    tbl = ds.to_table().sort_by("a")
    assert tbl.to_pydict() == {"a": [1, 2, 3, 4, 5], "c": [0.5, 1.5, 2.5, 3.5, 4.5]}


def test_overwrite_task_keeps_the_tables_file_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "v20.lance")
    lance.write_dataset(pa.table({"id": [1]}), uri, data_storage_version="2.0")
    vectors = pa.array([[float(i), float(i + 1)] for i in range(4)], pa.list_(pa.float32()))
    batch = pa.record_batch({"id": pa.array(range(4), pa.int64()), "vec": vectors})
    _write(uri, [batch.slice(0, 2), batch.slice(2)], overwrite=True)
    ds = lance.dataset(uri)
    assert ds.version == 2
    assert ds.data_storage_version == "2.0"
    assert {f.data_files()[0].file_major_version for f in ds.get_fragments()} == {2}
    assert {f.data_files()[0].file_minor_version for f in ds.get_fragments()} == {0}
    assert ds.to_table().sort_by("id").column("vec").to_pylist() == vectors.to_pylist()


def test_append_task_casts_spark_lists_to_the_tables_vectors(tmp_path: Path) -> None:
    uri = str(tmp_path / "vec.lance")
    fsl = pa.list_(pa.float32(), 2)
    lance.write_dataset(pa.table({"id": pa.array([0], pa.int64()), "vec": pa.array([[0.0, 0.5]], fsl)}), uri,
                        data_storage_version="2.1")
    spark_batch = pa.record_batch({"id": pa.array([1, 2], pa.int64()),
                                   "vec": pa.array([[1.0, 1.5], [2.0, 2.5]], pa.list_(pa.float32()))})
    _write(uri, [spark_batch], overwrite=False)
    ds = lance.dataset(uri)
    assert ds.schema.field("vec").type == fsl
    assert {f.data_files()[0].file_minor_version for f in ds.get_fragments()} == {1}
    assert ds.to_table().sort_by("id").column("vec").to_pylist() == [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]
