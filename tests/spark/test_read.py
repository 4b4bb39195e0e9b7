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


@pytest.fixture
def awkward(tmp_path: Path) -> str:
    """70 rows over 4 fragments with deletions, NaN and null floats, null strings and dates."""
    uri = str(tmp_path / "awkward.lance")
    n = 80
    x = [float("nan") if i % 11 == 0 else None if i % 13 == 0 else i * 0.25 - 5 for i in range(n)]
    tbl = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "x": pa.array(x, pa.float64()),
        "f": pa.array([None if v is None else v for v in x], pa.float32()),
        "s": pa.array([None if i % 7 == 0 else f"k{i % 5}" for i in range(n)]),
        "d": pa.array([dt.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
    })
    lance.write_dataset(tbl, uri, max_rows_per_file=20)
    lance.dataset(uri).delete("id % 8 = 3")
    return uri


#: Filters of every shape Spark hands a source (comparisons, IN, LIKE, null tests, NOT, OR,
#: floats with NaN and null, dates) and shapes it does not (OR, arithmetic, functions).
FILTER_SHAPES = [
    "id < 8", "id >= 70 AND s = 'k1'", "x > 3.0", "x <= -1.5", "x = 'NaN'", "NOT x > 0", "f < 2.5",
    "x IS NULL", "x IS NOT NULL", "isnan(x)", "s IN ('k0', 'k2')", "NOT s IN ('k0')", "s LIKE 'k%'",
    "s LIKE '%3'", "s IS NULL", "id < 5 OR x > 10", "id % 3 = 0", "d = DATE'2024-01-05'", "d > DATE'2024-01-20'",
    "x <=> NULL", "NOT (x < 0 OR s = 'k4')",
]


def test_a_reused_dataframe_answers_every_filter_and_then_every_row(spark: Any, awkward: str) -> None:
    # Spark's semantics on pylance's rows are the oracle: the same filter over a DataFrame
    # made from pylance's table (Spark orders NaN above numbers, NaN = NaN is true).
    expected = lance.dataset(awkward).to_table()
    oracle = spark.createDataFrame(expected)  # Arrow keeps nulls apart from NaN (pandas would not)
    total = lance.dataset(awkward).count_rows()
    assert total == 70
    df = spark.read.format("lance").load(awkward)
    for shape in FILTER_SHAPES:
        got = sorted(r.id for r in df.filter(shape).select("id").collect())
        assert got == sorted(r.id for r in oracle.filter(shape).select("id").collect()), shape
        assert df.count() == total, f"the unfiltered count after {shape!r}"
    assert sorted(r.id for r in df.collect()) == sorted(expected.column("id").to_pylist())


def test_a_scan_filter_is_part_of_its_own_dataframe_only(spark: Any, awkward: str) -> None:
    pred = "x > 3.0 AND s = 'k1'"
    expected = lance.dataset(awkward).to_table(filter=pred).column("id").to_pylist()
    filtered = spark.read.format("lance").option("filter", pred).load(awkward)
    plain = spark.read.format("lance").load(awkward)
    for _ in range(2):
        assert sorted(r.id for r in filtered.collect()) == sorted(expected)
        assert filtered.filter("id > 40").count() == len([i for i in expected if i > 40])
        assert plain.count() == 70
    # The filter may name columns the projection leaves out, as in pylance.
    narrow = spark.read.format("lance").option("columns", "id").option("filter", pred).load(awkward)
    assert narrow.columns == ["id"] and sorted(r.id for r in narrow.collect()) == sorted(expected)


def test_filter_pushdown_option_is_refused_with_the_reason(spark: Any, awkward: str) -> None:
    with pytest.raises(Exception, match="reuses a reader planned"):
        spark.read.format("lance").option("filter_pushdown", "true").load(awkward).collect()


