"""Unit tests of the config, read-spec and handler plumbing (no Dagster run)."""

import sys

import pyarrow as pa
import pytest

import lance_format
from lance_dagster.config import dataset_uri, default_root_uri, make_settings, parse_mode
from lance_dagster.handlers import (
    ArrowHandler,
    PandasHandler,
    default_handlers,
    handler_for_type,
    handler_for_value,
)
from lance_dagster.reader import ReadSpec
from lance_dagster.writer import align_to_schema


def test_dataset_uri_from_asset_key() -> None:
    assert dataset_uri("s3://bucket/lake/", ["sales", "orders"]) == "s3://bucket/lake/sales/orders.lance"
    assert dataset_uri("/data", "events") == "/data/events.lance"
    assert dataset_uri("/data", "a/b.lance") == "/data/a/b.lance"
    for bad in (["..", "x"], ["a", ""]):
        with pytest.raises(ValueError, match="invalid dataset path"):
            dataset_uri("/data", bad)


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("DAGSTER_HOME", "/opt/dagster")
    assert default_root_uri() == "/opt/dagster/storage/lance_storage"
    monkeypatch.delenv("DAGSTER_HOME")
    assert default_root_uri().endswith("/lance_storage")
    assert make_settings(None, None, "append", "").root_uri == default_root_uri()


def test_modes() -> None:
    assert parse_mode("append", where="x") == "append"
    with pytest.raises(ValueError, match="x: write mode must be one of"):
        parse_mode("upsert", where="x")
    with pytest.raises(ValueError):
        make_settings("/r", None, "create", None)


def test_read_spec_parsing() -> None:
    spec = ReadSpec.from_metadata({"version": 3, "columns": ["a", "b"], "filter": "a > 1"}, where="in")
    assert (spec.pin, spec.columns, spec.filter) == (3, ("a", "b"), "a > 1")
    assert ReadSpec.from_metadata({"tag": "gold"}, where="in").pin == "gold"
    assert ReadSpec.from_metadata(None, where="in").pin is None
    for bad in ({"version": "3"}, {"version": True}, {"version": 1, "tag": "t"}, {"columns": "a"},
                {"tag": 5}, {"filter": 1}):
        with pytest.raises(ValueError, match="^in: .*metadata"):
            ReadSpec.from_metadata(bad, where="in")


def test_handler_selection() -> None:
    import pandas as pd

    handlers = default_handlers()
    assert isinstance(handler_for_value(handlers, pa.table({"a": [1]}), where="w"), ArrowHandler)
    assert isinstance(handler_for_value(handlers, pd.DataFrame({"a": [1]}), where="w"), PandasHandler)
    assert isinstance(handler_for_type(handlers, pd.DataFrame, where="w"), PandasHandler)
    assert isinstance(handler_for_type(handlers, pa.RecordBatchReader, where="w"), ArrowHandler)
    with pytest.raises(lance_format.errors.UnsupportedFrameTypeError,
                       match=r"w: LanceIOManager cannot store a dict; return one of pyarrow.Table, "):
        handler_for_value(handlers, {"a": 1}, where="w")
    with pytest.raises(lance_format.errors.UnsupportedFrameTypeError,
                       match=r"cannot load an input annotated as list; annotate it as one of pyarrow.Table .*"
                       r"pandas.DataFrame, polars.DataFrame, polars.LazyFrame, pyspark.sql.DataFrame, "
                       r"lance_format.LanceDataset"):
        handler_for_type(handlers, list, where="w")


def test_pandas_handler_strips_pandas_metadata() -> None:
    import pandas as pd

    table = PandasHandler().to_arrow(pd.DataFrame({"a": [1, 2]}, index=[5, 6]))
    assert table.schema.names == ["a"]
    assert b"pandas" not in (table.schema.metadata or {})


