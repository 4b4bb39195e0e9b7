"""Reading Lance datasets through ``spark.read.format("lance")``."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

from .helpers import plan_text, spark_table

pytestmark = pytest.mark.slow


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "category": pa.array([f"c{i % 3}" for i in ids]),
        "x": pa.array([i * 0.5 for i in ids], pa.float64()),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array([float(i % 7) for i in ids for _ in range(2)],
                                                          pa.float32()), 2),
    })


@pytest.fixture
def history(tmp_path: Path) -> str:
    """A pylance dataset with 3 fragments, deletions, an overwrite-free history and a tag."""
    uri = str(tmp_path / "hist.lance")
    lance.write_dataset(_table(25), uri, max_rows_per_file=10)           # v1: 3 fragments
    ds = lance.dataset(uri)
    ds.delete("id % 4 = 1")                                                 # v2: deletion files
    lance.write_dataset(_table(5, start=100), uri, mode="append")          # v3
    lance.dataset(uri).tags.create("before-delete", 3)
    lance.dataset(uri).delete("id >= 102")                                  # v4
    return uri


def test_every_version_and_tag_reads_like_pylance(spark: Any, history: str) -> None:
    for version in range(1, 5):
        expected = lance.dataset(history, version=version).to_table().sort_by("id")
        got = spark_table(spark.read.format("lance").option("version", version).load(history))
        assert got.column("id").to_pylist() == expected.column("id").to_pylist()
        assert got.column("vec").to_pylist() == expected.column("vec").to_pylist()
        assert got.column("x").to_pylist() == expected.column("x").to_pylist()
    tagged = spark_table(spark.read.format("lance").option("tag", "before-delete").load(history))
    assert tagged.column("id").to_pylist() == lance.dataset(history, version=3).to_table().sort_by(
        "id").column("id").to_pylist()
    latest = spark_table(spark.read.format("lance").load(history))
    assert latest.equals(spark_table(spark.read.format("lance").option("version", 4).load(history)))


def test_schema_maps_types_to_spark(spark: Any, history: str) -> None:
    df = spark.read.format("lance").load(history)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "bigint"), ("category", "string"), ("x", "double"), ("vec", "array<float>")]


def test_one_partition_per_fragment_and_large_fragments_split(spark: Any, history: str) -> None:
    frags = lance.dataset(history).get_fragments()
    df = spark.read.format("lance").load(history)
    assert df.rdd.getNumPartitions() == len(frags)
    split = spark.read.format("lance").option("max_rows_per_partition", 4).load(history)
    expected = sum(-(-f.metadata.physical_rows // 4) for f in frags)
    assert split.rdd.getNumPartitions() == expected
    assert sorted(r.id for r in split.collect()) == sorted(r.id for r in df.collect())


def test_columns_option_prunes_the_scan(spark: Any, history: str) -> None:
    df = spark.read.format("lance").option("columns", "category,x").load(history)
    assert df.columns == ["category", "x"]
    plan = plan_text(df.groupBy("category").avg("x"))
    scan = next(line for line in plan.splitlines() if "BatchScan lance" in line)
    assert "category" in scan and "x#" in scan and "vec" not in scan and "id#" not in scan
    got = {r["category"]: r["avg(x)"] for r in df.groupBy("category").avg("x").collect()}
    tbl = lance.dataset(history).to_table().to_pandas()
    assert got == pytest.approx(tbl.groupby("category")["x"].mean().to_dict())


def test_filter_option_is_applied_in_the_scan(spark: Any, history: str) -> None:
    df = spark.read.format("lance").option("filter", "id > 10 AND category = 'c0'").load(history)
    expected = lance.dataset(history).to_table(filter="id > 10 AND category = 'c0'")
    assert sorted(r.id for r in df.collect()) == sorted(expected.column("id").to_pylist())


def test_filter_pushdown_pushes_exact_filters_and_leaves_the_rest_to_spark(spark: Any, history: str) -> None:
    def load() -> Any:
        return spark.read.format("lance").option("filter_pushdown", "true").load(history)

    pushed = load().filter("id >= 3 AND category IN ('c0', 'c2') AND category LIKE 'c%' AND NOT id = 8")
    assert "Filter (" not in plan_text(pushed)
    expected = lance.dataset(history).to_table(
        filter="id >= 3 AND category IN ('c0', 'c2') AND id != 8").column("id").to_pylist()
    assert sorted(r.id for r in pushed.collect()) == sorted(expected)
    # Floating point comparisons differ for NaN, so Spark keeps them.
    kept = load().filter("x > 3.0")
    assert "Filter (" in plan_text(kept)
    assert sorted(r.id for r in kept.collect()) == sorted(
        lance.dataset(history).to_table(filter="x > 3.0").column("id").to_pylist())


def test_unsigned_and_wide_types_map_losslessly(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "types.lance")
    big = 2**64 - 1
    tbl = pa.table({
        "id": pa.array([1, 2], pa.int32()),
        "u64": pa.array([big, 7], pa.uint64()),
        "u32": pa.array([2**32 - 1, 0], pa.uint32()),
        "u8": pa.array([255, 1], pa.uint8()),
        "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 6), None], pa.timestamp("us", tz="UTC")),
        "d": pa.array([dt.date(2024, 5, 6), dt.date(1970, 1, 1)], pa.date32()),
        "s": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int16()), ("b", pa.large_string())])),
        "l": pa.array([[1, 2], []], pa.large_list(pa.int64())),
    })
    lance.write_dataset(tbl, uri)
    df = spark.read.format("lance").load(uri)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {"id": "int", "u64": "decimal(20,0)", "u32": "bigint", "u8": "smallint",
                     "ts": "timestamp", "d": "date", "s": "struct<a:smallint,b:string>", "l": "array<bigint>"}
    rows = sorted(df.collect(), key=lambda r: r.id)
    assert rows[0].u64 == Decimal(big) and rows[1].u64 == Decimal(7)
    assert rows[0].u32 == 2**32 - 1 and rows[0].u8 == 255
    assert rows[0].s.b == "x" and rows[1].s is None and rows[0].l == [1, 2]


def test_types_spark_cannot_hold_are_refused_naming_the_column(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "time.lance")
    lance.write_dataset(pa.table({"id": [1], "t_of_day": pa.array([1000], pa.time64("us"))}), uri)
    with pytest.raises(Exception, match="t_of_day"):
        spark.read.format("lance").load(uri).collect()
    # Leaving the column out reads the rest.
    assert spark.read.format("lance").option("columns", "id").load(uri).count() == 1


def test_nanoseconds_are_not_truncated_silently(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "ns.lance")
    lance.write_dataset(pa.table({"id": [1, 2], "at": pa.array([1_000, 1_001], pa.timestamp("ns"))}), uri)
    with pytest.raises(Exception, match="'at'"):
        spark.read.format("lance").load(uri).collect()


def test_reads_from_s3_with_storage_options(spark: Any, s3_server: Any, s3_uri: str) -> None:
    _endpoint, _bucket, options = s3_server
    lance_format.write_dataset(_table(12), s3_uri, storage_options=options, max_rows_per_file=5)
    reader = spark.read.format("lance")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load(s3_uri)
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.id for r in df.collect()) == list(range(12))


def test_empty_dataset_reads_no_rows(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "empty.lance")
    lance.write_dataset(_table(0), uri)
    df = spark.read.format("lance").load(uri)
    assert df.count() == 0 and df.columns == ["id", "category", "x", "vec"]


def test_missing_column_or_version_is_reported(spark: Any, history: str) -> None:
    with pytest.raises(Exception, match="nope"):
        spark.read.format("lance").option("columns", "id,nope").load(history).collect()
    with pytest.raises(Exception, match="99"):
        spark.read.format("lance").option("version", 99).load(history).collect()
