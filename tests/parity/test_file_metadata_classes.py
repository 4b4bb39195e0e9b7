"""LanceFileReader.metadata() / file_statistics() give pylance 14.0.2's classes and values."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lance_format.file as ours

lance_file = pytest.importorskip("lance.file")


def _table() -> pa.Table:
    n = 3000
    return pa.table({
        "id": list(range(n)), "s": [f"s{i % 10}" for i in range(n)], "l": [[i] * (i % 3) for i in range(n)],
        "n": [None if i % 5 == 0 else float(i) for i in range(n)],
        "st": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
    })


def _descriptors(buffers: list[object]) -> list[tuple[int, int]]:
    return [(b.position, b.size) for b in buffers]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
@pytest.mark.parametrize("writer", ["pylance", "ours"])
def test_metadata_matches_pylances(tmp_path: Path, version: str, writer: str) -> None:
    path = str(tmp_path / "f.lance")
    cls = lance_file.LanceFileWriter if writer == "pylance" else ours.LanceFileWriter
    with cls(path, _table().schema, version=version) as w:
        w.write_batch(_table())
    theirs, mine = lance_file.LanceFileReader(path).metadata(), ours.LanceFileReader(path).metadata()
    assert isinstance(mine, ours.LanceFileMetadata)
    for name in ("num_rows", "num_data_bytes", "num_column_metadata_bytes", "num_global_buffer_bytes",
                 "major_version", "minor_version"):
        assert getattr(mine, name) == getattr(theirs, name), name
    assert mine.schema == theirs.schema
    assert _descriptors(mine.global_buffers) == _descriptors(theirs.global_buffers)
    assert len(mine.columns) == len(theirs.columns)
    for t_col, o_col in zip(theirs.columns, mine.columns, strict=True):
        assert _descriptors(o_col.column_buffers) == _descriptors(t_col.column_buffers)
        assert len(o_col.pages) == len(t_col.pages)
        for t_page, o_page in zip(t_col.pages, o_col.pages, strict=True):
            assert _descriptors(o_page.buffers) == _descriptors(t_page.buffers)
            assert o_page.encoding == t_page.encoding


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_file_statistics_match_pylances(tmp_path: Path, version: str) -> None:
    path = str(tmp_path / "f.lance")
    with lance_file.LanceFileWriter(path, _table().schema, version=version) as w:
        w.write_batch(_table())
    theirs, mine = lance_file.LanceFileReader(path).file_statistics(), ours.LanceFileReader(path).file_statistics()
    assert [(c.num_pages, c.size_bytes) for c in mine.columns] == [(c.num_pages, c.size_bytes) for c in theirs.columns]
    assert repr(mine) == repr(theirs)


def test_buffer_descriptors_are_also_position_size_pairs(tmp_path: Path) -> None:
    path = str(tmp_path / "f.lance")
    with ours.LanceFileWriter(path, _table().schema) as w:
        w.write_batch(_table())
    gb = ours.LanceFileReader(path).metadata().global_buffers[0]
    assert (gb.position, gb.size) == tuple(gb)
