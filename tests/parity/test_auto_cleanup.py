"""Automatic cleanup as pylance 14.0.2 configures and runs it: ``write_dataset(auto_cleanup_options=)``
on a new dataset, ``ds.optimize.enable_auto_cleanup`` / ``disable_auto_cleanup`` on an existing one,
the ``lance.auto_cleanup.*`` config keys they write and the versions left after each commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

LIBS = {"pylance": lance, "ours": lance_format}
T = pa.table({"x": pa.array(range(30), pa.int64())})


@pytest.fixture(autouse=True)
def _no_commit_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ours keeps versions superseded less than 5 minutes ago (a commit in flight may have read
    # them); a grace of 0 is pylance's behaviour (lance_format/maintenance/cleanup.py).
    monkeypatch.setenv("LANCE_FORMAT_COMMIT_GRACE", "0s")


def _appends(lib: Any, uri: str, count: int) -> list[tuple[int, list[int]]]:
    seen = []
    for _ in range(count):
        ds = lib.write_dataset(T, uri, mode="append")
        seen.append((ds.version, sorted(v["version"] for v in ds.versions())))
    return seen


def test_write_dataset_options_configure_a_new_dataset(tmp_path: Path) -> None:
    got = {}
    for name, lib in LIBS.items():
        uri = str(tmp_path / name)
        ds = lib.write_dataset(T, uri, auto_cleanup_options={"interval": 2, "older_than_seconds": 0})
        got[name] = (ds.config(), _appends(lib, uri, 5))
    assert got["ours"] == got["pylance"]
    assert got["ours"][0] == {"lance.auto_cleanup.interval": "2", "lance.auto_cleanup.older_than": "0s"}
    assert got["ours"][1][-1] == (6, [5, 6])


def test_write_dataset_options_leave_an_existing_dataset_alone(tmp_path: Path) -> None:
    for name, lib in LIBS.items():
        uri = str(tmp_path / name)
        lib.write_dataset(T, uri)
        ds = lib.write_dataset(T, uri, mode="overwrite", auto_cleanup_options={"interval": 1, "older_than_seconds": 0})
        assert ds.config() == {}, name
        assert len(ds.versions()) == 2, name


def test_enable_and_disable_auto_cleanup(tmp_path: Path) -> None:
    got = {}
    for name, lib in LIBS.items():
        uri = str(tmp_path / name)
        ds = lib.write_dataset(T, uri)
        ds.optimize.enable_auto_cleanup({"interval": 3, "older_than_seconds": 0})
        enabled = ds.config()
        runs = _appends(lib, uri, 4)
        ds = lib.dataset(uri)
        ds.optimize.disable_auto_cleanup()
        got[name] = (enabled, runs, ds.config(), _appends(lib, uri, 3))
    assert got["ours"] == got["pylance"]
    assert got["ours"][0] == {"lance.auto_cleanup.interval": "3", "lance.auto_cleanup.older_than": "0s"}
    assert got["ours"][2] == {}


def test_a_bad_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises((ValueError, TypeError)):
        lance_format.write_dataset(T, str(tmp_path / "t"), auto_cleanup_options={"interval": "often"})  # type: ignore[typeddict-item]
    assert not (tmp_path / "t" / "_versions").exists()
