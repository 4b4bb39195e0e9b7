"""Commit options and commit rules as pylance 14.0.2 has them: Restore's conflict checks,
``commit_lock=``, ``commit(detached=True)``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

LIBS = pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])
T = pa.table({"x": pa.array(range(30), pa.int64()), "y": pa.array(range(30), pa.int64())})


def _schema_edit(lib: Any) -> Any:
    L = lib.LanceOperation
    return L.UpdateConfig(schema_metadata_updates=L.UpdateMap({"k": "v"}))


@pytest.mark.parametrize("read_version", [None, 0, 1, 2])
def test_restore_is_checked_from_its_read_version(tmp_path: Path, read_version: int | None) -> None:
    """Version 2 edits the schema metadata. A Restore read at version 1 is refused over it; one
    without a read version (None, 0) is blind; one read at version 2 has nothing to check."""
    got = {}
    for lib in (lance, lance_format):
        uri = str(tmp_path / lib.__name__)
        lib.write_dataset(T, uri, max_rows_per_file=10)
        lib.LanceDataset.commit(uri, _schema_edit(lib), read_version=1)
        try:
            ds = lib.LanceDataset.commit(uri, lib.LanceOperation.Restore(1), read_version=read_version)
        except OSError as exc:
            assert "conflict" in str(exc).lower() or "incompatible" in str(exc).lower()
            got[lib.__name__] = "refused"
        else:
            got[lib.__name__] = (ds.version, ds.schema.metadata)
    assert got["lance_format"] == got["lance"]
    assert (got["lance"] == "refused") == (read_version == 1)


@LIBS
def test_restore_method_rolls_back_over_a_schema_edit(tmp_path: Path, lib: Any) -> None:
    uri = str(tmp_path / "t")
    lib.write_dataset(T, uri)
    lib.LanceDataset.commit(uri, _schema_edit(lib), read_version=1)
    ds = lib.dataset(uri, version=1)
    ds.restore()
    assert ds.version == 3 and not lib.dataset(uri).schema.metadata
