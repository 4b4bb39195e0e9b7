"""Parsed file tails are cached per session, never stale, bounded, and skip what cannot be trusted."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file import reader as reader_mod
from lance_format.session import Session, default_session
from lance_format.storage import open_store

from .helpers import write_public_file

pytestmark = pytest.mark.usefixtures("fresh_caches")


def _cached_tails(session: Session | None = None) -> int:
    """File tails held by ``session``'s metadata cache (default: the process-wide session)."""
    return (session or default_session()).metadata_cache.count(reader_mod.FILE_TAIL)


def test_metadata_cache_hit_gives_same_results(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    table = pa.table({"id": pa.array(np.arange(100)), "s": pa.array([str(i) for i in range(100)])})
    write_public_file(path, table)
    first = LanceFileReader(str(path)).read_all().to_table()
    assert _cached_tails() == 1
    second = LanceFileReader(str(path), columns=["s"]).read_all().to_table()
    assert _cached_tails() == 1
    assert first.equals(table)
    assert second.equals(table.select(["s"]))


def test_metadata_cache_not_stale_after_rewrite_with_other_size(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    write_public_file(path, pa.table({"x": pa.array(np.arange(10))}))
    assert LanceFileReader(str(path)).num_rows == 10
    write_public_file(path, pa.table({"y": pa.array(np.arange(5000, dtype=np.float64))}))
    fresh = LanceFileReader(str(path))
    assert fresh.num_rows == 5000
    assert fresh.schema.names == ["y"]
    assert fresh.read_all().to_table().column("y").to_pylist() == list(map(float, range(5000)))


def test_metadata_cache_not_stale_after_same_size_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    write_public_file(path, pa.table({"x": pa.array(np.arange(10))}))
    size = path.stat().st_size
    assert LanceFileReader(str(path)).read_all().to_table().column("x").to_pylist() == list(range(10))
    write_public_file(path, pa.table({"x": pa.array(np.arange(10, 20))}))
    assert path.stat().st_size == size
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # mtime differs from before
    got = LanceFileReader(str(path), file_size=size).read_all().to_table()
    assert got.column("x").to_pylist() == list(range(10, 20))


def test_metadata_cache_is_bounded(tmp_path: Path) -> None:
    # a session just large enough for three of these files' tails (plus their shared schema)
    write_public_file(tmp_path / "probe.lance", pa.table({"x": pa.array([0])}))
    probe = Session()
    LanceFileReader(store=open_store(str(tmp_path), session=probe), key="probe.lance")
    held = probe.metadata_cache.size_by_kind()
    session = Session(metadata_cache_size_bytes=3 * held["file_tail"] + held["file_schema"] + 100)
    store = open_store(str(tmp_path), session=session)
    for i in range(6):
        path = tmp_path / f"f{i}.lance"
        write_public_file(path, pa.table({"x": pa.array([i])}))
        assert LanceFileReader(store=store, key=path.name).read_all().to_table().column("x").to_pylist() == [i]
    assert _cached_tails(session) == 3


def test_metadata_cache_skips_corrupt_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.lance"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(Exception):  # noqa: B017 - any LanceError subclass
        LanceFileReader(str(path))
    assert _cached_tails() == 0


def test_memory_store_files_are_not_cached() -> None:
    table = pa.table({"x": pa.array(np.arange(10))})
    store = open_store("memory://scan-overhead-test")  # one store: each open of a memory:// URI is empty
    writer = LanceFileWriter(None, table.schema, version="2.1", store=store, key="a.lance")
    writer.write_batch(table)
    writer.close()
    assert LanceFileReader(None, store=store, key="a.lance").read_all().to_table().equals(table)
    assert _cached_tails() == 0
