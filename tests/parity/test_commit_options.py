"""Commit options and commit rules as pylance 14.0.2 has them: Restore's conflict checks,
``commit_lock=``, ``commit(detached=True)``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import lance.fragment
import pyarrow as pa
import pytest

import lance_format

LIBS = pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])
T = pa.table({"x": pa.array(range(30), pa.int64()), "y": pa.array(range(30), pa.int64())})


def _schema_edit(lib: Any) -> Any:
    L = lib.LanceOperation
    return L.UpdateConfig(schema_metadata_updates=L.UpdateMap({"k": "v"}))


@pytest.mark.parametrize("read_version", [None, 0, 1, 2])
def test_restore_is_checked_from_its_read_version(tmp_path: Path, read_version: int | None) -> None:
    """Version 2 edits the schema metadata. A Restore read at version 1 is refused over it; one
    without a read version (None, 0) is blind; one read at version 2 has nothing to check."""
    got = {}
    for lib in (lance, lance_format):
        uri = str(tmp_path / lib.__name__)
        lib.write_dataset(T, uri, max_rows_per_file=10)
        lib.LanceDataset.commit(uri, _schema_edit(lib), read_version=1)
        try:
            ds = lib.LanceDataset.commit(uri, lib.LanceOperation.Restore(1), read_version=read_version)
        except OSError as exc:
            assert "conflict" in str(exc).lower() or "incompatible" in str(exc).lower()
            got[lib.__name__] = "refused"
        else:
            got[lib.__name__] = (ds.version, ds.schema.metadata)
    assert got["lance_format"] == got["lance"]
    assert (got["lance"] == "refused") == (read_version == 1)


@LIBS
def test_restore_method_rolls_back_over_a_schema_edit(tmp_path: Path, lib: Any) -> None:
    uri = str(tmp_path / "t")
    lib.write_dataset(T, uri)
    lib.LanceDataset.commit(uri, _schema_edit(lib), read_version=1)
    ds = lib.dataset(uri, version=1)
    ds.restore()
    assert ds.version == 3 and not lib.dataset(uri).schema.metadata


class _Recorder:
    """A commit lock that records which version it was held for and what ``_versions/`` held then."""

    def __init__(self, uri: Path) -> None:
        self.uri = uri
        self.calls: list[tuple[str, int, int]] = []

    def _manifests(self) -> int:
        folder = self.uri / "_versions"
        return sum(1 for p in folder.iterdir() if p.suffix == ".manifest") if folder.exists() else 0

    def __call__(self, version: int) -> contextlib.AbstractContextManager[None]:
        @contextlib.contextmanager
        def held() -> Iterator[None]:
            self.calls.append(("enter", version, self._manifests()))
            yield
            self.calls.append(("exit", version, self._manifests()))
        return held()


def _lock_story(lib: Any, uri: Path) -> list[tuple[str, int, int]]:
    lock = _Recorder(uri)
    lib.write_dataset(T, str(uri), commit_lock=lock)
    lib.write_dataset(T, str(uri), mode="append", commit_lock=lock)
    lib.LanceDataset.commit(str(uri), lib.LanceOperation.Append([]), read_version=2, commit_lock=lock)
    ds = lib.dataset(str(uri), commit_lock=lock)  # held for every commit made through the handle
    ds.delete("x < 3")
    ds.checkout_version(1).restore()
    return lock.calls


def test_commit_lock_is_held_around_each_manifest_write(tmp_path: Path) -> None:
    ours, theirs = _lock_story(lance_format, tmp_path / "ours"), _lock_story(lance, tmp_path / "pylance")
    assert ours == theirs
    assert [c[:2] for c in ours[:2]] == [("enter", 1), ("exit", 1)] and ours[-1][:2] == ("exit", 5)


@LIBS
def test_a_failing_commit_lock_fails_the_commit(tmp_path: Path, lib: Any) -> None:
    uri = str(tmp_path / "t")
    lib.write_dataset(T, uri)

    def refuse(version: int) -> contextlib.AbstractContextManager[None]:
        raise RuntimeError(f"version {version} is locked")

    with pytest.raises(OSError, match="locked"):
        lib.write_dataset(T, uri, mode="append", commit_lock=refuse)
    with pytest.raises(TypeError, match="commit_lock must be a function"):
        lib.write_dataset(T, uri, mode="append", commit_lock=5)
    assert lib.dataset(uri).version == 1 and lib.dataset(uri).count_rows() == 30


def _detached_story(lib: Any, uri: Path) -> dict[str, Any]:
    lib.write_dataset(T, str(uri))
    writer = lance.fragment.write_fragments if lib is lance else lance_format.fragment.write_fragments
    det = lib.LanceDataset.commit(str(uri), lib.LanceOperation.Append(writer(T, str(uri))), read_version=1,
                                  detached=True)
    det2 = lib.LanceDataset.commit(det, lib.LanceOperation.Append(writer(T, str(uri))), read_version=det.version,
                                   detached=True)
    after = lib.write_dataset(T, str(uri), mode="append")
    names = sorted(p.name for p in (uri / "_versions").iterdir() if p.suffix == ".manifest")
    return {
        "flagged": (det.version >> 63, det2.version >> 63),
        "rows": (det.count_rows(), det2.count_rows(), lib.dataset(str(uri), version=det.version).count_rows()),
        "main": (lib.dataset(str(uri), version=1).count_rows(), after.version, after.count_rows(),
                 [v["version"] for v in after.versions()]),
        "files": (sum(n.startswith("d") for n in names), len(names)),
        "named": {f"d{det.version}.manifest", f"d{det2.version}.manifest"} <= set(names),
    }


def test_detached_commits_stay_off_the_main_lineage(tmp_path: Path) -> None:
    ours, theirs = _detached_story(lance_format, tmp_path / "ours"), _detached_story(lance, tmp_path / "pylance")
    assert ours == theirs
    assert ours["rows"] == (60, 90, 60) and ours["main"] == (30, 2, 60, [1, 2]) and ours["named"]


@LIBS
def test_detached_commits_need_v2_manifest_paths(tmp_path: Path, lib: Any) -> None:
    uri = str(tmp_path / "t")
    lib.write_dataset(T, uri, enable_v2_manifest_paths=False)
    with pytest.raises(OSError if lib is lance else NotImplementedError, match="(?i)v1 manifest paths"):
        lib.LanceDataset.commit(uri, lib.LanceOperation.Append([]), read_version=1, detached=True)


def _kept_lock_versions(lib: Any, uri: Path) -> list[int]:
    lock = _Recorder(uri)
    ds = lib.write_dataset(T, str(uri), commit_lock=lock)
    ds.delete("x < 2")  # the returned dataset commits under the lock it was written with
    more = lib.LanceDataset.commit(ds, lib.LanceOperation.Append([]), read_version=ds.version, commit_lock=lock)
    more.delete("x < 4")
    lib.write_dataset(T, lib.dataset(str(uri), commit_lock=lock), mode="append")  # a dataset target: its lock
    return [version for what, version, _ in lock.calls if what == "enter"]


def test_a_dataset_keeps_the_commit_lock_it_was_written_with(tmp_path: Path) -> None:
    ours, theirs = _kept_lock_versions(lance_format, tmp_path / "ours"), _kept_lock_versions(lance, tmp_path / "py")
    assert ours == theirs == [1, 2, 3, 4, 5]


def _stale_write(lib: Any, uri: Path, first: str, mode: str) -> Any:
    stale = lib.write_dataset(T, str(uri))
    if first == "append":
        lib.write_dataset(T, str(uri), mode="append")
    elif first == "overwrite":
        lib.write_dataset(T, str(uri), mode="overwrite")
    elif first == "restore":
        lib.dataset(str(uri)).restore()
    else:
        lib.dataset(str(uri)).delete("x < 3")
    try:
        done = lib.write_dataset(T, stale, mode=mode)
    except OSError as exc:
        return "retry" if "retry" in str(exc).lower() else "conflict"
    return done.version, done.count_rows()


@pytest.mark.parametrize("first", ["append", "overwrite", "restore", "delete"])
@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_a_write_to_a_dataset_object_is_built_on_its_version(tmp_path: Path, first: str, mode: str) -> None:
    """write_dataset(data, ds) reads at ds.version: what landed since is checked for conflicts."""
    theirs = _stale_write(lance, tmp_path / "pylance", first, mode)
    assert _stale_write(lance_format, tmp_path / "ours", first, mode) == theirs
