"""Column types across materializations (issue 26 item 1): ``strict`` refuses any type change with an
error naming asset, column and both types; ``merge`` widens the table's column for safe promotions
(as pylance's ``alter_columns`` does) and never truncates a value."""

from typing import Any

import pyarrow as pa
import pytest
from dagster import DagsterInstance, asset, materialize

import lance_format
from lance_dagster import LanceIOManager
from lance_dagster.lineage import RUN_ID

lance = pytest.importorskip("lance")

DATA: dict[str, pa.Table] = {}


@asset(metadata={"mode": "append"})
def readings() -> pa.Table:
    return DATA["readings"]


@asset(metadata={"mode": "append", "schema_mode": "merge"})
def evolving() -> pa.Table:
    return DATA["evolving"]


def _run(assets: list[Any], root: str, instance: DagsterInstance, ok: bool = True) -> Any:
    result = materialize(assets, resources={"io_manager": LanceIOManager(root_uri=root)}, instance=instance,
                         raise_on_error=False)
    assert result.success is ok, result.get_step_failure_events()
    return result


def _failure(result: Any) -> Any:
    """The error the IO manager raised (Dagster wraps it in a step execution error)."""
    error = result.get_step_failure_events()[0].event_specific_data.error
    while error.cause is not None:
        error = error.cause
    return error


def _same_as_pylance(uri: str) -> pa.Table:
    ours = lance_format.dataset(uri).to_table()
    theirs = lance.dataset(uri).to_table()
    assert ours.schema == theirs.schema and ours.equals(theirs)
    return ours


def test_strict_refuses_float_data_for_an_int_column_naming_asset_column_and_types(
        root: str, instance: DagsterInstance) -> None:
    DATA["readings"] = pa.table({"id": pa.array([1], pa.int32()), "v": pa.array([1], pa.int32())})
    _run([readings], root, instance)
    DATA["readings"] = pa.table({"id": pa.array([2], pa.int32()), "v": pa.array([2.0], pa.float64())})
    error = _failure(_run([readings], root, instance, ok=False))
    assert error.cls_name == "SchemaError"  # a lance_format LanceError, not pyarrow's ArrowInvalid
    for part in ("asset 'readings'", "column 'v'", "double in the data", "int32 in the table",
                 "schema_mode='merge'", "schema_mode 'strict'"):
        assert part in error.message
    uri = f"{root}/readings.lance"
    assert lance_format.dataset(uri).version == 1
    assert _same_as_pylance(uri).to_pylist() == [{"id": 1, "v": 1}]  # 2.0 was not stored as 2
    # a wider int is a type change too (strict keeps the table's types exactly)
    DATA["readings"] = pa.table({"id": pa.array([3], pa.int32()), "v": pa.array([2**40], pa.int64())})
    assert "int64 in the data but int32" in _failure(_run([readings], root, instance, ok=False)).message
    # another representation of the same type is not a change: string/large_string, list/fixed_size_list
    DATA["readings"] = pa.table({"v": pa.array([5], pa.int32()), "id": pa.array([5], pa.int32())})
    _run([readings], root, instance)
    assert lance_format.dataset(uri).count_rows() == 2


def test_a_value_that_does_not_fit_is_a_lance_error_naming_the_column(root: str, instance: DagsterInstance) -> None:
    DATA["readings"] = pa.table({"id": [1], "vec": pa.array([[1.0, 2.0]], pa.list_(pa.float32(), 2))})
    _run([readings], root, instance)
    # pandas hands fixed-size vectors back as plain lists: accepted when they fit the table's size ...
    DATA["readings"] = pa.table({"id": [2], "vec": pa.array([[3.0, 4.0]], pa.list_(pa.float32()))})
    _run([readings], root, instance)
    # ... and refused, with the asset and column named, when they do not
    DATA["readings"] = pa.table({"id": [3], "vec": pa.array([[5.0, 6.0, 7.0]], pa.list_(pa.float32()))})
    error = _failure(_run([readings], root, instance, ok=False))
    assert error.cls_name == "SchemaError"
    assert "asset 'readings'" in error.message and "column 'vec'" in error.message
    uri = f"{root}/readings.lance"
    assert lance_format.dataset(uri).version == 2
    assert _same_as_pylance(uri).column("vec").to_pylist() == [[1.0, 2.0], [3.0, 4.0]]


