"""schema_to_json / json_to_schema give and take pylance 14.0.2's dicts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_format.errors import InvalidInputError, UnsupportedTypeError
from lance_format.schema import LanceSchema
from lance_format.schema_json import json_to_schema, schema_to_json

lance_schema = pytest.importorskip("lance.schema")

FIELDS = [
    pa.field("a", pa.int64(), nullable=False, metadata={"k": "v"}), pa.field("b", pa.string()),
    pa.field("c", pa.struct([("x", pa.float32()), ("y", pa.list_(pa.int8()))])),
    pa.field("d", pa.list_(pa.float32(), 4)), pa.field("e", pa.timestamp("us", "UTC")),
    pa.field("f", pa.dictionary(pa.int16(), pa.string())), pa.field("g", pa.large_list(pa.utf8())),
    pa.field("h", pa.decimal128(10, 2)), pa.field("j", pa.date32()), pa.field("k", pa.binary(16)),
    pa.field("l", pa.large_binary()), pa.field("m", pa.bool_()), pa.field("n", pa.float16()),
    pa.field("o", pa.time64("ns")), pa.field("p", pa.duration("ms")), pa.field("q", pa.uint32()),
    pa.field("r", pa.null()), pa.field("t", pa.timestamp("s")), pa.field("u", pa.date64()),
    pa.field("v", pa.time32("ms")), pa.field("w", pa.large_string()), pa.field("x", pa.decimal256(40, 3)),
    pa.field("z", pa.list_(pa.struct([("q", pa.int32())]))), pa.field("ext", pa.uuid()),
    pa.field("tensor", pa.fixed_shape_tensor(pa.float32(), [2, 2])),
]


@pytest.mark.parametrize("metadata", [None, {"sm": "x"}])
def test_schema_to_json_equals_pylances(metadata: dict[str, str] | None) -> None:
    schema = pa.schema(FIELDS, metadata=metadata)
    assert schema_to_json(schema) == lance_schema.schema_to_json(schema)


def test_json_to_schema_reads_pylances_dicts_back() -> None:
    schema = pa.schema(FIELDS, metadata={"sm": "x"})
    theirs = lance_schema.json_to_schema(lance_schema.schema_to_json(schema))
    ours = json_to_schema(lance_schema.schema_to_json(schema))
    assert ours.equals(theirs, check_metadata=True)
    assert ours.equals(schema, check_metadata=True)


def test_maps_and_missing_nullable_are_refused_as_by_pylance() -> None:
    with pytest.raises(ValueError):
        lance_schema.schema_to_json(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
    with pytest.raises(UnsupportedTypeError, match="'m'"):
        schema_to_json(pa.schema([pa.field("m", pa.map_(pa.string(), pa.int32()))]))
    bad = {"fields": [{"name": "a", "type": {"type": "int32"}}]}
    with pytest.raises(ValueError, match="nullable"):
        lance_schema.json_to_schema(bad)
    with pytest.raises(InvalidInputError, match="nullable"):
        json_to_schema(bad)


def test_lance_schema_pylance_methods() -> None:
    arrow = pa.schema([pa.field("Id", pa.int64()), pa.field("s", pa.struct([("Inner", pa.int32())]))])
    theirs, ours = lance_schema.LanceSchema.from_pyarrow(arrow), LanceSchema.from_pyarrow(arrow)
    assert ours.to_pyarrow() == theirs.to_pyarrow()
    # pylance's LanceField has name() / id() methods; ours has attributes
    assert ours.field_case_insensitive("id").name == theirs.field_case_insensitive("id").name() == "Id"
    assert ours.field_case_insensitive("S.inner").id == theirs.field_case_insensitive("S.inner").id()
    assert ours.unenforced_primary_key() == theirs.unenforced_primary_key() == []
    assert ours.unenforced_clustering_key() == theirs.unenforced_clustering_key() == []