def test_a_user_schema_is_the_projection_read(spark: Any, history: str) -> None:
    df = spark.read.format("lance").schema("x double, id bigint").load(history)
    assert df.columns == ["x", "id"]
    scan = next(line for line in plan_text(df).splitlines() if "BatchScan lance" in line)
    assert "vec" not in scan and "category" not in scan
    expected = lance.dataset(history).to_table(columns=["x", "id"])
    assert spark_table(df).equals(expected.sort_by("id"))
    with pytest.raises(Exception, match="'id' is read as bigint, not int"):
        spark.read.format("lance").schema("id int").load(history).collect()
    with pytest.raises(Exception, match="nope"):
        spark.read.format("lance").schema("id bigint, nope string").load(history).collect()


def test_limit_option_reads_pylances_first_rows(spark: Any, history: str) -> None:
    ds = lance.dataset(history)
    for limit in (0, 1, 7, 8, 1000):
        df = spark.read.format("lance").option("limit", limit).load(history)
        assert [r.id for r in df.collect()] == ds.to_table(limit=limit).column("id").to_pylist()
    df = spark.read.format("lance").option("limit", 3).option("filter", "category = 'c1'").load(history)
    assert df.rdd.getNumPartitions() == 1
    assert [r.id for r in df.collect()] == ds.to_table(filter="category = 'c1'", limit=3).column("id").to_pylist()
    few = spark.read.format("lance").option("limit", 4).load(history)
    assert few.rdd.getNumPartitions() == 1  # only the first fragment is planned


def test_count_rows_answers_from_the_manifest_or_the_filter_columns(spark: Any, history: str) -> None:
    from lance_format.spark import count_rows

    ds = lance.dataset(history)
    assert count_rows(spark, history) == ds.count_rows()
    assert count_rows(spark, history, "x > 3 AND category != 'c0'") == ds.count_rows("x > 3 AND category != 'c0'")
    assert count_rows(spark, history, "id > 2", version=2) == lance.dataset(history, version=2).count_rows("id > 2")


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


def test_without_the_option_only_unbalanced_or_lone_fragments_are_split(spark: Any, tmp_path: Path) -> None:
    ids = pa.table({"id": pa.array(range(720_000), pa.int64())})
    lone = str(tmp_path / "lone.lance")
    lance.write_dataset(ids.slice(0, 300_000), lone)                       # one fragment: two cores' worth
    assert spark.read.format("lance").load(lone).rdd.getNumPartitions() == 2
    even = str(tmp_path / "even.lance")
    lance.write_dataset(ids, even, max_rows_per_file=180_000)              # 4 equal fragments: one task each
    assert spark.read.format("lance").load(even).rdd.getNumPartitions() == 4
    skewed = str(tmp_path / "skewed.lance")
    lance.write_dataset(ids.slice(0, 120_000), skewed, max_rows_per_file=40_000)
    lance.write_dataset(ids.slice(120_000), skewed, mode="append")         # 600k rows next to three of 40k
    df = spark.read.format("lance").load(skewed)
    assert df.rdd.getNumPartitions() == 3 + 4                               # the large one in median-scale pieces
    got = df.toArrow().column("id")
    assert len(got) == 720_000 and pa.compute.sum(got).as_py() == sum(range(720_000))


def test_a_small_lance_table_broadcasts_in_a_join_with_the_hint(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    dim = str(tmp_path / "dim.lance")
    lance.write_dataset(pa.table({"k": pa.array(range(70), pa.int64()),
                                  "name": pa.array([f"n{i}" for i in range(70)])}), dim)
    small = spark.read.format("lance").load(dim)
    # PySpark's Python sources report no size, so Spark sizes them at spark.sql.defaultSizeInBytes
    # and never broadcasts them by itself (a change here means the reader docstring is stale).
    big = spark.range(10**8).select((F.col("id") % 100).alias("k"))
    assert "BroadcastHashJoin" not in str(big.join(small, "k")._jdf.queryExecution().sparkPlan().toString())
    hinted = big.join(F.broadcast(small), "k")
    assert "BroadcastHashJoin" in str(hinted._jdf.queryExecution().sparkPlan().toString())
    facts = spark.range(200_000).select((F.col("id") % 100).alias("k"))
    assert facts.join(F.broadcast(small), "k").count() == 200_000 // 100 * 70
