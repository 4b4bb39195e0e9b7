"""Behaviours of issue 27 item 1 compared with pylance 14.0.2: metadata, all-null indices, dropped files."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileReader

import lance_format
from lance_format.errors import LanceError, SchemaError

LIBS = pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])

BAD_METADATA = {
    "schema value": pa.schema([pa.field("x", pa.int64())], metadata={b"k": b"\xff\xfe"}),
    "schema key": pa.schema([pa.field("x", pa.int64())], metadata={b"\xff": b"v"}),
    "field value": pa.schema([pa.field("x", pa.int64(), metadata={b"k": b"\xff"})]),
    "nested field key": pa.schema([pa.field("s", pa.struct([pa.field("a", pa.int64(), metadata={b"\x80": b"v"})]))]),
}


@LIBS
@pytest.mark.parametrize("where", list(BAD_METADATA))
def test_non_utf8_metadata_is_refused_before_writing(tmp_path: Path, lib: Any, where: str) -> None:
    schema = BAD_METADATA[where]
    uri = tmp_path / "t.lance"
    with pytest.raises(ValueError) as info:
        lib.write_dataset(pa.Table.from_pylist([], schema=schema), str(uri))
    if lib is lance_format:
        assert isinstance(info.value, SchemaError) and isinstance(info.value, LanceError)
        assert "UTF-8" in str(info.value)
    assert not (uri / "_versions").exists() and not (uri / "data").exists()


def _index_tables(uri: str) -> list[pa.Table]:
    return [LanceFileReader(f).read_all().to_table() for f in sorted(glob.glob(f"{uri}/_indices/*/*.lance"))]


def test_bitmap_on_all_null_column_equals_pylance(tmp_path: Path) -> None:
    t = pa.table({"id": pa.array(range(100), pa.int64()), "x": pa.nulls(100, pa.int64())})
    answers, files = [], []
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        ds = lib.write_dataset(t, uri, max_rows_per_file=60)
        ds.create_scalar_index("x", "BITMAP")
        ds = lib.dataset(uri)
        answers.append([ds.count_rows(f) for f in ("x IS NULL", "x IS NOT NULL", "x = 1", "x > 0")])
        files.append(_index_tables(uri))
    assert answers[0] == answers[1] == [100, 0, 0, 0]
    assert files[0] == files[1]  # one null key holding every row


def _files(ds: Any) -> list[list[list[int]]]:
    return [[list(f.fields) for f in fr.metadata.files] for fr in ds.get_fragments()]


@pytest.mark.parametrize(("added", "dropped"), [
    (["z"], ["z"]),  # the added file holds only z: it leaves the fragment
    (["z", "w"], ["z"]),  # w is still in it: it stays, field list unchanged
    (["z"], ["y"]),  # the first file keeps x
])
def test_drop_columns_removes_files_with_no_field_left_as_pylance(tmp_path: Path, added: list[str],
                                                                   dropped: list[str]) -> None:
    got = []
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        lib.write_dataset(pa.table({"x": [1, 2, 3], "y": [3, 4, 5]}), uri, max_rows_per_file=2)
        lib.dataset(uri).add_columns({name: f"x + {i}" for i, name in enumerate(added)})
        lib.dataset(uri).drop_columns(dropped)
        ds = lib.dataset(uri)
        got.append((_files(ds), ds.to_table().to_pydict()))
    assert got[0] == got[1]


def test_drop_columns_keeps_a_fragments_last_file(tmp_path: Path) -> None:
    """Dropping the only column with data files keeps the rows (pylance 14.0.2 leaves a fragment
    without files there, which it then cannot read)."""
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"x": [1, 2]}), uri)
    lance_format.dataset(uri).add_columns(pa.field("n", pa.int64()))
    lance_format.dataset(uri).drop_columns(["x"])
    assert lance_format.dataset(uri).to_table().to_pydict() == {"n": [None, None]}
    assert lance.dataset(uri).count_rows() == 2


@pytest.mark.parametrize(("how", "new_files"), [("field", 0), ("schema", 0), ("sql", 1)])
def test_all_null_column_writes_what_pylance_writes(tmp_path: Path, how: str, new_files: int) -> None:
    """``add_columns(pa.field)`` / ``pa.schema`` change metadata only; ``{"n": "NULL"}`` writes a file (both)."""
    spec: Any = {"field": pa.field("n", pa.int64()), "schema": pa.schema([pa.field("n", pa.int64())]),
                 "sql": {"n": "NULL"}}[how]
    got = []
    for lib in (lance, lance_format):
        uri = str(tmp_path / f"{lib.__name__}.lance")
        lib.write_dataset(pa.table({"x": [1, 2]}), uri)
        before = set(os.listdir(f"{uri}/data"))
        lib.dataset(uri).add_columns(spec)
        ds = lib.dataset(uri)
        got.append((len(set(os.listdir(f"{uri}/data")) - before), _files(ds), ds.to_table().to_pydict()))
    assert got[0] == got[1]
    assert got[0][0] == new_files
