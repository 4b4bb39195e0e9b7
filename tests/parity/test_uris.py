"""Dataset URIs resolve as pylance 14.0.2 resolves them."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

T = pa.table({"x": pa.array(range(100), pa.int64())})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``$HOME``, with the working directory elsewhere (where ``./~`` would appear)."""
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "home"


@pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])
def test_tilde_is_the_home_directory(home: Path, lib: Any) -> None:
    ds = lib.write_dataset(T, "~/t.lance", max_rows_per_file=30)
    assert ds.uri == "~/t.lance"  # pylance keeps the URI as given
    assert (home / "t.lance" / "_versions").is_dir()
    assert os.listdir(".") == []  # no ./~ directory
    lib.write_dataset(T, "~/t.lance", mode="append")
    assert lib.dataset("~/t.lance").count_rows() == 200


def test_tilde_dataset_is_maintained_in_place(home: Path) -> None:
    """Every verb of ours works on a ``~`` URI, and pylance reads the result from the real path."""
    ds = lance_format.write_dataset(T, "~/t.lance", max_rows_per_file=10)
    ds.delete("x < 5")
    ds.create_scalar_index("x", "BTREE")
    ds.optimize.compact_files()
    ds.add_columns({"y": "x * 2"})
    ds.cleanup_old_versions(older_than=dt.timedelta(0))
    assert os.listdir(".") == []
    theirs = lance.dataset(str(home / "t.lance"))
    assert theirs.to_table(filter="x > 50").equals(lance_format.dataset("~/t.lance").to_table(filter="x > 50"))


def test_memory_uri_in_pylance_is_a_fresh_store_per_call() -> None:
    """What pylance 14.0.2 does with ``memory://`` (each call opens a new, empty store; a handle keeps its own)."""
    ds = lance.write_dataset(T, "memory://parity-m")
    with pytest.raises(ValueError, match="not found"):
        lance.dataset("memory://parity-m")
    again = lance.write_dataset(T, "memory://parity-m", mode="create")  # no "already exists"
    assert again.version == 1
    ds.delete("x < 10")  # the first handle still has its store
    assert ds.count_rows() == 90


def test_memory_uri_is_a_fresh_store_per_call() -> None:
    """Ours as pylance (more in tests/parity/test_memory_store.py)."""
    lance_format.write_dataset(T, "memory://parity-ours")
    with pytest.raises(ValueError, match="not found|no Lance dataset found"):
        lance_format.dataset("memory://parity-ours")
