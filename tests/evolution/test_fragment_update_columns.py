"""LanceFragment.update_columns: same files, field lists and results as pylance's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import SchemaError

BASE = pa.table({"id": [1, 2, 3, 4], "name": ["a", "b", "c", "d"], "value": [10, 20, 30, 40]})


def _run(mod: Any, uri: str) -> None:
    ds = mod.dataset(uri)
    rid = ds.to_table(with_row_id=True, filter="id = 1").column("_rowid")[0].as_py()
    meta, fields = ds.get_fragments()[0].update_columns(pa.table({"_rowid": pa.array([rid], pa.uint64()),
                                                                  "value": [100]}))
    op = mod.LanceOperation.Update(updated_fragments=[meta], fields_modified=fields, update_mode="rewrite_columns")
    mod.LanceDataset.commit(uri, op, read_version=ds.version)
    ds = mod.dataset(uri)
    meta, fields = ds.get_fragments()[1].update_columns(pa.table({"id": [3, 9], "name": ["zz", "q"]}), left_on="id")
    op = mod.LanceOperation.Update(updated_fragments=[meta], fields_modified=fields, update_mode="rewrite_columns")
    mod.LanceDataset.commit(uri, op, read_version=ds.version)


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_update_columns_matches_pylance(tmp_path: Path, stable: bool) -> None:
    got = {}
    for name, mod in (("ours", lance_format), ("pylance", lance)):
        uri = str(tmp_path / name)
        lance.write_dataset(BASE, uri, max_rows_per_file=2, enable_stable_row_ids=stable).delete("id = 2")
        _run(mod, uri)
        table = lance.dataset(uri).to_table(with_row_id=True)
        assert table.equals(lance_format.dataset(uri).to_table(with_row_id=True))
        files = [[df.fields for df in f.files] for f in lance_format.dataset(uri).manifest.fragments]
        got[name] = (table, files)
    assert got["ours"][0].equals(got["pylance"][0]) and got["ours"][1] == got["pylance"][1]
    assert got["ours"][1] == [[(0, 1, -2), (2,)], [(0, -2, 2), (1,)]]
    assert got["ours"][0].column("value").to_pylist() == [100, 30, 40]


def test_update_columns_refuses_unknown_columns(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(BASE, tmp_path / "u")
    with pytest.raises(SchemaError, match="nope"):
        ds.get_fragments()[0].update_columns(pa.table({"id": [1], "nope": [1]}), left_on="id")
    with pytest.raises(SchemaError, match="join column"):
        ds.get_fragments()[0].update_columns(pa.table({"value": [1]}))
