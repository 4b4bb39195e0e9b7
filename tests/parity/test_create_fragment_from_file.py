"""LanceFragment.create_from_file registers an existing data file as pylance 14.0.2's does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from lance.file import LanceFileWriter as PylanceFileWriter

import lance_format
from lance_format.errors import LanceError
from lance_format.file import LanceFileWriter
from lance_format.fragment import LanceFragment

TABLE = pa.table({
    "a": pa.array(range(1000), pa.int64()),
    "b": pa.array([f"s{i}" for i in range(1000)]),
    "s": pa.array([{"x": i, "y": float(i)} for i in range(1000)]),
})
EXTRA = pa.table({
    "a": pa.array(range(1000, 1300), pa.int64()),
    "b": pa.array([f"t{i}" for i in range(300)]),
    "s": pa.array([{"x": -i, "y": None} for i in range(300)], TABLE.schema.field("s").type),
})


def _write_file(kind: str, path: Path, table: pa.Table, version: str) -> None:
    writer: Any = (LanceFileWriter if kind == "ours" else PylanceFileWriter)(str(path), table.schema,
                                                                           version=version)
    writer.write_batch(table)
    writer.close()


def _both(tmp_path: Path, version: str) -> tuple[Any, Any]:
    ours = lance_format.write_dataset(TABLE, str(tmp_path / "ours.lance"), data_storage_version=version)
    theirs = lance.write_dataset(TABLE, str(tmp_path / "theirs.lance"), data_storage_version=version)
    return ours, theirs


def _files(meta: Any) -> list[tuple[str, list[int], list[int], int, int]]:
    return [(f.path, list(f.fields), list(f.column_indices), f.file_major_version, f.file_minor_version)
            for f in meta.files]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_flat_file_metadata_matches_pylance_and_reads_back(tmp_path: Path, version: str, writer: str) -> None:
    flat, extra = TABLE.drop_columns(["s"]), EXTRA.drop_columns(["s"])
    ours = lance_format.write_dataset(flat, str(tmp_path / "ours.lance"), data_storage_version=version)
    theirs = lance.write_dataset(flat, str(tmp_path / "theirs.lance"), data_storage_version=version)
    for ds in (ours, theirs):
        _write_file(writer, Path(ds.uri) / "data" / "extra.lance", extra, version)

    our_meta = LanceFragment.create_from_file("extra.lance", ours, 5)
    their_meta = lance.LanceFragment.create_from_file("extra.lance", theirs, 5)
    assert (our_meta.id, our_meta.physical_rows) == (their_meta.id, their_meta.physical_rows)
    assert _files(our_meta) == _files(their_meta)
    assert our_meta.files[0].file_size_bytes == their_meta.files[0].file_size_bytes

    lance_format.LanceDataset.commit(ours.uri, lance_format.LanceOperation.Append([our_meta]),
                                     read_version=ours.version)
    lance.LanceDataset.commit(theirs.uri, lance.LanceOperation.Append([their_meta]), read_version=theirs.version)
    expected = pa.concat_tables([flat, extra])
    for uri in (ours.uri, theirs.uri):
        assert lance_format.dataset(uri).to_table().sort_by("a").equals(expected)
        assert lance.dataset(uri).to_table().sort_by("a").equals(expected)


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_nested_file_lists_column_owning_fields(tmp_path: Path, version: str, writer: str) -> None:
    """A struct column: ids of the fields that own a column, as pylance's writer records them.

    pylance 14.0.2's create_from_file lists every field id here, which its own commit refuses
    for 2.1+ files (5 ids, 4 columns); ours records what its writer would and commits.
    """
    ours, theirs = _both(tmp_path, version)
    _write_file(writer, Path(ours.uri) / "data" / "extra.lance", EXTRA, version)
    meta = LanceFragment.create_from_file("extra.lance", ours, 5)
    written = theirs.get_fragments()[0].metadata.files[0]
    assert _files(meta) == [("extra.lance", list(written.fields), list(written.column_indices),
                             written.file_major_version, written.file_minor_version)]
    lance_format.LanceDataset.commit(ours.uri, lance_format.LanceOperation.Append([meta]),
                                     read_version=ours.version)
    expected = pa.concat_tables([TABLE, EXTRA])
    assert lance_format.dataset(ours.uri).to_table().sort_by("a").equals(expected)
    assert lance.dataset(ours.uri).to_table().sort_by("a").equals(expected)


def test_create_from_file_with_overwrite(tmp_path: Path) -> None:
    ours, _ = _both(tmp_path, "2.1")
    _write_file("ours", tmp_path / "ours.lance" / "data" / "extra.lance", EXTRA, "2.1")
    meta = LanceFragment.create_from_file("extra.lance", ours, 0)
    lance_format.LanceDataset.commit(ours.uri, lance_format.LanceOperation.Overwrite(ours.schema, [meta]),
                                     read_version=ours.version)
    assert lance.dataset(ours.uri).to_table().equals(EXTRA)


@pytest.mark.parametrize(("name", "table"), [
    ("missing.lance", None),
    ("../escape.lance", None),
    ("narrow.lance", EXTRA.select(["a", "b"])),
    ("wide.lance", EXTRA.append_column("z", pa.array([1] * 300))),
    ("retyped.lance", EXTRA.set_column(0, "a", EXTRA["a"].cast(pa.int32()))),
    ("shuffled.lance", EXTRA.select(["s", "b", "a"])),
])
def test_bad_file_raises_like_pylance(tmp_path: Path, name: str, table: pa.Table | None) -> None:
    ours, theirs = _both(tmp_path, "2.1")
    if table is not None:
        for ds in (ours, theirs):
            _write_file("pylance", Path(ds.uri) / "data" / name, table, "2.1")
    with pytest.raises(Exception) as theirs_exc:
        lance.LanceFragment.create_from_file(name, theirs, 1)
    with pytest.raises(LanceError) as ours_exc:
        LanceFragment.create_from_file(name, ours, 1)
    assert isinstance(ours_exc.value, type(theirs_exc.value))
    assert name.lstrip("./") in str(ours_exc.value)
    assert lance_format.dataset(ours.uri).version == ours.version  # nothing committed
