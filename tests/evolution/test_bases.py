"""Multi-base datasets written here open in pylance, and pylance's open here."""

from __future__ import annotations

import os
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import DatasetAlreadyExistsError, InvalidInputError
from lance_format.evolution.bases import DatasetBasePath
from lance_format.write import write_dataset_with_bases

from ._util import files_under


def _bases(tmp_path: Path) -> list[DatasetBasePath]:
    return [DatasetBasePath(str(tmp_path / "b1"), name="b1"),
            DatasetBasePath(str(tmp_path / "b2"), name="b2", is_dataset_root=True)]


def test_created_multi_base_dataset_matches_pylance_layout(tmp_path: Path) -> None:
    uri = str(tmp_path / "main")
    ds = write_dataset_with_bases(pa.table({"a": [1, 2, 3]}), uri, initial_bases=_bases(tmp_path),
                                  target_bases=["b1"])
    assert {bp.id: (bp.path, bp.is_dataset_root) for bp in ds.manifest.base_paths} == {
        1: (str(tmp_path / "b1"), False), 2: (str(tmp_path / "b2"), True)}
    theirs = lance.dataset(uri)
    assert theirs.to_table().column("a").to_pylist() == [1, 2, 3]
    assert {i: (b.name, b.is_dataset_root) for i, b in theirs.base_paths().items()} == {
        1: ("b1", False), 2: ("b2", True)}
    assert files_under(uri, "data") == set() and len(os.listdir(tmp_path / "b1")) == 1
    txn = ds.read_transaction()
    assert txn is not None and len(txn.operation.initial_bases) == 2  # type: ignore[attr-defined]


def test_appends_target_any_base_from_either_library(tmp_path: Path) -> None:
    uri = str(tmp_path / "main")
    write_dataset_with_bases(pa.table({"a": [1]}), uri, initial_bases=_bases(tmp_path), target_bases=["b1"])
    write_dataset_with_bases(pa.table({"a": [2]}), uri, mode="append", target_bases=["b2"])
    lance.write_dataset(pa.table({"a": [3]}), uri, mode="append", target_bases=["b1"])
    lance_format.dataset(uri).delete("a = 1")
    assert lance.dataset(uri).to_table().column("a").to_pylist() == [2, 3]
    assert lance_format.dataset(uri).to_table().column("a").to_pylist() == [2, 3]
    assert len(os.listdir(tmp_path / "b2" / "data")) == 1 and len(os.listdir(tmp_path / "b1")) == 2


def test_pylance_multi_base_dataset_is_read_and_extended(tmp_path: Path) -> None:
    uri = str(tmp_path / "theirs")
    lance.write_dataset(pa.table({"a": [1, 2]}), uri, mode="create", target_bases=["x"],
                        initial_bases=[lance.DatasetBasePath(str(tmp_path / "x"), name="x")])
    write_dataset_with_bases(pa.table({"a": [3]}), uri, mode="append", target_bases=[str(tmp_path / "x")])
    assert lance.dataset(uri).to_table().column("a").to_pylist() == [1, 2, 3]


def test_bad_base_requests_are_refused_without_leftovers(tmp_path: Path) -> None:
    uri = str(tmp_path / "main")
    with pytest.raises(InvalidInputError, match="nope"):
        write_dataset_with_bases(pa.table({"a": [1]}), uri, initial_bases=_bases(tmp_path), target_bases=["nope"])
    with pytest.raises(InvalidInputError, match="unique"):
        write_dataset_with_bases(pa.table({"a": [1]}), uri, target_bases=["b1"],
                                 initial_bases=[DatasetBasePath("/x", name="b1"), DatasetBasePath("/y", name="b1")])
    assert not (tmp_path / "b1").exists()
    write_dataset_with_bases(pa.table({"a": [1]}), uri, initial_bases=_bases(tmp_path), target_bases=["b1"])
    with pytest.raises(DatasetAlreadyExistsError):
        write_dataset_with_bases(pa.table({"a": [1]}), uri, initial_bases=_bases(tmp_path), target_bases=["b1"])
    assert len(os.listdir(tmp_path / "b1")) == 1
