"""Cleanup opens no store per batch, and the driver reads and deletes through the dataset's own store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.cleanup import COMMIT_GRACE_ENV, cleanup_old_versions
from lance_format.maintenance import LocalRunner
from lance_format.maintenance import cleanup as cleanup_mod

ZERO = dt.timedelta(0)


def _counted_open_store(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real = cleanup_mod.open_store

    def counting(uri: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(uri)
        return real(uri, *args, **kwargs)

    cleanup_mod._shared_store.cache_clear()
    monkeypatch.setattr(cleanup_mod, "open_store", counting)
    return opened


def _history(uri: str) -> None:
    for start in range(0, 60, 10):  # six versions, five of them old, one data file each
        lance_format.write_dataset(pa.table({"id": list(range(start, start + 10))}), uri,
                                   mode="create" if start == 0 else "overwrite")


def test_driver_reads_and_deletes_through_the_dataset_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")
    uri = str(tmp_path / "t.lance")
    _history(uri)
    opened = _counted_open_store(monkeypatch)
    stats = cleanup_old_versions(lance_format.dataset(uri), ZERO, commit_grace=ZERO)
    assert stats.old_versions == 5 and stats.data_files_removed == 5
    assert opened == []  # the refresh and every delete went through the dataset's store
    assert lance_format.dataset(uri).to_table()["id"].to_pylist() == list(range(50, 60))


def test_batches_on_a_runner_share_one_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")
    uri = str(tmp_path / "t.lance")
    _history(uri)
    opened = _counted_open_store(monkeypatch)
    stats = cleanup_old_versions(lance_format.dataset(uri), ZERO, commit_grace=ZERO,
                                 runner=LocalRunner(2), batch_size=1)
    assert stats.old_versions == 5 and stats.data_files_removed == 5 and len(stats.keys) > 5
    assert opened == [uri]  # one store for all batches (the driver used the dataset's)
