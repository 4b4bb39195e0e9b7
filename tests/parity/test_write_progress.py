"""``write_dataset(progress=...)`` calls a ``FragmentWriteProgress`` as pylance 14.0.2 does: ``begin``
as each data file starts, ``complete`` as each file but the last ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import lance.fragment
import lance.progress
import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment
import lance_format.progress

T = pa.table({"a": pa.array(range(2500), pa.int64())})
MODULES = {"pylance": (lance, lance.progress), "ours": (lance_format, lance_format.progress)}


def _events(lib: Any, progress_module: Any, uri: str, **kwargs: Any) -> list[tuple[Any, ...]]:
    class Recorder(progress_module.FragmentWriteProgress):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.events: list[tuple[Any, ...]] = []

        def begin(self, fragment: Any, **kw: Any) -> None:
            self.events.append(("begin", fragment.id, len(fragment.files)))

        def complete(self, fragment: Any, **kw: Any) -> None:
            files = [(list(f.fields), f.file_major_version) for f in fragment.files]
            self.events.append(("complete", fragment.id, fragment.physical_rows, files))

    rec = Recorder()
    lib.write_dataset(T, uri, progress=rec, **kwargs)
    return rec.events


@pytest.mark.parametrize("version", ["2.0", "2.2", "legacy"])
def test_begin_and_complete_per_data_file(tmp_path: Path, version: str) -> None:
    got = {name: _events(lib, mod, str(tmp_path / name), max_rows_per_file=1000, data_storage_version=version)
           for name, (lib, mod) in MODULES.items()}
    assert got["ours"] == got["pylance"]
    assert [e[0] for e in got["ours"]] == ["begin", "complete", "begin", "complete", "begin"]


def test_file_system_progress_leaves_the_last_file_in_progress(tmp_path: Path) -> None:
    for name, (lib, mod) in MODULES.items():
        folder = tmp_path / f"{name}-progress"
        lib.write_dataset(T, str(tmp_path / name), max_rows_per_file=1000,
                          progress=mod.FileSystemFragmentWriteProgress(str(folder), {"worker": "w1"}))
        assert sorted(p.name for p in folder.iterdir()) == ["fragment_0.in_progress", "fragment_0.json"], name


def test_noop_progress_is_accepted(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(T, str(tmp_path / "t"), progress=lance_format.progress.NoopFragmentWriteProgress())
    assert ds.count_rows() == 2500


def test_write_fragments_reports_progress_as_pylance(tmp_path: Path) -> None:
    got = {}
    for name, (lib, mod) in MODULES.items():
        class Recorder(mod.FragmentWriteProgress):  # type: ignore[misc,name-defined]
            def __init__(self) -> None:
                self.events: list[tuple[str, int]] = []

            def begin(self, fragment: Any, **kw: Any) -> None:
                self.events.append(("begin", fragment.id))

            def complete(self, fragment: Any, **kw: Any) -> None:
                self.events.append(("complete", fragment.physical_rows))

        rec = Recorder()
        writer = lance.fragment.write_fragments if lib is lance else lance_format.fragment.write_fragments
        frags = writer(T, str(tmp_path / name), max_rows_per_file=1000, progress=rec)
        got[name] = (rec.events, [f.physical_rows for f in frags])
    assert got["ours"] == got["pylance"]
