"""2.0 data files written by old pylance releases (tests/data fixtures) read as pylance 14.0.2 reads them."""

from __future__ import annotations

from pathlib import Path

import lance.file
import pytest

from lance_format.file import LanceFileReader

DATA = Path(__file__).resolve().parent.parent / "data"
V2_FILES = sorted(p for p in DATA.glob("pylance_*/dataset.lance/data/*.lance"))
LEGACY_FILES = sorted(p for p in DATA.glob("legacy_*/dataset.lance/data/*.lance"))


@pytest.mark.skipif(not V2_FILES, reason="old-pylance fixtures not present")
@pytest.mark.parametrize("path", V2_FILES, ids=lambda p: f"{p.parts[-4]}/{p.name[:8]}")
def test_old_v2_files(path: Path) -> None:
    theirs = lance.file.LanceFileReader(str(path)).read_all().to_table()
    r = LanceFileReader(str(path))
    assert r.file_version == (2, 0)
    assert r.read_all().to_table().equals(theirs)
    if theirs.num_rows:
        idx = sorted({0, theirs.num_rows // 2, theirs.num_rows - 1})
        assert r.take_rows(idx).to_table().equals(theirs.take(idx))


@pytest.mark.skipif(not LEGACY_FILES, reason="legacy fixtures not present")
@pytest.mark.parametrize("path", LEGACY_FILES, ids=lambda p: f"{p.parts[-4]}/{p.name[:8]}")
def test_old_legacy_files_read(path: Path) -> None:
    """Legacy 0.1 files written by pylance 0.10.18 / 0.16.1 read as pylance 14.0.2 reads their datasets."""
    r = LanceFileReader(str(path))
    assert r.file_version == (0, 2)
    got = r.read_all().to_table()
    assert got.num_rows == 50 and got.column_names == ["id"]
    assert r.take_rows([49, 0]).to_table().equals(got.take([49, 0]))
