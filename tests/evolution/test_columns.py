"""add_columns / drop_columns / alter_columns: same results, schemas and row lineage as pylance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format
from lance_format.errors import InvalidInputError, SchemaError

from ._util import assert_no_orphans, same_everywhere

BASE = pa.table({"a": [1, 2, 3, 4, 5], "b": ["x", "y", "z", "w", "q"]})

Step = Callable[[Any], Any]
STEPS: list[Step] = [
    lambda ds: ds.add_columns({"c": "a * 10", "d": "b || '!'"}),
    lambda ds: ds.add_columns(lambda batch: pa.record_batch({"e": pc.add(batch["a"], 1)}), read_columns=["a"]),
    lambda ds: ds.add_columns(pa.schema([pa.field("f", pa.float32())])),
    lambda ds: ds.drop_columns(["c"]),
    lambda ds: ds.alter_columns({"path": "d", "name": "dd"}),
    lambda ds: ds.alter_columns({"path": "e", "data_type": pa.int32()}),
    lambda ds: ds.alter_columns({"path": "f", "nullable": True}),
    lambda ds: ds.update({"b": "upper(b)"}, where="a > 2"),
    lambda ds: ds.drop_columns(["f"]),
    lambda ds: ds.add_columns({"g": "a"}),  # gets a new id, not the dropped f's
]


def _lineage(uri: str) -> dict[str, list[Any]] | None:
    ds = lance.dataset(uri)
    if not ds.has_stable_row_ids:
        return None
    cols = ["a", "_row_created_at_version", "_row_last_updated_at_version"]
    return ds.to_table(columns=cols).to_pydict()  # type: ignore[no-any-return]


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_column_evolution_matches_pylance_step_by_step(tmp_path: Path, stable: bool, version: str) -> None:
    uris = {"ours": str(tmp_path / "ours"), "pylance": str(tmp_path / "pylance")}
    for uri in uris.values():
        lance.write_dataset(BASE, uri, max_rows_per_file=2, enable_stable_row_ids=stable,
                            data_storage_version=version).delete("a = 2")
    for i, step in enumerate(STEPS):
        step(lance_format.dataset(uris["ours"]))
        step(lance.dataset(uris["pylance"]))
        ours, theirs = lance.dataset(uris["ours"]), lance.dataset(uris["pylance"])
        assert ours.version == theirs.version, i
        assert ours.schema == theirs.schema == lance_format.dataset(uris["ours"]).schema, i
        assert same_everywhere(uris["ours"]).equals(same_everywhere(uris["pylance"])), i
        assert _lineage(uris["ours"]) == _lineage(uris["pylance"]), i
        ours_ids = [(f.name, f.id) for f in lance_format.dataset(uris["ours"]).lance_schema.flat()]
        their_ids = [(f.name, f.id) for f in lance_format.dataset(uris["pylance"]).lance_schema.flat()]
        assert ours_ids == their_ids, i
    kinds = [lance_format.dataset(uris["ours"]).read_transaction(v).operation.kind  # type: ignore[union-attr]
             for v in range(3, 13)]
    assert kinds == ["merge", "merge", "merge", "project", "project", "merge", "project", "update", "project",
                     "merge"]
    assert_no_orphans(uris["ours"])


def test_added_columns_do_not_rewrite_existing_files(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(BASE, tmp_path / "keep", max_rows_per_file=2)
    before = [f.files for f in ds.manifest.fragments]
    ds.add_columns({"c": "a + 1"})
    after = ds.manifest.fragments
    assert all(f.files[: len(b)] == b and len(f.files) == len(b) + 1 for f, b in zip(after, before, strict=True))
    assert all(f.files[-1].fields == (2,) for f in after)


def test_pylance_evolves_what_we_evolved(tmp_path: Path) -> None:
    uri = str(tmp_path / "mixed")
    lance_format.write_dataset(BASE, uri)
    lance_format.dataset(uri).add_columns({"c": "a * 2"})
    lance.dataset(uri).add_columns({"d": "c + 1"})
    lance_format.dataset(uri).alter_columns({"path": "d", "data_type": pa.float64(), "name": "dd"})
    lance.dataset(uri).drop_columns(["c"])
    got = same_everywhere(uri)
    assert got.column("dd").to_pylist() == [3.0, 5.0, 7.0, 9.0, 11.0]


@pytest.mark.parametrize("call,error,match", [
    (lambda ds: ds.add_columns({"a": "b"}), SchemaError, "taken"),
    (lambda ds: ds.add_columns({"c": "nope + 1"}), InvalidInputError, "nope"),
    (lambda ds: ds.add_columns(pa.field("c", pa.int64(), nullable=False)), SchemaError, "nullable"),
    (lambda ds: ds.add_columns(lambda b: pa.record_batch({"c": [1]}), read_columns=["a"]), InvalidInputError, "rows"),
    (lambda ds: ds.drop_columns(["nope"]), SchemaError, "nope"),
    (lambda ds: ds.drop_columns(["a", "b"]), SchemaError, "every column"),
    (lambda ds: ds.alter_columns({"path": "a", "name": "b"}), SchemaError, "taken"),
    (lambda ds: ds.alter_columns({"path": "nope", "name": "x"}), SchemaError, "nope"),
    (lambda ds: ds.alter_columns({"path": "b", "data_type": pa.int64()}), SchemaError, "cast"),
])
def test_bad_evolution_is_refused_and_leaves_nothing(tmp_path: Path, call: Step, error: type[Exception],
                                                     match: str) -> None:
    uri = str(tmp_path / "bad")
    lance_format.write_dataset(BASE, uri, max_rows_per_file=2)
    with pytest.raises(error, match=match):
        call(lance_format.dataset(uri))
    assert lance_format.dataset(uri).version == 1
    assert_no_orphans(uri)


def test_making_a_column_with_nulls_non_nullable_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "nulls")
    ds = lance_format.write_dataset(pa.table({"a": [1, None]}), uri)
    with pytest.raises(SchemaError, match="contains nulls"):
        ds.alter_columns({"path": "a", "nullable": False})
    ds.update({"a": "0"}, where="a IS NULL")
    ds.alter_columns({"path": "a", "nullable": False})
    assert lance.dataset(uri).schema.field("a").nullable is False


def test_nested_field_is_dropped_and_renamed(tmp_path: Path) -> None:
    uri = str(tmp_path / "nested")
    t = pa.table({"s": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]), "k": [1, 2]})
    ds = lance_format.write_dataset(t, uri)
    ds.drop_columns(["s.y"])
    ds.alter_columns({"path": "s.x", "name": "xx"})
    assert lance.dataset(uri).to_table().to_pylist() == [{"s": {"xx": 1}, "k": 1}, {"s": {"xx": 2}, "k": 2}]


def test_add_columns_after_a_concurrent_append_covers_the_new_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "race")
    stale = lance_format.write_dataset(BASE, uri)
    lance.write_dataset(pa.table({"a": [9], "b": ["n"]}), uri, mode="append")
    stale.add_columns({"c": "a * 2"})  # Merge vs Append is retryable: recomputed on the new version
    got = same_everywhere(uri)
    assert got.column("c").to_pylist() == [2, 4, 6, 8, 10, 18]
    assert stale.version == 3
    assert_no_orphans(uri)
