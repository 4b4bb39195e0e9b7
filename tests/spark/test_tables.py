"""Catalog tables over Lance datasets: CREATE TABLE ... USING lance LOCATION, save_as_table, views."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

from .helpers import spark_table

pytestmark = pytest.mark.slow


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


@pytest.fixture
def name(spark: Any) -> Iterator[str]:
    """A fresh table name, dropped afterwards (the dataset stays)."""
    table = f"lance_t_{uuid.uuid4().hex[:8]}"
    yield table
    spark.sql(f"DROP TABLE IF EXISTS {table}")


def test_create_table_location_reads_the_latest_and_time_travels_with_options(
        spark: Any, tmp_path: Path, name: str) -> None:
    uri = str(tmp_path / "t.lance")
    lance.write_dataset(_table(10), uri, max_rows_per_file=4)
    spark.sql(f"CREATE TABLE {name} USING lance LOCATION 'file:{uri}'")   # the Hadoop form Spark keeps
    assert spark_table(spark.table(name)).equals(lance.dataset(uri).to_table().sort_by("id"))
    lance.write_dataset(_table(3, start=50), uri, mode="append")            # v2, after the table was created
    assert spark_table(spark.table(name)).equals(lance.dataset(uri).to_table().sort_by("id"))
    got = spark.sql(f"SELECT id FROM {name} WHERE id % 2 = 0 ORDER BY id").collect()
    assert [r.id for r in got] == lance.dataset(uri).to_table(filter="id % 2 = 0").sort_by("id")["id"].to_pylist()
    old = spark.sql(f"SELECT * FROM {name} WITH ('version' = '1')")
    assert spark_table(old).equals(lance.dataset(uri, version=1).to_table().sort_by("id"))
    with pytest.raises(Exception, match="TIME_TRAVEL"):      # Spark refuses it before the source sees it
        spark.sql(f"SELECT * FROM {name} VERSION AS OF 1").collect()
    with pytest.raises(Exception, match="does not tell a Python data source which catalog table"):
        spark.sql(f"INSERT INTO {name} VALUES (99, 'x')")
    assert lance.dataset(uri).version == 2
    spark.sql(f"DROP TABLE {name}")
    assert lance.dataset(uri).count_rows() == 13                            # the dataset stays


def test_save_as_table_registers_a_table_spark_can_read(spark: Any, tmp_path: Path, name: str) -> None:
    from lance_format.spark import save_as_table

    uri = str(tmp_path / "s.lance")
    df = spark.createDataFrame(_table(6))
    ds = save_as_table(df, name, uri)
    assert ds.version == 1
    assert spark_table(spark.table(name)).equals(lance.dataset(uri).to_table().sort_by("id"))
    save_as_table(spark.createDataFrame(_table(2, start=10)), name, uri)                 # append: same table
    assert spark.table(name).count() == 8
    wider = spark.range(3).selectExpr("id", "id * 2 AS twice")
    save_as_table(wider, name, uri, mode="overwrite")                                    # new schema
    assert spark.table(name).columns == ["id", "twice"]
    assert spark_table(spark.table(name)).to_pylist() == lance.dataset(uri).to_table().sort_by("id").to_pylist()


def test_plain_save_as_table_says_how_to_register_a_readable_table(spark: Any, tmp_path: Path, name: str) -> None:
    uri = str(tmp_path / "p.lance")
    spark.createDataFrame(_table(4)).write.format("lance").mode("append").option("path", uri).saveAsTable(name)
    assert lance.dataset(uri).count_rows() == 4                             # written ...
    with pytest.raises(Exception, match="CREATE TABLE ... USING lance LOCATION"):
        spark.table(name).collect()                                         # ... but PySpark passes no location


def test_a_temporary_view_is_path_based_sql(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "v.lance")
    lance.write_dataset(_table(5), uri)
    lance.write_dataset(_table(5, start=5), uri, mode="append")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW lance_view USING lance OPTIONS (path '{uri}', version '1')")
    assert spark_table(spark.sql("SELECT * FROM lance_view")).equals(lance.dataset(uri, version=1).to_table())