def test_missing_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    frame = pd.DataFrame({"a": [1]})
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` raise ImportError
    with pytest.raises(ImportError, match=r"pip install 'lance-dagster\[pandas\]'"):
        PandasHandler().to_arrow(frame)


def test_align_to_schema_restores_arrow_types() -> None:
    target = pa.schema([("v", pa.list_(pa.float32(), 2)), ("s", pa.string())])
    data = pa.table({"v": pa.array([[1.0, 2.0]], pa.list_(pa.float32())), "s": pa.array(["x"], pa.large_string())})
    assert align_to_schema(data, target).schema == target
    reader = align_to_schema(pa.RecordBatchReader.from_batches(data.schema, data.to_batches()), target)
    assert isinstance(reader, pa.RecordBatchReader) and reader.read_all().schema == target
    other = pa.table({"w": [1]})
    assert align_to_schema(other, target) is other


def test_partition_slices_for_each_kind_of_partitions_definition() -> None:
    import datetime as dt

    from dagster import DailyPartitionsDefinition, MultiPartitionsDefinition, StaticPartitionsDefinition

    from lance_dagster.partitions import build_slice
    from lance_format.errors import InvalidInputError, SchemaError
    from lance_format.sql import to_expression

    days = DailyPartitionsDefinition(start_date="2024-01-01", timezone="Europe/Paris")
    schema = pa.schema([("ts", pa.timestamp("us", "UTC")), ("local", pa.timestamp("us")), ("day", pa.date32()),
                        ("region", pa.string()), ("n", pa.int64())])
    rows = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 23, tzinfo=dt.UTC), dt.datetime(2024, 1, 3, tzinfo=dt.UTC)],
                                    pa.timestamp("us", "UTC")),
                     "local": pa.array([dt.datetime(2024, 1, 2, 0), dt.datetime(2024, 1, 3, 0)], pa.timestamp("us")),
                     "day": pa.array([dt.date(2024, 1, 2), dt.date(2024, 1, 4)], pa.date32()),
                     "region": ["eu", "us"], "n": [1, 2]})
    # Contiguous days merge into one window; bounds follow the partitions' timezone.
    rng = build_slice(days, ["2024-01-02", "2024-01-03"], "ts", where="w")
    ((start, end),) = rng.terms[0][0].windows
    assert start.isoformat() == "2024-01-02T00:00:00+01:00" and end - start == dt.timedelta(days=2)
    for column, expected in (("ts", [True, True]), ("local", [True, True]), ("day", [True, False])):
        sl = build_slice(days, ["2024-01-02", "2024-01-03"], column, where="w")
        assert rows.filter(sl.expression(schema, where="w")).num_rows == sum(expected), column
        assert rows.filter(to_expression(sl.sql(schema, where="w"), schema)).num_rows == sum(expected), column
    # Static keys are cast to the column type; keys that do not fit are named.
    nums = build_slice(StaticPartitionsDefinition(["1", "2", "x"]), ["2"], "n", where="w")
    assert rows.filter(nums.expression(schema, where="w")).column("n").to_pylist() == [2]
    with pytest.raises(SchemaError, match="do not fit column 'n'"):
        build_slice(StaticPartitionsDefinition(["x"]), ["x"], "n", where="w").expression(schema, where="w")
    with pytest.raises(SchemaError, match="'missing' is not in the data's columns"):
        build_slice(StaticPartitionsDefinition(["x"]), ["x"], "missing", where="w").expression(schema, where="w")
    # A multi-partition selection that is not a cross product keeps one term per key.
    multi = MultiPartitionsDefinition({"region": StaticPartitionsDefinition(["eu", "us"]),
                                       "n": StaticPartitionsDefinition(["1", "2"])})
    sl = build_slice(multi, ["1|eu", "2|us"], {"region": "region", "n": "n"}, where="w")
    assert len(sl.terms) == 2 and rows.filter(sl.expression(schema, where="w")).num_rows == 2
    square = build_slice(multi, ["1|eu", "2|eu", "1|us", "2|us"], {"region": "region", "n": "n"}, where="w")
    assert len(square.terms) == 1
    with pytest.raises(InvalidInputError, match="must map each dimension"):
        build_slice(multi, ["1|eu"], "region", where="w")
    with pytest.raises(InvalidInputError, match="has no 'partition_expr' metadata"):
        build_slice(days, ["2024-01-02"], None, where="w")
