"""write_dataset(data_obj, ...) and ds.insert(...) take pylance 14.0.2's inputs and give its tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")
pd = pytest.importorskip("pandas")

SCHEMA16 = pa.schema([("a", pa.int16()), ("b", pa.string())])


def _both(tmp_path: Path, make: Callable[[], Any], **kwargs: Any) -> tuple[pa.Table, pa.Table]:
    theirs = lance.write_dataset(make(), str(tmp_path / "theirs"), **kwargs).to_table()
    ours = lance_format.write_dataset(make(), str(tmp_path / "ours"), **kwargs).to_table()
    return theirs, ours


@pytest.mark.parametrize("make, kwargs", [
    (lambda: {"a": [1, 2, 3], "b": ["x", None, "z"]}, {}),
    (lambda: {"a": [1, 2, 3], "b": ["x", None, "z"]}, {"schema": SCHEMA16}),
    (lambda: [{"a": 1, "b": "x"}, {"a": 2}, {"b": "z"}], {}),
    (lambda: [{"a": 1, "b": "x"}, {"a": 2}], {"schema": SCHEMA16}),
    (lambda: pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}), {}),
    (lambda: pd.DataFrame({"a": [1, 2, 3]}, index=[7, 8, 9]), {}),
    (lambda: pa.table({"a": [1, 2], "b": ["x", "y"]}).to_reader(), {}),
    (lambda: iter(pa.table({"a": [1, 2], "b": ["x", "y"]}).to_batches()), {"schema": SCHEMA16}),
], ids=["dict", "dict-schema", "rows", "rows-schema", "pandas", "pandas-index", "reader", "iter-schema"])
def test_write_dataset_input_gives_pylances_table(tmp_path: Path, make: Callable[[], Any],
                                                  kwargs: dict[str, Any]) -> None:
    theirs, ours = _both(tmp_path, make, **kwargs)
    assert ours.schema.equals(theirs.schema, check_metadata=True)
    assert ours.equals(theirs)


def test_polars_data_frame_is_written_as_pylance_writes_it(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    theirs, ours = _both(tmp_path, lambda: pl.DataFrame({"a": [1, 2], "s": ["p", "q"]}))
    assert ours.equals(theirs) and ours.schema.equals(theirs.schema)


def test_schema_and_mode_are_positional_as_in_pylance(tmp_path: Path) -> None:
    theirs = lance.write_dataset({"a": [1], "b": ["x"]}, str(tmp_path / "t"), SCHEMA16, "create")
    ours = lance_format.write_dataset({"a": [1], "b": ["x"]}, str(tmp_path / "o"), SCHEMA16, "create")
    assert ours.schema == theirs.schema == SCHEMA16


def test_insert_appends_and_overwrites_in_place(tmp_path: Path) -> None:
    out = []
    for lib, name in ((lance, "t"), (lance_format, "o")):
        ds = lib.write_dataset({"a": [1, 2]}, str(tmp_path / name))
        ds.insert({"a": [3]})
        appended = (ds.version, ds.to_table())
        ds.insert(pa.table({"a": [4]}), mode="overwrite")
        out.append((appended, ds.version, ds.to_table()))
    assert out[0][0][0] == out[1][0][0] and out[0][0][1].equals(out[1][0][1])
    assert out[0][1:] == out[1][1:]


def test_use_legacy_format_picks_the_legacy_file_version(tmp_path: Path) -> None:
    theirs = lance.write_dataset({"a": [1]}, str(tmp_path / "t"), use_legacy_format=True)
    ours = lance_format.write_dataset({"a": [1]}, str(tmp_path / "o"), use_legacy_format=True)
    assert ours.data_storage_version == theirs.data_storage_version
    assert lance.dataset(str(tmp_path / "o")).to_table().equals(theirs.to_table())


def test_a_dict_that_does_not_fit_the_schema_is_a_schema_error(tmp_path: Path) -> None:
    with pytest.raises(lance_format.errors.SchemaError) as info:
        lance_format.write_dataset({"a": ["x"]}, str(tmp_path / "o"), pa.schema([("a", pa.int32())]))
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "o").exists()
