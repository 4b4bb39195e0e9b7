"""LanceDataset.commit_batch as pylance 14.0.2: Append transactions of several writers become one version."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import NotSupportedError

lance = pytest.importorskip("lance")


def _batch_commit(package: str, tmp: Path) -> dict[str, object]:
    # import_module: ``lance.dataset`` the module is shadowed by ``lance.dataset`` the function
    ds_mod, frags = import_module(f"{package}.dataset"), import_module(f"{package}.fragment")
    lib = import_module(package)
    ds = lib.write_dataset(pa.table({"a": [0]}), str(tmp))
    txns = []
    for i in range(3):
        written = frags.write_fragments(pa.table({"a": [i * 10 + 1, i * 10 + 2]}), str(tmp))
        txns.append(ds_mod.Transaction(ds.version, ds_mod.LanceOperation.Append(written),
                                       transaction_properties={f"w{i}": "x"}))
    return ds_mod.LanceDataset.commit_batch(str(tmp), txns)  # type: ignore[no-any-return]


def test_commit_batch_of_appends_gives_pylances_version(tmp_path: Path) -> None:
    theirs = _batch_commit("lance", tmp_path / "t")
    ours = _batch_commit("lance_format", tmp_path / "o")
    assert set(ours) == set(theirs) == {"dataset", "merged"}
    t_ds, o_ds = theirs["dataset"], ours["dataset"]
    assert o_ds.version == t_ds.version == 2  # type: ignore[attr-defined]
    assert o_ds.to_table().equals(t_ds.to_table())  # type: ignore[attr-defined]
    t_m, o_m = theirs["merged"], ours["merged"]
    assert type(o_m.operation).__name__ == type(t_m.operation).__name__ == "Append"  # type: ignore[attr-defined]
    assert len(o_m.operation.fragments) == len(t_m.operation.fragments) == 3  # type: ignore[attr-defined]
    assert o_m.read_version == t_m.read_version  # type: ignore[attr-defined]
    # each library reads the other's result
    assert lance.dataset(o_ds.uri).to_table().equals(t_ds.to_table())  # type: ignore[attr-defined]


def test_commit_batch_refuses_what_it_cannot_merge(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(pa.table({"a": [0]}), str(tmp_path / "o"))
    delete = lance_format.Transaction(ds.version, lance_format.LanceOperation.Delete([], [0], "a = 0"))
    with pytest.raises(NotSupportedError, match="only Append"):
        lance_format.LanceDataset.commit_batch(ds.uri, [delete])
    with pytest.raises(lance_format.errors.InvalidInputError, match="must not be empty"):
        lance_format.LanceDataset.commit_batch(ds.uri, [])
    assert lance_format.dataset(ds.uri).version == 1
