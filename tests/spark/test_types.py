"""Types written from Spark: vectors stay fixed-size, every Spark type round-trips, save modes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

from .helpers import data_files

pytestmark = pytest.mark.slow


def _vectors(spark: Any, n: int = 6, dim: int = 4) -> Any:
    rows = [(i, [float(i + j) for j in range(dim)]) for i in range(n)]
    return spark.createDataFrame(rows, "id bigint, vec array<float>")


def test_a_vector_column_stays_fixed_size_when_named_by_option_or_metadata(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    by_option = str(tmp_path / "opt.lance")
    (_vectors(spark).write.format("lance").mode("append").option("vec.arrow.fixed-size-list.size", "4")
     .save(by_option))
    assert lance.dataset(by_option).schema.field("vec").type == pa.list_(pa.float32(), 4)

    by_meta = str(tmp_path / "meta.lance")
    df = _vectors(spark)
    df = df.withColumn("vec", F.col("vec").alias("vec", metadata={"arrow.fixed-size-list.size": 4}))
    df.write.format("lance").mode("append").save(by_meta)
    ds = lance.dataset(by_meta)
    assert ds.schema.field("vec").type == pa.list_(pa.float32(), 4)
    assert ds.to_table().sort_by("id").column("vec").to_pylist() == [[float(i + j) for j in range(4)]
                                                                      for i in range(6)]

    # A row of another length fails the write, naming the column; nothing is committed.
    bad = spark.createDataFrame([(1, [1.0, 2.0])], "id bigint, vec array<float>")
    with pytest.raises(Exception, match="'vec'"):
        bad.write.format("lance").mode("append").option("vec.arrow.fixed-size-list.size", "4").save(
            str(tmp_path / "bad.lance"))
    with pytest.raises(Exception, match="needs an array column"):
        _vectors(spark).write.format("lance").mode("append").option("id.arrow.fixed-size-list.size", "4").save(
            str(tmp_path / "bad2.lance"))


def test_copying_a_lance_dataframe_keeps_its_vectors(spark: Any, tmp_path: Path) -> None:
    src, dst = str(tmp_path / "src.lance"), str(tmp_path / "dst.lance")
    vec = pa.FixedSizeListArray.from_arrays(pa.array([float(i) for i in range(24)], pa.float32()), 3)
    nested = pa.StructArray.from_arrays([vec], ["emb"])
    lance.write_dataset(pa.table({"id": pa.array(range(8), pa.int64()), "vec": vec, "s": nested}), src)
    df = spark.read.format("lance").load(src)
    assert df.schema["vec"].metadata == {"arrow.fixed-size-list.size": 3}
    df.select("id", "vec", "s").write.format("lance").mode("append").save(dst)
    assert lance.dataset(dst).schema.field("vec").type == pa.list_(pa.float32(), 3)
    assert lance.dataset(dst).schema.field("s").type == pa.struct([("emb", pa.list_(pa.float32(), 3))])
    assert lance.dataset(dst).to_table().equals(lance.dataset(src).to_table())


SPARK_TYPES = ("b tinyint, sh smallint, i int, l bigint, f float, d double, dec decimal(10,2), "
               "big decimal(38,0), s string, bin binary, ok boolean, day date, ts timestamp, ntz timestamp_ntz, "
               "arr array<int>, words array<string>, m map<string,int>, st struct<a:int,b:array<double>>, "
               "span interval day to second")


def _all_types_rows() -> list[tuple[Any, ...]]:
    ts = dt.datetime(2024, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)
    return [
        (1, -2, 3, 2**40, 1.5, -2.25, Decimal("12.34"), Decimal(10**37), "ä", b"\x00\x01", True,
         dt.date(2024, 1, 2), ts, dt.datetime(2024, 3, 4, 5, 6, 7), [1, None, 3], ["x"], {"k": 1},
         (1, [0.5, None]), dt.timedelta(days=1, microseconds=5)),
        (None,) * 19,
    ]


def test_every_spark_type_round_trips_as_pylance_sees_it(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    uri = str(tmp_path / "types.lance")
    df = spark.createDataFrame(_all_types_rows(), SPARK_TYPES)
    df.write.format("lance").mode("append").save(uri)
    ds = lance.dataset(uri)
    expected_types = to_arrow_schema(df.schema, timezone="UTC")
    assert [(f.name, f.type) for f in ds.schema] == [(f.name, f.type) for f in expected_types]
    assert ds.to_table().sort_by("i").to_pylist() == df.toArrow().sort_by("i").to_pylist()
    back = spark.read.format("lance").load(uri)
    assert back.schema.simpleString() == df.schema.simpleString()
    assert sorted(back.collect(), key=str) == sorted(df.collect(), key=str)
    # and an append of the same DataFrame casts into the stored types
    df.write.format("lance").mode("append").save(uri)
    assert lance.dataset(uri).count_rows() == 4


def test_errorifexists_and_ignore_are_honoured_as_options(spark: Any, tmp_path: Path) -> None:
    from lance_format.spark import write_dataframe

    uri = str(tmp_path / "modes.lance")
    _vectors(spark).write.format("lance").mode("append").option("mode", "ignore").save(uri)   # creates
    assert lance.dataset(uri).version == 1
    files = data_files(uri)
    _vectors(spark, 3).write.format("lance").mode("append").option("mode", "ignore").save(uri)  # nothing
    assert lance.dataset(uri).version == 1 and data_files(uri) == files
    with pytest.raises(Exception, match="already exists"):
        _vectors(spark).write.format("lance").mode("append").option("mode", "errorifexists").save(uri)
    assert lance.dataset(uri).version == 1 and data_files(uri) == files
    ds = write_dataframe(_vectors(spark), uri, mode="ignore")
    assert ds.version == 1 and data_files(uri) == files
    with pytest.raises(Exception, match="already exists"):
        write_dataframe(_vectors(spark), uri, mode="error")
    with pytest.raises(Exception, match="must be append, overwrite"):
        _vectors(spark).write.format("lance").mode("append").option("mode", "upsert").save(uri)
