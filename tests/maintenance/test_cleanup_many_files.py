"""Cleanup of 10,000 data files: exactly pylance's files and figures, and a delete that fails mid-way."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.cleanup import COMMIT_GRACE_ENV

FILES = 10_000
ZERO = dt.timedelta(0)


@pytest.fixture(autouse=True)
def _no_commit_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """pylance has no commit grace; these cleanups compare with it."""
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Version 1: 10,000 one-row data files (written by pylance); version 2 overwrites them with one row."""
    src = tmp_path_factory.mktemp("many") / "ds"
    lance.write_dataset(pa.table({"id": np.arange(FILES, dtype=np.int64)}), str(src), max_rows_per_file=1)
    lance.write_dataset(pa.table({"id": np.zeros(1, dtype=np.int64)}), str(src), mode="overwrite")
    return src


def _copy(src: Path, dst: Path) -> str:
    shutil.copytree(src, dst)  # copy2 keeps modification times
    return str(dst)


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


def _figures(s: object) -> tuple[int, ...]:
    return tuple(getattr(s, k) for k in ("bytes_removed", "old_versions", "data_files_removed",
                                         "deletion_files_removed", "transaction_files_removed",
                                         "index_files_removed", "failed_deletes"))


def test_cleanup_of_10000_files_removes_exactly_pylances_files(many_files: Path, tmp_path: Path) -> None:
    ours, theirs = _copy(many_files, tmp_path / "ours"), _copy(many_files, tmp_path / "theirs")
    got = lance_format.dataset(ours).cleanup_old_versions(older_than=ZERO)
    want = lance.dataset(theirs).cleanup_old_versions(older_than=ZERO)
    assert _figures(got) == _figures(want)
    assert got.data_files_removed == FILES
    assert _files(ours) == _files(theirs)
    assert lance_format.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())


def test_a_delete_failing_mid_way_is_counted_and_reported_and_the_dataset_stays_readable(
        many_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # pylance 14.0.2 does the same when one unlink fails (checked by hand with an immutable
    # file, chattr +i): the other files go, failed_deletes counts it, nothing is raised.
    ours, theirs = _copy(many_files, tmp_path / "ours"), _copy(many_files, tmp_path / "theirs")
    data = sorted(f for f in _files(ours) if f.startswith("data/"))
    stuck = os.path.join(ours, data[len(data) // 2])
    real_unlink = os.unlink

    def unlink(path: str, *args: object, **kwargs: object) -> None:
        if path == stuck:
            raise PermissionError(1, "Operation not permitted", path)
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink)  # the local store's deletes go through os.unlink
    with caplog.at_level(logging.WARNING, logger="lance_format.maintenance.cleanup"):
        got = lance_format.dataset(ours).cleanup_old_versions(older_than=ZERO)
    monkeypatch.undo()
    want = lance.dataset(theirs).cleanup_old_versions(older_than=ZERO)

    assert got.failed_deletes == 1
    assert got.data_files_removed == want.data_files_removed - 1 == FILES - 1
    assert got.bytes_removed == want.bytes_removed - os.path.getsize(stuck)
    assert _files(ours) == _files(theirs) | {data[len(data) // 2]}
    reports = [r.getMessage() for r in caplog.records if "could not delete" in r.getMessage()]
    assert len(reports) == 1 and stuck in reports[0] and "Operation not permitted" in reports[0]
    # The latest version is whole: both libraries read it, and pylance validates it.
    lance.dataset(ours).validate()
    assert lance_format.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    assert lance.dataset(ours).to_table().equals(lance.dataset(theirs).to_table())
    # A second cleanup removes the leftover once deleting works again (it is older than the kept version).
    again = lance_format.dataset(ours).cleanup_old_versions(older_than=ZERO, delete_unverified=True)
    assert again.data_files_removed == 1 and again.failed_deletes == 0
    assert _files(ours) == _files(theirs)
