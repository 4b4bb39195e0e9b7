"""Arrow extension types as pylance 14.0.2 stores them, written and read by both libraries.

``arrow.json`` becomes JSONB bytes under logical type ``json`` (``lance.json``) and comes back as
compact JSON text; the other types (fixed_shape_tensor, uuid, bool8, opaque, Python-defined ones)
are their storage type plus the ``ARROW:extension:*`` metadata.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format import jsonb
from lance_format.errors import InvalidInputError

lance = pytest.importorskip("lance")
lance_file = pytest.importorskip("lance.file")

JSON_TEXTS = [
    '{"b": 1, "a": [true, false, null], "c": {"z": "é", "y": ""}}', None, "[]", "{}", "0", "-0", "-1", "-200",
    "70000", "-70000", "5000000000", "18446744073709551615", "-9223372036854775808", "1.0", "-0.0", "1e15",
    "1e16", "1.5e-7", "0.00001", "2.5e-5", "123456789012345678901234567890", '"a\\"b\\n\\u0001\\u2028"',
    "[[1],[2,[3]]]", '{"bb":1,"a":2,"B":4,"é":5}', "4.9e-324", "-1.25e300", "127", "128", "-128", "-129",
    '"😀"', "true", "null", "NaN", "[Infinity, -Infinity]",
]


class _Point(pa.ExtensionType):
    def __init__(self) -> None:
        super().__init__(pa.struct([("x", pa.float64()), ("y", pa.float64())]), "test.point")

    def __arrow_ext_serialize__(self) -> bytes:
        return b"v1"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> _Point:
        return cls()


@pytest.fixture(scope="module", autouse=True)
def _register_point() -> Any:
    pa.register_extension_type(_Point())
    yield
    pa.unregister_extension_type("test.point")


def _columns() -> dict[str, pa.Array]:
    n = 4
    fsl = pa.array([[float(i), 1.0, 2.0, 3.0] for i in range(n)], pa.list_(pa.float32(), 4))
    return {
        "tensor": pa.ExtensionArray.from_storage(
            pa.fixed_shape_tensor(pa.float32(), [2, 2], dim_names=["r", "c"], permutation=[1, 0]), fsl),
        "uuid": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes([i]) * 16 for i in range(n)], pa.binary(16))),
        "bool8": pa.ExtensionArray.from_storage(pa.bool8(), pa.array([1, 0, None, 1], pa.int8())),
        "opaque": pa.ExtensionArray.from_storage(pa.opaque(pa.binary(), "geo", "vendor"),
                                                 pa.array([b"x", None, b"yz", b""])),
        "point": pa.ExtensionArray.from_storage(_Point(), pa.array(
            [{"x": float(i), "y": -float(i)} for i in range(n)], _Point().storage_type)),
        "json": pa.array(['{"k": [1, 2.5]}', None, '"s"', "{}"], pa.json_(pa.utf8())),
        "id": pa.array(range(n), pa.int64()),
    }


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize("writer,reader", [("lance", "lance_format"), ("lance_format", "lance"),
                                           ("lance_format", "lance_format")])
def test_extension_columns_read_back_as_pylance_reads_them(tmp_path: Path, version: str, writer: str,
                                                            reader: str) -> None:
    libs = {"lance": lance, "lance_format": lance_format}
    cols = _columns()
    if version == "2.0":
        cols.pop("opaque")  # pylance 14.0.2's 2.0 writer: variable-width extension storage fails too
    table = pa.table(cols)
    libs[writer].write_dataset(table, str(tmp_path / "t"), data_storage_version=version)
    ours = libs[reader].dataset(str(tmp_path / "t")).to_table()
    theirs = lance.dataset(str(tmp_path / "t")).to_table()
    assert ours.schema.equals(theirs.schema)
    assert ours.equals(theirs)
    for name in ("tensor", "uuid", "bool8", "point"):
        assert ours.schema.field(name).type == table.schema.field(name).type
    assert ours.column("json").to_pylist() == ['{"k":[1,2.5]}', None, '"s"', "{}"]


def test_stored_schema_matches_pylances(tmp_path: Path) -> None:
    table = pa.table(_columns())
    t_ds = lance.write_dataset(table, str(tmp_path / "t"))
    o_ds = lance_format.write_dataset(table, str(tmp_path / "o"))
    for name in table.column_names:
        t_field = t_ds.lance_schema.field(name)
        o_field = next(f for f in o_ds.lance_schema.fields if f.name == name)
        assert o_field.logical_type == _logical_type(t_field), name
    # the data files: pylance's file reader sees the same stored field metadata in both
    t_file = lance_file.LanceFileReader(glob.glob(str(tmp_path / "t" / "data" / "*.lance"))[0])
    o_file = lance_file.LanceFileReader(glob.glob(str(tmp_path / "o" / "data" / "*.lance"))[0])
    assert o_file.metadata().schema == t_file.metadata().schema
    assert o_file.read_all().to_table().column("json").equals(t_file.read_all().to_table().column("json"))


def _logical_type(field: Any) -> str:
    # pylance's LanceField has no logical type accessor: it is in the debug text
    text = repr(field)
    start = text.index('LogicalType("') + len('LogicalType("')
    return text[start:text.index('")', start)]


def test_json_values_are_stored_and_printed_as_pylance_does(tmp_path: Path) -> None:
    table = pa.table({"j": pa.array(JSON_TEXTS, pa.json_(pa.utf8()))})
    lance.write_dataset(table, str(tmp_path / "t"))
    lance_format.write_dataset(table, str(tmp_path / "o"))
    theirs = lance.dataset(str(tmp_path / "t")).to_table().column("j").to_pylist()
    ours = lance_format.dataset(str(tmp_path / "t")).to_table().column("j").to_pylist()
    assert ours == theirs
    assert lance.dataset(str(tmp_path / "o")).to_table().column("j").to_pylist() == theirs
    raw = lance_file.LanceFileReader(glob.glob(str(tmp_path / "t" / "data" / "*.lance"))[0]).read_all().to_table()
    for text, stored in zip(JSON_TEXTS, raw.column("j").to_pylist(), strict=True):
        assert (text is None and stored is None) or jsonb.encode_value(text) == stored


def test_take_and_filter_return_json_text(tmp_path: Path) -> None:
    table = pa.table({"id": [1, 2, 3], "j": pa.array(['{"a": 1}', "[1]", None], pa.json_(pa.utf8()))})
    lance.write_dataset(table, str(tmp_path / "t"))
    t_ds, o_ds = lance.dataset(str(tmp_path / "t")), lance_format.dataset(str(tmp_path / "t"))
    assert o_ds.take([2, 0]).equals(t_ds.take([2, 0]))
    assert o_ds.to_table(filter="id > 1").equals(t_ds.to_table(filter="id > 1"))


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', "{", "tru"])
def test_invalid_json_is_refused_before_anything_is_written(tmp_path: Path, text: str) -> None:
    table = pa.table({"j": pa.array(['{"ok": 1}', text], pa.json_(pa.utf8()))})
    with pytest.raises(OSError):
        lance.write_dataset(table, str(tmp_path / "t"))
    with pytest.raises(InvalidInputError, match="row 1 is not valid JSON"):
        lance_format.write_dataset(table, str(tmp_path / "o"))
    assert not (tmp_path / "o" / "_versions").exists() or not any((tmp_path / "o" / "_versions").iterdir())


def _nested_table() -> pa.Table:
    jt = pa.json_(pa.utf8())
    j = pa.ExtensionArray.from_storage(jt, pa.array(['{"a": 1}', None, "[2]", '{"z": [1, {"y": 2}]}']))
    s = pa.StructArray.from_arrays([j, pa.array([1, 2, 3, 4])], names=["j", "n"],
                                   mask=pa.array([False, False, True, False]))
    items = pa.ExtensionArray.from_storage(jt, pa.array(["[1]", '{"b":null}', "2", "3"]))
    lst = pa.ListArray.from_arrays(pa.array([0, 1, 1, 3, 4], pa.int32()), items)
    uuids = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes([i]) * 16 for i in range(5)], pa.binary(16)))
    u = pa.ListArray.from_arrays(pa.array([0, 2, 2, 3, 5], pa.int32()), uuids)
    return pa.table({"id": [0, 1, 2, 3], "s": s, "l": lst, "u": u})


@pytest.mark.parametrize("version", ["2.0", "2.1"])
@pytest.mark.parametrize("writer,reader", [("lance", "lance_format"), ("lance_format", "lance")])
def test_extension_types_nested_in_structs_and_lists(tmp_path: Path, version: str, writer: str, reader: str) -> None:
    libs = {"lance": lance, "lance_format": lance_format}
    table = _nested_table()
    if version == "2.0":  # 2.0 files cannot store struct nulls (pylance refuses them too)
        table = table.set_column(1, "s", pa.StructArray.from_arrays(
            [table.column("s").combine_chunks().field(i) for i in range(2)], names=["j", "n"]))
    # several small batches: the writer converts sliced struct and list arrays
    libs[writer].write_dataset(pa.Table.from_batches(table.to_batches(max_chunksize=3)), str(tmp_path / "t"),
                               data_storage_version=version)
    ours = libs[reader].dataset(str(tmp_path / "t")).to_table()
    theirs = lance.dataset(str(tmp_path / "t")).to_table()
    assert ours.equals(theirs)
    assert ours.schema == theirs.schema
    assert libs[reader].dataset(str(tmp_path / "t")).take([3, 0]).equals(lance.dataset(str(tmp_path / "t")).take([3, 0]))