def test_merge_widens_columns_by_safe_promotion_without_truncating(root: str, instance: DagsterInstance) -> None:
    DATA["evolving"] = pa.table({"id": pa.array([1], pa.int32()), "x": pa.array([0.5], pa.float32()),
                                 "name": pa.array(["a"], pa.string())})
    _run([evolving], root, instance)
    DATA["evolving"] = pa.table({"id": pa.array([2**40], pa.int64()), "x": pa.array([0.1], pa.float64()),
                                 "name": pa.array(["b"], pa.large_string())})
    result = _run([evolving], root, instance)
    uri = f"{root}/evolving.lance"
    table = _same_as_pylance(uri)
    assert table.schema == pa.schema([("id", pa.int64()), ("x", pa.float64()), ("name", pa.large_string())])
    assert table.to_pydict() == {"id": [1, 2**40], "x": [0.5, 0.1], "name": ["a", "b"]}
    ds = lance_format.dataset(uri)
    # one commit widens the columns, one appends; both carry the run's lineage
    assert ds.version == 3
    for version in (2, 3):
        assert ds.read_transaction(version).transaction_properties[RUN_ID] == result.run_id
    assert ds.read_transaction(2).operation.__class__.__name__ == "Merge"
    # narrower data than the table is converted up, the table keeps its type
    DATA["evolving"] = pa.table({"id": pa.array([3], pa.int8()), "x": pa.array([1.5], pa.float32()),
                                 "name": pa.array(["c"], pa.string())})
    _run([evolving], root, instance)
    assert lance_format.dataset(uri).version == 4
    assert _same_as_pylance(uri).schema == table.schema


def test_merge_refuses_a_change_that_is_no_promotion(root: str, instance: DagsterInstance) -> None:
    DATA["evolving"] = pa.table({"id": pa.array([1], pa.int32())})
    _run([evolving], root, instance)
    DATA["evolving"] = pa.table({"id": pa.array([2.5], pa.float64())})
    error = _failure(_run([evolving], root, instance, ok=False))
    assert error.cls_name == "SchemaError"
    assert "column 'id' has type double in the data but int32" in error.message
    assert "safe promotions only" in error.message
    assert lance_format.dataset(f"{root}/evolving.lance").version == 1


def test_merge_adds_nullable_fields_to_a_struct(root: str, instance: DagsterInstance) -> None:
    old = pa.struct([("a", pa.int64()), ("inner", pa.struct([("p", pa.int32())]))])
    new = pa.struct([("inner", pa.struct([("q", pa.string()), ("p", pa.int32())])), ("a", pa.int64()),
                     ("b", pa.string())])
    DATA["evolving"] = pa.table({"id": [1], "s": pa.array([{"a": 1, "inner": {"p": 1}}], old)})
    _run([evolving], root, instance)
    DATA["evolving"] = pa.table({"id": [2], "s": pa.array([{"a": 2, "b": "x", "inner": {"p": 2, "q": "y"}}], new)})
    result = _run([evolving], root, instance)
    uri = f"{root}/evolving.lance"
    table = _same_as_pylance(uri)
    assert table.schema.field("s").type == pa.struct([("a", pa.int64()),
                                                      ("inner", pa.struct([("p", pa.int32()), ("q", pa.string())])),
                                                      ("b", pa.string())])
    assert table.column("s").to_pylist() == [{"a": 1, "inner": {"p": 1, "q": None}, "b": None},
                                             {"a": 2, "inner": {"p": 2, "q": "y"}, "b": "x"}]
    ds = lance_format.dataset(uri)
    assert ds.read_transaction(2).transaction_properties[RUN_ID] == result.run_id
    # a later write without the new fields reads them as null
    DATA["evolving"] = pa.table({"id": [3], "s": pa.array([{"a": 3, "inner": {"p": 3}}], old)})
    _run([evolving], root, instance)
    assert _same_as_pylance(uri).column("s").to_pylist()[-1] == {"a": 3, "inner": {"p": 3, "q": None}, "b": None}
