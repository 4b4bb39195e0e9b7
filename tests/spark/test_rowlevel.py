"""Row-level writes from Spark (merge_insert, update, delete, add_columns) equal the local verbs'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.spark import add_columns, delete, merge_insert, update

from .helpers import data_files

pytestmark = pytest.mark.slow


def _rows(ids: list[int], tag: str = "old") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{tag}{i}" for i in ids],
                     "score": pa.array([i * 1.5 for i in ids], pa.float64())})


def _twins(tmp_path: Path, stable: bool = False) -> tuple[str, str]:
    """Two identical pylance datasets: several fragments, deletions, optionally stable row ids."""
    uris = []
    for name in ("local", "spark"):
        uri = str(tmp_path / f"{name}.lance")
        lance.write_dataset(_rows(list(range(40))), uri, max_rows_per_file=9, enable_stable_row_ids=stable)
        lance.dataset(uri).delete("id % 7 = 3")
        uris.append(uri)
    return uris[0], uris[1]


def _same(local: str, remote: str, stable: bool = False) -> None:
    a = lance.dataset(local).to_table(with_row_id=stable).sort_by("id")
    b = lance.dataset(remote).to_table(with_row_id=stable).sort_by("id")
    assert b.equals(a)
    assert lance.dataset(remote).version == lance.dataset(local).version
    ta, tb = lance_format.dataset(local).read_transaction(), lance_format.dataset(remote).read_transaction()
    assert ta is not None and tb is not None and type(tb.operation) is type(ta.operation)


@pytest.mark.parametrize("stable", [False, True])
def test_upsert_equals_the_local_merge_insert(spark: Any, tmp_path: Path, stable: bool) -> None:
    local, remote = _twins(tmp_path, stable)
    source = _rows([5, 11, 20, 38, 100, 101, 102], tag="new")   # 3 matches; 38 was deleted: an insert
    expected = (lance_format.dataset(local).merge_insert("id").when_matched_update_all()
                .when_not_matched_insert_all().execute(source))
    got = merge_insert(spark.createDataFrame(source), remote, "id", when_matched="update_all",
                       when_not_matched="insert_all")
    assert got == expected
    assert dict(got) == {"num_inserted_rows": 4, "num_updated_rows": 3, "num_deleted_rows": 0}
    _same(local, remote, stable)
    txn = lance_format.dataset(remote).read_transaction()
    assert txn is not None and txn.operation.update_mode == "rewrite_rows"


def test_a_partial_source_updates_by_keys_and_keeps_the_other_columns(spark: Any, tmp_path: Path) -> None:
    local, remote = _twins(tmp_path)
    source = pa.table({"id": pa.array([1, 2, 30, 999], pa.int64()), "score": pa.array([0.0, -1.0, 7.5, 1.0])})
    expected = lance_format.dataset(local).merge_insert("id").when_matched_update_all().execute(source)
    got = update(spark.createDataFrame(source), remote, "id")
    assert got == expected and got["num_updated_rows"] == 3
    _same(local, remote)


def test_delete_by_keys_and_by_source_equal_the_local_merge(spark: Any, tmp_path: Path) -> None:
    local, remote = _twins(tmp_path)
    keys = pa.table({"id": pa.array([0, 4, 8, 9, 77], pa.int64())})
    expected = lance_format.dataset(local).merge_insert("id").when_matched_delete().execute(keys)
    assert delete(spark.createDataFrame(keys), remote, "id") == expected
    _same(local, remote)
    keep = _rows([1, 2, 5, 6], tag="k")
    expected = (lance_format.dataset(local).merge_insert("id").when_not_matched_insert_all()
                .when_not_matched_by_source_delete().execute(keep))
    got = merge_insert(spark.createDataFrame(keep), remote, "id", when_not_matched="insert_all",
                       when_not_matched_by_source="delete")
    assert got == expected
    _same(local, remote)


def test_ambiguous_or_failing_merges_leave_no_version_and_no_files(spark: Any, tmp_path: Path) -> None:
    _local, remote = _twins(tmp_path)
    before, files = lance.dataset(remote).version, data_files(remote)
    twice = spark.createDataFrame(pa.concat_tables([_rows([5], "a"), _rows([5], "b"), _rows([200], "c")]))
    with pytest.raises(Exception, match="ambiguous merge_insert"):
        merge_insert(twice, remote, "id", when_matched="update_all", when_not_matched="insert_all")
    with pytest.raises(Exception, match="when_matched_fail"):
        merge_insert(spark.createDataFrame(_rows([6, 300])), remote, "id", when_matched="fail",
                     when_not_matched="insert_all")
    with pytest.raises(Exception, match="not in the dataset"):
        merge_insert(spark.range(3).selectExpr("id", "id AS other"), remote, "id", when_not_matched="insert_all")
    assert lance.dataset(remote).version == before and data_files(remote) == files


@pytest.mark.parametrize("stable", [False, True])
def test_add_columns_from_spark_expressions_and_udfs_equals_local(spark: Any, tmp_path: Path, stable: bool) -> None:
    from pyspark.sql import functions as F

    local, remote = _twins(tmp_path, stable)
    lance_format.dataset(local).add_columns({"double_id": "id * 2", "shout": "upper(name)"})
    shout = F.udf(lambda s: s.upper(), "string")
    ds = add_columns(spark, remote, {"double_id": F.col("id") * 2, "shout": shout("name")})
    assert ds.version == lance.dataset(remote).version
    _same(local, remote, stable)
    assert lance.dataset(remote).schema.field("double_id").type == pa.int64()
    # the new columns live in new data files only, one per fragment (pylance's Merge shape)
    frags = lance_format.dataset(remote).manifest.fragments
    assert all(len(f.files) == 2 for f in frags)
    txn = lance_format.dataset(remote).read_transaction()
    assert txn is not None and type(txn.operation).__name__ == "Merge"
    # a Spark SQL string and read_columns
    add_columns(spark, remote, {"half": "score / 2"}, read_columns=["score"])
    tbl = lance.dataset(remote).to_table().sort_by("id")
    assert tbl.column("half").to_pylist() == [s / 2 for s in tbl.column("score").to_pylist()]
    with pytest.raises(Exception, match="the name is taken"):
        add_columns(spark, remote, {"id": F.lit(1)})
