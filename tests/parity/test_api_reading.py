"""Reading API of pylance 14.0.2: take with row columns, fragment take / order_by, history, validate, config()."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CorruptFileError

lance = pytest.importorskip("lance")


def _pair(tmp_path: Path, *, stable: bool = False) -> list[Any]:
    """The same history on both libraries: two fragments, a delete, an update (moves a row)."""
    out = []
    for lib, name in ((lance, "t"), (lance_format, "o")):
        data = pa.table({"a": list(range(3000)), "b": [f"s{i % 97}" for i in range(3000)]})
        ds = lib.write_dataset(data, str(tmp_path / name), max_rows_per_file=1000, enable_stable_row_ids=stable)
        ds.delete("a % 7 = 2")
        ds.update({"a": "a + 100000"}, where="a % 500 = 6")
        out.append(lib.dataset(str(tmp_path / name)))
    return out


@pytest.mark.parametrize("stable", [False, True], ids=["addresses", "stable-row-ids"])
@pytest.mark.parametrize("columns", [
    ["a", "_rowid", "_rowaddr"], ["_rowaddr", "b"], ["_rowid"], ["_rowoffset", "a"],
])
def test_take_row_columns_equal_pylances(tmp_path: Path, stable: bool, columns: list[str]) -> None:
    theirs, ours = _pair(tmp_path, stable=stable)
    indices = [0, 5, 999, 1000, 1500, 2560, theirs.count_rows() - 1, 5]
    assert ours.take(indices, columns=columns).equals(theirs.take(indices, columns=columns))


def test_take_row_columns_out_of_range_is_an_error(tmp_path: Path) -> None:
    _, ours = _pair(tmp_path)
    with pytest.raises(lance_format.errors.InvalidInputError):
        ours.take([ours.count_rows()], columns=["_rowid"])


def test_fragment_take_reads_live_positions_as_pylance(tmp_path: Path) -> None:
    theirs, ours = _pair(tmp_path)
    for t, o in zip(theirs.get_fragments(), ours.get_fragments(), strict=True):
        n = o.count_rows()
        idx = sorted({0, 2, min(100, n - 1), n - 1})  # pylance needs increasing positions; ours takes any
        assert o.take(idx, columns=["a", "b"]).equals(t.take(idx, columns=["a", "b"]))
        assert o.take(idx).equals(t.take(idx))


def test_fragment_to_table_order_by_equals_pylances(tmp_path: Path) -> None:
    theirs, ours = _pair(tmp_path)
    ordering = import_module("lance.dataset").ColumnOrdering  # lance.dataset the module, not the function
    t_order = [ordering("b", ascending=False), ordering("a")]
    o_order = [lance_format.ColumnOrdering("b", ascending=False), lance_format.ColumnOrdering("a")]
    for t, o in zip(theirs.get_fragments(), ours.get_fragments(), strict=True):
        assert o.to_table(order_by=o_order, limit=50).equals(t.to_table(order_by=t_order, limit=50))


def test_get_transactions_lists_the_same_operations(tmp_path: Path) -> None:
    theirs, ours = _pair(tmp_path)
    for n in (1, 2, 10):
        t_ops = [type(x.operation).__name__ if x else None for x in theirs.get_transactions(n)]
        o_ops = [type(x.operation).__name__ if x else None for x in ours.get_transactions(n)]
        assert o_ops == t_ops
    assert [x.read_version for x in ours.get_transactions()] == [x.read_version for x in theirs.get_transactions()]
    old_t, old_o = theirs.checkout_version(2), ours.checkout_version(2)
    assert len(old_o.get_transactions()) == len(old_t.get_transactions()) == 2


def test_validate_passes_on_both_libraries_datasets(tmp_path: Path) -> None:
    theirs, ours = _pair(tmp_path)
    assert theirs.validate() is None and ours.validate() is None
    assert lance_format.dataset(theirs.uri).validate() is None
    assert lance.dataset(ours.uri).validate() is None


def test_validate_names_a_missing_data_file(tmp_path: Path) -> None:
    _, ours = _pair(tmp_path)
    victim = ours.get_fragments()[1].data_files()[0].path
    (Path(ours.uri) / "data" / victim).unlink()
    with pytest.raises(CorruptFileError, match=f"fragment 1: data file {victim} is missing"):
        ours.validate()


def test_config_is_a_method_as_in_pylance(tmp_path: Path) -> None:
    theirs, ours = _pair(tmp_path)
    assert ours.config() == theirs.config() == {}
    assert lance_format.dataset(theirs.uri).config() == theirs.config()
