"""Regression tests for the four correctness bugs of issue 11 (each fails on the old code)."""

from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from lance.dataset import ColumnOrdering

import lance_format
from lance_format.errors import InvalidInputError, NotSupportedError, TagError, UnsupportedTypeError
from lance_format.table import tags as _tags


@pytest.fixture
def small(tmp_path: Path) -> lance_format.LanceDataset:
    t = pa.table({"a": [3, None, 1, 2, None, 1], "b": ["x", "y", "z", "w", "v", "u"]})
    return lance_format.write_dataset(t, tmp_path / "small.lance", max_rows_per_file=2)


# --- scanner keyword arguments ---------------------------------------------------


def test_result_changing_options_that_are_not_implemented_raise(small: lance_format.LanceDataset) -> None:
    with pytest.raises(NotSupportedError, match="row_addr_allowlist"):
        small.to_table(row_addr_allowlist=[0])


@pytest.mark.parametrize(("kwargs", "message"), [({"nearest": {"column": "a", "q": [1.0], "k": 1}}, "must be a vector"),
                                                 ({"full_text_query": "x"}, "no INVERTED index")])
def test_searches_this_table_cannot_answer_say_why(small: lance_format.LanceDataset, kwargs: dict[str, object],
                                                   message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        small.to_table(**kwargs)


def test_misspelled_scanner_option_is_a_type_error(small: lance_format.LanceDataset) -> None:
    with pytest.raises(TypeError, match="filtr"):
        small.to_table(filtr="a > 1")
    with pytest.raises(TypeError, match="filtr"):
        small.count_rows(filtr="a > 1")


def test_performance_hints_are_accepted(small: lance_format.LanceDataset) -> None:
    assert small.to_table(batch_readahead=2, scan_in_order=True, use_scalar_index=False).num_rows == 6


def test_order_by_matches_pylance(small: lance_format.LanceDataset) -> None:
    theirs = lance.dataset(small.uri)
    cases: list[dict[str, object]] = [
        {"order_by": ["a"]},
        {"order_by": [ColumnOrdering("a", ascending=False, nulls_first=True), "b"], "limit": 3, "offset": 1},
        {"columns": ["b"], "order_by": ["a"], "filter": "b != 'x'"},
        {"order_by": [ColumnOrdering("b", ascending=False)], "with_row_id": True},
    ]
    for case in cases:
        assert small.to_table(**case).to_pydict() == theirs.to_table(**case).to_pydict(), case


def test_order_by_unknown_column_is_refused(small: lance_format.LanceDataset) -> None:
    with pytest.raises(lance_format.errors.InvalidInputError, match="nope"):
        small.to_table(order_by=["nope"])


# --- tags on branches ------------------------------------------------------------


def test_tag_on_a_branch_resolves_in_the_branch_tree(tmp_path: Path) -> None:
    uri = str(tmp_path / "br.lance")
    ds = lance.write_dataset(pa.table({"a": [1, 2]}), uri)
    lance.write_dataset(pa.table({"a": [3]}), uri, mode="append")  # main v2 = 1, 2, 3
    branch = ds.create_branch("feat/x", 1)
    lance.write_dataset(pa.table({"a": [9]}), branch.uri, mode="append")  # branch v2 = 1, 2, 9
    lance.dataset(uri).tags.create("on_branch", ("feat/x", 2))

    ours = lance_format.dataset(uri, version="on_branch")
    assert ours.version == 2
    assert ours.to_table().column("a").to_pylist() == [1, 2, 9]
    assert lance_format.dataset(uri).checkout_version("on_branch").to_table().column("a").to_pylist() == [1, 2, 9]
    assert lance_format.dataset(uri).to_table().column("a").to_pylist() == [1, 2, 3]


@pytest.mark.parametrize("bad", ["..", "../x", "/abs", "a/../b", "a\\b", "main", "x/", "a//b"])
def test_branch_names_that_leave_the_tree_are_rejected(bad: str) -> None:
    with pytest.raises(TagError):
        _tags.branch_dir(bad)


def test_tag_file_naming_an_escaping_branch_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "esc.lance")
    lance_format.write_dataset(pa.table({"a": [1]}), uri)
    os.makedirs(tmp_path / "esc.lance" / "_refs" / "tags")
    (tmp_path / "esc.lance" / "_refs" / "tags" / "evil.json").write_text(
        '{"branch": "../../elsewhere", "version": 1, "manifestSize": 10}')
    with pytest.raises(lance_format.errors.CorruptFileError, match="branch"):
        lance_format.dataset(uri, version="evil")


# --- take on 2.0 dictionaries with nulls -----------------------------------------


@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_take_across_fragments_whose_dictionaries_hold_nulls(tmp_path: Path, writer: str) -> None:
    uri = str(tmp_path / f"dict_{writer}.lance")
    parts = [["a", None, "b"], [None, "z", None]]
    tables = [pa.table({"c": pa.array(p).dictionary_encode()}) for p in parts]
    write = lance_format.write_dataset if writer == "ours" else lance.write_dataset
    write(tables[0], uri, data_storage_version="2.0")
    write(tables[1], uri, mode="append")
    ours = lance_format.dataset(uri)
    idx = [4, 0, 1, 3, 2]
    assert ours.take(idx).column("c").to_pylist() == lance.dataset(uri).take(idx).column("c").to_pylist()
    assert ours.take(idx).column("c").to_pylist() == ["z", "a", None, None, "b"]


# --- fixed-size lists of strings ---------------------------------------------------


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_fixed_size_list_of_strings_is_refused_naming_the_version(tmp_path: Path, version: str) -> None:
    t = pa.table({"f": pa.array([["a", "b"], ["c", None]], pa.list_(pa.string(), 2))})
    target = tmp_path / f"fsl_{version}.lance"
    with pytest.raises(UnsupportedTypeError, match=rf"fixed-size lists of string .*{version}"):
        lance_format.write_dataset(t, target, data_storage_version=version)  # type: ignore[arg-type]
    leftovers = [f for _, _, files in os.walk(target) for f in files] if target.exists() else []
    assert leftovers == []


def test_fixed_size_list_of_numbers_still_round_trips_through_pylance(tmp_path: Path) -> None:
    t = pa.table({"f": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float32(), 2))})
    for version in ("2.0", "2.2"):
        uri = tmp_path / f"fslf_{version}.lance"
        lance_format.write_dataset(t, uri, data_storage_version=version)  # type: ignore[arg-type]
        assert lance.dataset(str(uri)).to_table().equals(t)
