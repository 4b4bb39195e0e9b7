"""LanceSchema.fields() and LanceField.name()/id()/children() are callable as in pylance 14.0.2.

Our schema classes expose these as attributes; the values are also callable, so code written
for pylance's methods and our attribute-style callers both work.
"""

from __future__ import annotations

import pickle
from typing import Any

import lance
import lance.schema as pylance_schema
import pyarrow as pa

import lance_format
from lance_format.schema import LanceSchema

ARROW = pa.schema(
    [
        pa.field("a", pa.int64(), metadata={"k": "v"}),
        pa.field("s", pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])),
        pa.field("l", pa.list_(pa.float32())),
    ]
)


def _tree(fields: Any) -> list[tuple[str, int, list[Any]]]:
    """Walk a field list through pylance's method API only."""
    return [(f.name(), f.id(), _tree(f.children())) for f in fields]


def test_fields_and_children_methods_match_pylance() -> None:
    ours = LanceSchema.from_pyarrow(ARROW)
    theirs = pylance_schema.LanceSchema.from_pyarrow(ARROW)
    assert isinstance(ours.fields(), list)
    assert isinstance(ours.fields[0].children(), list)
    assert _tree(ours.fields()) == _tree(theirs.fields())


def test_field_lookup_methods_match_pylance() -> None:
    ours = LanceSchema.from_pyarrow(ARROW)
    theirs = pylance_schema.LanceSchema.from_pyarrow(ARROW)
    for name in ("a", "s", "l"):
        assert ours.field(name).name() == theirs.field(name).name()
        assert ours.field(name).id() == theirs.field(name).id()
        assert ours.field(name).to_arrow() == theirs.field(name).to_arrow()
    assert ours.field_case_insensitive("S").id() == theirs.field_case_insensitive("S").id()
    ours_a, theirs_a = ours.field("a"), theirs.field("a")
    assert ours_a.is_unenforced_primary_key() == theirs_a.is_unenforced_primary_key()
    assert ours_a.is_unenforced_clustering_key() == theirs_a.is_unenforced_clustering_key()
    assert ours_a.unenforced_clustering_key_position() == theirs_a.unenforced_clustering_key_position()
    assert ours.to_pyarrow() == theirs.to_pyarrow()


def test_method_results_are_plain_builtins() -> None:
    field = LanceSchema.from_pyarrow(ARROW).fields()[1]
    assert type(field.name()) is str
    assert type(field.id()) is int
    assert type(field.children()) is list


def test_attribute_style_still_works() -> None:
    schema = LanceSchema.from_pyarrow(ARROW)
    assert [f.name for f in schema.fields] == ["a", "s", "l"]
    assert schema.fields[1].id == 1
    assert schema.fields[1].name == "s" and hash(schema.fields[1].name) == hash("s")
    assert len(schema.fields[1].children) == 2
    assert pickle.loads(pickle.dumps(schema)) == schema


def test_dataset_lance_schema_fields_match_pylance(tmp_path: Any) -> None:
    table = pa.table({"a": [1, 2], "s": [{"x": 1, "y": "p"}, {"x": 2, "y": "q"}]})
    ours = lance_format.write_dataset(table, str(tmp_path / "ours.lance"))
    theirs = lance.write_dataset(table, str(tmp_path / "theirs.lance"))
    assert _tree(ours.lance_schema.fields()) == _tree(theirs.lance_schema.fields())


PK = "lance-schema:unenforced-primary-key"
PK_SCHEMA = pa.schema([
    pa.field("a", pa.int64(), False, metadata={PK: "true", PK + ":position": "2"}),
    pa.field("b", pa.int64(), False, metadata={PK + ":position": "1"}),
    pa.field("c", pa.int64(), False, metadata={PK: "true"}),
    pa.field("d", pa.int64()),
])


def _keys(schema: Any) -> list[tuple[str, bool, int | None]]:
    return [(f.name(), f.is_unenforced_primary_key(), f.unenforced_primary_key_position())
            for f in schema.unenforced_primary_key()]


def test_primary_key_positions_match_pylance(tmp_path: Any) -> None:
    ours = LanceSchema.from_pyarrow(PK_SCHEMA)
    theirs = pylance_schema.LanceSchema.from_pyarrow(PK_SCHEMA)
    assert _keys(ours) == _keys(theirs)
    assert [(f.name(), f.unenforced_primary_key_position()) for f in ours.fields()] == [
        (f.name(), f.unenforced_primary_key_position()) for f in theirs.fields()]
    table = pa.table({n: pa.array([1, 2], pa.int64()) for n in "abcd"}, schema=PK_SCHEMA)
    our_ds = lance_format.write_dataset(table, str(tmp_path / "ours.lance"))
    their_ds = lance.write_dataset(table, str(tmp_path / "theirs.lance"))
    assert _keys(our_ds.lance_schema) == _keys(their_ds.lance_schema)
    assert _keys(lance_format.dataset(their_ds.uri).lance_schema) == _keys(their_ds.lance_schema)
    # Not compared: pylance reading *our* manifest sees no position for "a" (it keeps positions in a
    # Field proto member our protos do not write yet), so its key order differs there.
