"""Branches and shallow clones: metadata-only histories that pylance opens, and vice versa."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import DatasetAlreadyExistsError, InvalidInputError, TagError
from lance_format.evolution.branches import Branch

from ._util import files_under


def _base(tmp_path: Path, stable: bool = False) -> str:
    uri = str(tmp_path / "root")
    ds = lance_format.write_dataset(pa.table({"a": [1, 2, 3]}), uri, max_rows_per_file=2,
                                    enable_stable_row_ids=stable)
    ds.delete("a = 1")  # v2: a deletion file the branch inherits
    lance_format.write_dataset(pa.table({"a": [4]}), uri, mode="append")  # v3
    return uri


@pytest.mark.parametrize("stable", [False, True], ids=["addr", "stable"])
def test_branch_is_metadata_only_and_opens_in_pylance(tmp_path: Path, stable: bool) -> None:
    uri = _base(tmp_path, stable)
    data_before = files_under(uri, "data") | files_under(uri, "_deletions")
    branch = lance_format.dataset(uri).create_branch("feat/x", 2)
    assert branch.branch == "feat/x" and branch.version == 2
    assert branch.uri.endswith(os.path.join("tree", "feat", "x"))
    assert files_under(uri, "data") | files_under(uri, "_deletions") == data_before
    theirs = lance.dataset(uri).checkout_version(("feat/x", 2))
    assert theirs.to_table().equals(branch.to_table())
    info = lance.dataset(uri).branches.list()["feat/x"]
    assert info["parent_branch"] is None and info["parent_version"] == 2
    raw = json.loads((Path(uri) / "_refs" / "branches" / "feat%2Fx.json").read_text())
    assert list(raw) == ["parentBranch", "identifier", "parentVersion", "createAt", "manifestSize", "metadata"]
    txn = branch.read_transaction()
    assert txn is not None and txn.operation.kind == "clone"


def test_writes_on_a_branch_stay_on_it_both_ways(tmp_path: Path) -> None:
    uri = _base(tmp_path)
    ours = lance_format.dataset(uri).create_branch("dev")
    lance.write_dataset(pa.table({"a": [9]}), ours.uri, mode="append")
    lance_format.dataset(uri).checkout_branch("dev").merge_insert("a").when_not_matched_insert_all().execute(
        pa.table({"a": [9, 10]}))
    assert sorted(lance.dataset(uri).checkout_version(("dev", None)).to_table().column("a").to_pylist()) == \
        [2, 3, 4, 9, 10]
    assert lance_format.dataset(uri).to_table().column("a").to_pylist() == [2, 3, 4]
    nested = lance_format.dataset(uri).checkout_branch("dev").create_branch("dev/sub")
    assert nested.to_table().column("a").to_pylist() == lance_format.dataset(uri).checkout_branch(
        "dev").to_table().column("a").to_pylist()
    assert lance.dataset(uri).branches.list()["dev/sub"]["parent_branch"] == "dev"
    assert pickle.loads(pickle.dumps(nested)).to_table().equals(nested.to_table())


def test_pylance_branches_are_listed_and_checked_out(tmp_path: Path) -> None:
    uri = _base(tmp_path)
    branch = lance.dataset(uri).create_branch("theirs", 3)
    lance.write_dataset(pa.table({"a": [7]}), branch.uri, mode="append")
    branches = lance_format.dataset(uri).list_branches()
    assert isinstance(branches["theirs"], Branch) and branches["theirs"].parent_version == 3
    got = lance_format.dataset(uri).checkout_branch("theirs")
    assert got.version == 4 and sorted(got.to_table().column("a").to_pylist()) == [2, 3, 4, 7]
    got.tags.create("on_theirs", 4)
    assert lance.dataset(uri, version="on_theirs").to_table().equals(got.to_table())


def test_delete_branch_keeps_nested_branches_and_main(tmp_path: Path) -> None:
    uri = _base(tmp_path)
    ds = lance_format.dataset(uri)
    ds.create_branch("a").create_branch("a/b")
    ds.delete_branch("a/b")
    assert set(ds.list_branches()) == {"a"}
    assert set(lance.dataset(uri).branches.list()) == {"a"}
    assert lance_format.dataset(uri).checkout_branch("a").count_rows() == 3
    with pytest.raises(InvalidInputError, match="does not exist"):
        ds.delete_branch("a/b")


@pytest.mark.parametrize("bad", ["main", "../up", "/abs", "a..b", "x/"])
def test_bad_branch_names_are_refused(tmp_path: Path, bad: str) -> None:
    ds = lance_format.dataset(_base(tmp_path))
    with pytest.raises(TagError):
        ds.create_branch(bad)
    assert not (Path(ds.uri) / "tree").exists() or not any((Path(ds.uri) / "tree").iterdir())


def test_existing_branch_is_not_overwritten(tmp_path: Path) -> None:
    ds = lance_format.dataset(_base(tmp_path))
    ds.create_branch("dup")
    with pytest.raises(InvalidInputError, match="already exists"):
        ds.create_branch("dup")


@pytest.mark.parametrize("reference", [2, "t3", (None, 3)])
def test_shallow_clone_writes_only_a_manifest(tmp_path: Path, reference: object) -> None:
    uri = _base(tmp_path)
    lance_format.dataset(uri).tags.create("t3", 3)
    target = str(tmp_path / "clone")
    clone = lance_format.dataset(uri).shallow_clone(target, reference)  # type: ignore[arg-type]
    version = 2 if reference == 2 else 3
    assert clone.version == version
    assert lance.dataset(target).to_table().equals(lance_format.dataset(uri, version=version).to_table())
    assert files_under(target, "data") == set() and files_under(target, "_deletions") == set()
    lance.write_dataset(pa.table({"a": [5]}), target, mode="append")
    assert lance_format.dataset(target).count_rows() == lance_format.dataset(uri, version=version).count_rows() + 1
    with pytest.raises(DatasetAlreadyExistsError):
        lance_format.dataset(uri).shallow_clone(target, 3)


def test_pylance_shallow_clone_is_read_and_extended(tmp_path: Path) -> None:
    uri = _base(tmp_path)
    target = str(tmp_path / "their_clone")
    lance.dataset(uri).shallow_clone(target, 3)
    ours = lance_format.dataset(target)
    ours.update({"a": "a * 100"}, where="a = 4")
    assert sorted(lance.dataset(target).to_table().column("a").to_pylist()) == [2, 3, 400]
    assert lance_format.dataset(uri).to_table().column("a").to_pylist() == [2, 3, 4]


def test_pylance_style_references_work(tmp_path: Path) -> None:
    uri = _base(tmp_path)
    ds = lance_format.dataset(uri)
    branch = ds.create_branch("x")
    lance_format.write_dataset(pa.table({"a": [5]}), branch.uri, mode="append")
    assert ds.checkout_version(("x", None)).to_table().column("a").to_pylist() == [2, 3, 4, 5]
    assert ds.checkout_version(("main", 2)).version == 2 and ds.checkout_version((None, None)).branch is None
    ds.tags.create("on_x", ("x", 4))
    assert lance.dataset(uri, version="on_x").to_table().column("a").to_pylist() == [2, 3, 4, 5]
    assert [(b.id, b.is_dataset_root) for b in ds.checkout_version(("x", 4)).base_paths().values()] == [(0, True)]
    assert list(ds.branches.list()) == ["x"]
    ds.branches.delete("x")
    assert ds.list_branches() == {}
