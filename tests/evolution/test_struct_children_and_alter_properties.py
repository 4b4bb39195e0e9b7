"""Adding all-null children to an existing struct (pylance's schema merge) and alter_columns lineage."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import NotSupportedError, SchemaError

lance = pytest.importorskip("lance")

STRUCT = pa.struct([("a", pa.int64())])


def _table() -> pa.Table:
    return pa.table({"id": pa.array([1, 2], pa.int32()),
                     "s": pa.array([{"a": 1}, {"a": 2}], STRUCT)})


@pytest.mark.parametrize("version", ["2.2"])
def test_add_columns_merges_new_children_into_a_struct_like_pylance(tmp_path: Path, version: str) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    ds = lance_format.write_dataset(_table(), ours, data_storage_version=version)
    ref = lance.write_dataset(_table(), theirs, data_storage_version=version)
    new = pa.schema([pa.field("s", pa.struct([pa.field("b", pa.string()),
                                              pa.field("c", pa.struct([("d", pa.float64())]))])),
                     pa.field("extra", pa.int16())])
    ds.add_columns(new, transaction_properties={"who": "me"})
    ref.add_columns(new)
    assert ds.schema == ref.schema
    assert ds.to_table().equals(ref.to_table())
    assert lance.dataset(ours).to_table().equals(ref.to_table())
    assert ds.read_transaction(ds.version).transaction_properties == {"who": "me"}
    more = pa.table({"id": pa.array([3], pa.int32()), "s": pa.array([{"a": 3, "b": "x", "c": {"d": 1.5}}],
                                                                    ds.schema.field("s").type),
                     "extra": pa.array([7], pa.int16())})
    lance_format.write_dataset(more, ours, mode="append")
    assert lance.dataset(ours).to_table().to_pylist()[-1] == more.to_pylist()[0]


@pytest.mark.parametrize("version", ["2.0", "2.1", "legacy"])
def test_add_columns_to_a_struct_needs_file_version_2_2_like_pylance(tmp_path: Path, version: str) -> None:
    new = pa.schema([pa.field("s", pa.struct([pa.field("b", pa.string())]))])
    ds = lance_format.write_dataset(_table(), str(tmp_path / "ours.lance"), data_storage_version=version)
    ref = lance.write_dataset(_table(), str(tmp_path / "theirs.lance"), data_storage_version=version)
    with pytest.raises(OSError, match="add sub column is not supported"):
        ref.add_columns(new)
    with pytest.raises(NotSupportedError, match="version 2.2 or later"):
        ds.add_columns(new)
    assert ds.version == 1


def test_add_columns_refuses_a_taken_leaf_or_a_required_child(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(_table(), str(tmp_path / "t.lance"))
    with pytest.raises(SchemaError, match="'s.a'.*taken"):
        ds.add_columns(pa.schema([pa.field("s", pa.struct([("a", pa.int64())]))]))
    with pytest.raises(SchemaError, match="'s.b'.*nullable"):
        ds.add_columns(pa.schema([pa.field("s", pa.struct([pa.field("b", pa.int8(), nullable=False)]))]))
    with pytest.raises(SchemaError, match="taken"):
        ds.add_columns(pa.schema([pa.field("id", pa.struct([("z", pa.int8())]))]))
    assert ds.version == 1


def test_alter_columns_type_change_carries_transaction_properties(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    ds = lance_format.write_dataset(pa.table({"id": pa.array([1, 2], pa.int32()), "s": ["x", "y"]}), uri)
    ds.alter_columns({"path": "id", "data_type": pa.int64()}, {"path": "s", "data_type": pa.large_string()},
                     transaction_properties={"dagster/run_id": "r1"})
    assert ds.read_transaction(ds.version).transaction_properties == {"dagster/run_id": "r1"}
    assert lance.dataset(uri).schema == pa.schema([("id", pa.int64()), ("s", pa.large_string())])
    assert lance.dataset(uri).to_table().to_pydict() == {"id": [1, 2], "s": ["x", "y"]}
    ds.alter_columns({"path": "s", "name": "t"}, transaction_properties={"dagster/run_id": "r2"})
    assert ds.read_transaction(ds.version).transaction_properties == {"dagster/run_id": "r2"}
