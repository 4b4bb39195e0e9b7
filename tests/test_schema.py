"""Arrow schema <-> Lance field list, checked field by field against what pylance 14.0.2 writes."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format

from lance_format._pb import table_pb2
from lance_format.errors import SchemaError, UnsupportedTypeError
from lance_format.schema import LanceField, LanceSchema, arrow_type_to_logical, logical_to_arrow_type
from lance_format.schema_codec import schema_from_pb, schema_to_pb

lance = pytest.importorskip("lance")

PK = "lance-schema:unenforced-primary-key"

# name -> Arrow field; every type of the requirement plus nesting, metadata and keys.
CASES: dict[str, pa.Field] = {
    "bool": pa.field("c", pa.bool_()),
    "int8": pa.field("c", pa.int8()),
    "int16": pa.field("c", pa.int16()),
    "int32": pa.field("c", pa.int32()),
    "int64": pa.field("c", pa.int64(), nullable=False),
    "uint8": pa.field("c", pa.uint8()),
    "uint16": pa.field("c", pa.uint16()),
    "uint32": pa.field("c", pa.uint32()),
    "uint64": pa.field("c", pa.uint64()),
    "float16": pa.field("c", pa.float16()),
    "float32": pa.field("c", pa.float32()),
    "float64": pa.field("c", pa.float64()),
    "decimal128": pa.field("c", pa.decimal128(10, 3)),
    "decimal256": pa.field("c", pa.decimal256(40, 5)),
    "date32": pa.field("c", pa.date32()),
    "date64": pa.field("c", pa.date64()),
    "time32s": pa.field("c", pa.time32("s")),
    "time32ms": pa.field("c", pa.time32("ms")),
    "time64us": pa.field("c", pa.time64("us")),
    "time64ns": pa.field("c", pa.time64("ns")),
    "timestamp": pa.field("c", pa.timestamp("ns")),
    "timestamp_tz": pa.field("c", pa.timestamp("ms", tz="America/New_York")),
    "timestamp_utc": pa.field("c", pa.timestamp("s", tz="UTC")),
    "timestamp_offset": pa.field("c", pa.timestamp("us", tz="+05:30")),
    "duration": pa.field("c", pa.duration("us")),
    "duration_s": pa.field("c", pa.duration("s")),
    "string": pa.field("c", pa.string()),
    "large_string": pa.field("c", pa.large_string()),
    "binary": pa.field("c", pa.binary()),
    "large_binary": pa.field("c", pa.large_binary()),
    "fixed_size_binary": pa.field("c", pa.binary(7)),
    "null": pa.field("c", pa.null()),
    "list": pa.field("c", pa.list_(pa.int32())),
    "list_nonnull_item": pa.field("c", pa.list_(pa.field("v", pa.int32(), nullable=False))),
    "large_list": pa.field("c", pa.large_list(pa.string())),
    "fixed_size_list": pa.field("c", pa.list_(pa.float32(), 8)),
    "fixed_size_list_f16": pa.field("c", pa.list_(pa.float16(), 3)),
    "fixed_size_list_nested": pa.field("c", pa.list_(pa.list_(pa.int32(), 2), 3)),
    "fixed_size_list_struct": pa.field("c", pa.list_(pa.struct([("a", pa.int32())]), 2)),
    "fixed_size_list_dict": pa.field("c", pa.list_(pa.dictionary(pa.int8(), pa.string()), 2)),
    "list_fixed_size_list": pa.field("c", pa.list_(pa.list_(pa.int32(), 2))),
    "struct": pa.field("c", pa.struct([pa.field("x", pa.int32(), nullable=False), ("y", pa.string())])),
    "empty_struct": pa.field("c", pa.struct([])),
    "list_struct": pa.field("c", pa.list_(pa.struct([("a", pa.int8())]))),
    "large_list_struct": pa.field("c", pa.large_list(pa.struct([("a", pa.int8())]))),
    "nested": pa.field(
        "c",
        pa.struct(
            [
                ("x", pa.int32()),
                ("y", pa.list_(pa.struct([("z", pa.list_(pa.int64())), ("w", pa.large_list(pa.string()))]))),
            ]
        ),
    ),
    "list_large_list_struct": pa.field("c", pa.list_(pa.large_list(pa.struct([("q", pa.bool_())])))),
    "dict_int8_string": pa.field("c", pa.dictionary(pa.int8(), pa.string())),
    "dict_int32_string": pa.field("c", pa.dictionary(pa.int32(), pa.string())),
    "dict_uint8_large_string": pa.field("c", pa.dictionary(pa.uint8(), pa.large_string())),
    "dict_int16_int64": pa.field("c", pa.dictionary(pa.int16(), pa.int64())),
    "list_dict": pa.field("c", pa.list_(pa.dictionary(pa.int8(), pa.string()))),
    "field_metadata": pa.field("c", pa.string(), metadata={"k": "v", "other": "x"}),
    "encoding_metadata": pa.field(
        "c",
        pa.string(),
        metadata={"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "3"},
    ),
    "nested_metadata": pa.field("c", pa.struct([pa.field("x", pa.int32(), metadata={"inner": "1"})])),
    "primary_key": pa.field("c", pa.int64(), nullable=False, metadata={PK: "true"}),
    "primary_key_string": pa.field("c", pa.string(), nullable=False, metadata={PK: "yes"}),
    "not_primary_key": pa.field("c", pa.int64(), nullable=False, metadata={PK: "false"}),
    "uuid_extension": pa.field("c", pa.uuid()),
}

SCHEMA_METADATA = {"owner": "team", "lance:note": "x"}


def read_manifest(uri: Path) -> Any:
    # V2 names count down from u64::MAX, so the latest version has the smallest name.
    path = min((uri / "_versions").glob("*.manifest"), key=lambda p: int(p.name.split(".")[0]))
    data = path.read_bytes()
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (size,) = struct.unpack_from("<I", data, pos)
    return table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + size])


def as_dicts(fields: list[Any]) -> list[dict[str, Any]]:
    return [
        json_format.MessageToDict(
            f, always_print_fields_with_no_presence=True, preserving_proto_field_name=True
        )
        for f in fields
    ]


def pylance_fields(tmp_path: Path, schema: pa.Schema, version: str) -> Any:
    uri = tmp_path / f"ds_{version}"
    lance.write_dataset(schema.empty_table(), str(uri), data_storage_version=version)
    return read_manifest(uri), uri


@pytest.mark.parametrize("version", ["2.0", "2.2"])
@pytest.mark.parametrize("case", list(CASES))
def test_field_list_matches_pylance(tmp_path: Path, case: str, version: str) -> None:
    # A leading column shifts ids so pre-order numbering is visible.
    schema = pa.schema([pa.field("id", pa.int64()), CASES[case]], metadata=SCHEMA_METADATA)
    manifest, uri = pylance_fields(tmp_path, schema, version)

    ours = LanceSchema.from_arrow(schema)
    fields, metadata = schema_to_pb(ours)
    assert as_dicts(fields) == as_dicts(list(manifest.fields))
    assert metadata == dict(manifest.schema_metadata)
    # Byte-identical field messages too.
    assert [f.SerializeToString(deterministic=True) for f in fields] == [
        f.SerializeToString(deterministic=True) for f in manifest.fields
    ]

    # Reading pylance's field list gives what pylance itself reports.
    theirs = schema_from_pb(manifest.fields, dict(manifest.schema_metadata))
    assert theirs == ours
    assert theirs.to_arrow().equals(lance.dataset(str(uri)).schema, check_metadata=True)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_all_types_in_one_schema_match_pylance(tmp_path: Path, version: str) -> None:
    schema = pa.schema([f.with_name(name) for name, f in CASES.items()], metadata=SCHEMA_METADATA)
    manifest, uri = pylance_fields(tmp_path, schema, version)
    fields, metadata = schema_to_pb(LanceSchema.from_arrow(schema))
    assert as_dicts(fields) == as_dicts(list(manifest.fields))
    assert metadata == dict(manifest.schema_metadata)
    back = schema_from_pb(manifest.fields, dict(manifest.schema_metadata)).to_arrow()
    assert back.equals(lance.dataset(str(uri)).schema, check_metadata=True)
    assert back.equals(schema, check_metadata=True)


@pytest.mark.parametrize("case", list(CASES))
def test_round_trip_through_pb(case: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), CASES[case]], metadata=SCHEMA_METADATA)
    fields, metadata = schema_to_pb(LanceSchema.from_arrow(schema, start_id=7))
    wire = [type(f).FromString(f.SerializeToString()) for f in fields]
    back = schema_from_pb(wire, metadata)
    assert back.to_arrow().equals(schema, check_metadata=True)
    assert back.field_ids() == list(range(7, 7 + len(fields)))


def test_ids_parent_ids_and_lookup() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int32()),
            pa.field("s", pa.struct([("x", pa.int32()), ("l", pa.list_(pa.struct([("z", pa.string())])))])),
            pa.field("f", pa.list_(pa.float32(), 4)),
        ]
    )
    ls = LanceSchema.from_arrow(schema)
    flat = [(f.name, f.id, f.parent_id, f.logical_type) for f in ls.flat()]
    assert flat == [
        ("a", 0, -1, "int32"),
        ("s", 1, -1, "struct"),
        ("x", 2, 1, "int32"),
        ("l", 3, 1, "list.struct"),
        ("item", 4, 3, "struct"),
        ("z", 5, 4, "string"),
        ("f", 6, -1, "fixed_size_list:float:4"),
    ]
    assert ls.max_field_id() == 6
    assert ls.field_by_id(5).name == "z"
    assert ls.path_of(5) == "s.l.item.z"
    assert ls.field("s.l.item.z").id == 5
    assert ls.arrow_type_of(3) == pa.list_(pa.struct([("z", pa.string())]))
    assert ls.arrow_type_of(ls.field("f")) == pa.list_(pa.float32(), 4)
    assert [f.id for f in ls.leaf_fields()] == [0, 2, 5, 6]
    with pytest.raises(SchemaError, match="id 99"):
        ls.field_by_id(99)
    with pytest.raises(SchemaError, match="nope"):
        ls.field("s.nope")
    assert LanceSchema(()).max_field_id() == -1


def test_project_top_level_and_nested() -> None:
    schema = pa.schema(
        [pa.field("a", pa.int32()), pa.field("s", pa.struct([("x", pa.int32()), ("y", pa.string())]))],
        metadata={"k": "v"},
    )
    ls = LanceSchema.from_arrow(schema)
    p = ls.project(["s", "a"])
    assert [f.name for f in p.fields] == ["s", "a"]
    assert p.field_ids() == [1, 2, 3, 0]
    assert dict(p.metadata) == {"k": b"v"}
    nested = ls.project(["s.y"])
    assert nested.to_arrow().field("s").type == pa.struct([("y", pa.string())])
    assert nested.field_ids() == [1, 3]
    both = ls.project(["s.y", "s.x"])
    assert both.field_ids() == [1, 3, 2]
    with pytest.raises(SchemaError):
        ls.project(["missing"])


def test_with_ids_like_matches_pylance_add_columns(tmp_path: Path) -> None:
    base = pa.schema([pa.field("a", pa.int32()), pa.field("s", pa.struct([("x", pa.int32())]))])
    uri = tmp_path / "ds"
    ds = lance.write_dataset(pa.Table.from_pylist([{"a": 1, "s": {"x": 2}}], schema=base), str(uri))
    ds.add_columns({"b": "a + 1"})
    ds = lance.dataset(str(uri))
    ds.drop_columns(["a"])
    ds = lance.dataset(str(uri))
    ds.add_columns({"c": "s.x * 2"})
    manifest = read_manifest(uri)

    existing = schema_from_pb(read_manifest_at(uri, 1).fields)
    after_add = LanceSchema.from_arrow(base.append(pa.field("b", pa.int32()))).with_ids_like(existing)
    assert after_add.field_ids() == [0, 1, 2, 3]
    dropped = after_add.project(["s", "b"])
    # pylance never reuses ids: "c" gets 4 even though "a" (id 0) is gone.
    final = LanceSchema.from_arrow(dropped.to_arrow().append(pa.field("c", pa.int32()))).with_ids_like(
        dropped, next_id=after_add.max_field_id() + 1
    )
    got = [(f.name, f.id, f.parent_id) for f in manifest.fields]
    want = [(f.name, f.id, f.parent_id) for f in final.flat()]
    assert [n for n, _, _ in got] == [n for n, _, _ in want]
    assert got == want


def read_manifest_at(uri: Path, version: int) -> Any:
    name = f"{(1 << 64) - 1 - version:020d}.manifest"
    data = (uri / "_versions" / name).read_bytes()
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (size,) = struct.unpack_from("<I", data, pos)
    return table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + size])


def test_check_compatible_follows_pylance_append_rules() -> None:
    base = pa.schema(
        [
            pa.field("a", pa.int32(), False),
            pa.field("b", pa.string()),
            pa.field("c", pa.struct([("x", pa.int32()), ("y", pa.int32())])),
            pa.field("l", pa.list_(pa.int64())),
        ]
    )
    ls = LanceSchema.from_arrow(base)
    ok = [
        pa.schema([base.field("b"), base.field("a"), base.field("c"), base.field("l")]),
        pa.schema([base.field("a"), base.field("c"), base.field("l")]),
        pa.schema([pa.field("a", pa.int32(), True), base.field("b"), base.field("c"), base.field("l")]),
        pa.schema([base.field("a"), base.field("b"), pa.field("c", pa.struct([("x", pa.int32())]))]),
        pa.schema([base.field("a"), pa.field("l", pa.list_(pa.field("element", pa.int64())))]),
        pa.schema([base.field("a").with_metadata({"k": "v"})], metadata={"q": "r"}),
    ]
    for s in ok:
        ls.check_compatible(s)
    ls.check_compatible(ls)
    with pytest.raises(SchemaError, match="'a'"):
        ls.check_compatible(pa.schema([base.field("b")]))
    with pytest.raises(SchemaError, match="'a'.*int64.*int32"):
        ls.check_compatible(pa.schema([pa.field("a", pa.int64(), False)]))
    with pytest.raises(SchemaError, match="'d'"):
        ls.check_compatible(base.append(pa.field("d", pa.int32())))
    with pytest.raises(SchemaError, match="'b'"):
        ls.check_compatible(pa.schema([base.field("a"), pa.field("b", pa.large_string())]))
    with pytest.raises(SchemaError, match="'c.z'"):
        ls.check_compatible(pa.schema([base.field("a"), pa.field("c", pa.struct([("z", pa.int32())]))]))
    with pytest.raises(SchemaError, match="'l.item'"):
        ls.check_compatible(pa.schema([base.field("a"), pa.field("l", pa.list_(pa.int32()))]))
    with pytest.raises(SchemaError, match="'a': nullable"):
        ls.check_compatible(pa.schema([pa.field("a", pa.int32(), True)]), check_nullability=True)
    with pytest.raises(SchemaError, match="'b'"):
        ls.check_compatible(
            pa.schema([base.field("a"), base.field("c"), base.field("l")]), allow_missing_nullable=False
        )
    with pytest.raises(SchemaError, match="order"):
        ls.check_compatible(pa.schema([base.field("b"), base.field("a")]), ignore_order=False)


@pytest.mark.parametrize(
    ("data_type", "path"),
    [
        (pa.map_(pa.string(), pa.int32(), keys_sorted=True), "bad"),  # plain maps are supported
        (pa.dense_union([pa.field("a", pa.int32())]), "bad"),
        (pa.struct([("inner", pa.map_(pa.string(), pa.int32(), keys_sorted=True))]), "bad.inner"),
        (pa.list_(pa.struct([("u", pa.month_day_nano_interval())])), "bad.item.u"),
        (pa.list_(pa.list_(pa.int32()), 2), "bad"),
        (pa.string_view(), "bad"),
        (pa.decimal32(5, 2), "bad"),
        (pa.list_view(pa.int32()), "bad"),
        (pa.dictionary(pa.int8(), pa.list_(pa.int32())), "bad"),
    ],
)
def test_unsupported_types_name_the_field(data_type: pa.DataType, path: str) -> None:
    schema = pa.schema([pa.field("ok", pa.int32()), pa.field("bad", data_type)])
    with pytest.raises(UnsupportedTypeError, match=f"'{path}'"):
        LanceSchema.from_arrow(schema)


def test_primary_key_rules() -> None:
    with pytest.raises(SchemaError, match="'k'.*nullable"):
        LanceSchema.from_arrow(pa.schema([pa.field("k", pa.int64(), True, metadata={PK: "true"})]))
    with pytest.raises(SchemaError, match="'s'.*leaf"):
        LanceSchema.from_arrow(
            pa.schema(
                [pa.field("s", pa.struct([pa.field("a", pa.int32(), False)]), False, metadata={PK: "1"})]
            )
        )
    with pytest.raises(SchemaError, match="'s.a'.*nullable"):
        LanceSchema.from_arrow(
            pa.schema(
                [pa.field("s", pa.struct([pa.field("a", pa.int32(), False, metadata={PK: "1"})]), True)]
            )
        )
    ls = LanceSchema.from_arrow(pa.schema([pa.field("k", pa.int64(), False, metadata={PK: "TRUE"})]))
    assert ls.fields[0].unenforced_primary_key


def test_bad_field_lists_raise_schema_errors() -> None:
    fields, _ = schema_to_pb(
        LanceSchema.from_arrow(pa.schema([pa.field("s", pa.struct([("x", pa.int32())]))]))
    )
    with pytest.raises(SchemaError, match="parent id"):
        schema_from_pb([fields[1], fields[0]])
    with pytest.raises(SchemaError, match="duplicate"):
        schema_from_pb([fields[0], fields[0]])
    broken = type(fields[0])()
    broken.CopyFrom(fields[0])
    broken.logical_type = "decimal:128:x"
    with pytest.raises(UnsupportedTypeError, match="decimal:128:x"):
        schema_from_pb([broken]).to_arrow()
    broken.logical_type = "wat"
    with pytest.raises(UnsupportedTypeError, match="'s'.*wat"):
        schema_from_pb([broken]).to_arrow()
    with pytest.raises(SchemaError, match="'s': duplicate child"):
        LanceSchema.from_arrow(pa.schema([pa.field("s", pa.struct([("x", pa.int8()), ("x", pa.int8())]))]))
    with pytest.raises(SchemaError, match="duplicate top-level"):
        LanceSchema.from_arrow(pa.schema([pa.field("a", pa.int8()), pa.field("a", pa.int8())]))


def test_logical_type_helpers_round_trip() -> None:
    for field in CASES.values():
        t = field.type
        if (
            isinstance(t, pa.BaseExtensionType)
            or pa.types.is_nested(t)
            and not pa.types.is_fixed_size_list(t)
        ):
            continue
        if pa.types.is_fixed_size_list(t) and pa.types.is_struct(t.value_type):
            continue
        assert logical_to_arrow_type(arrow_type_to_logical(t)) == t


def test_fields_are_immutable_and_hashable() -> None:
    f = LanceField("a", 0, -1, "int32", metadata={"k": "v"})
    assert f.metadata == {"k": b"v"}
    with pytest.raises(TypeError):
        f.metadata["x"] = b"y"  # type: ignore[index]
    assert hash(f) == hash(LanceField("a", 0, -1, "int32", metadata={"k": "w"}))
    assert {f}
    schema = LanceSchema.from_arrow(pa.schema([CASES["nested_metadata"]], metadata={"a": "b"}))
    assert pickle.loads(pickle.dumps(schema)) == schema
    with pytest.raises(TypeError):
        schema.metadata.update({"x": b"y"})  # type: ignore[attr-defined]


def _sample_column(f: pa.Field) -> pa.Array:
    if pa.types.is_struct(f.type) and f.type.num_fields == 0:
        return pa.array([{}] * 3, f.type)
    if pa.types.is_struct(f.type):
        return pa.StructArray.from_arrays([_sample_column(c) for c in f.type], fields=list(f.type))
    if f.nullable:
        return pa.nulls(3, f.type)
    if pa.types.is_fixed_size_list(f.type):
        return pa.array([[{"a": 1}, {"a": 2}]] * 3, f.type)
    return pa.array([1, 2, 3], f.type) if pa.types.is_integer(f.type) else pa.array(["a", "b", "c"], f.type)


# Columns pylance refuses to write in some versions (FSL<struct> in 2.1, FSL<dict> in 2.1+) or
# panics on when all values are null (zstd strings, null type, empty struct).
_NOT_WRITABLE = {
    "fixed_size_list_dict",
    "fixed_size_list_struct",
    "encoding_metadata",
    "null",
    "empty_struct",
}
_EXTRA_COLUMNS = [
    pa.field(
        "packed",
        pa.struct([pa.field("x", pa.int32(), False), pa.field("y", pa.int64(), False)]),
        False,
        {"lance-encoding:packed": "true"},
    ),
]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_column_fields_match_pylance_data_files(tmp_path: Path, version: str) -> None:
    fields = [f.with_name(n) for n, f in CASES.items() if n not in _NOT_WRITABLE] + _EXTRA_COLUMNS
    if version == "2.2":
        fields.append(
            pa.field("fsl_struct", pa.list_(pa.struct([pa.field("a", pa.int32(), False)]), 2), False)
        )
    schema = pa.schema(fields)
    table = pa.Table.from_arrays([_sample_column(f) for f in schema], schema=schema)
    uri = tmp_path / "ds"
    lance.write_dataset(table, str(uri), data_storage_version=version)
    (data_file,) = read_manifest(uri).fragments[0].files
    ls = LanceSchema.from_arrow(schema)
    assert [f.id for f in ls.column_fields(version)] == list(data_file.fields)
    pair = (data_file.file_major_version, data_file.file_minor_version)
    assert [f.id for f in ls.column_fields(pair)] == list(data_file.fields)
