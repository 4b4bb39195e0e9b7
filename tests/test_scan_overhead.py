"""Caches behind the per-fragment scan speed-ups: file tails and decoded deletion vectors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file import reader as reader_mod
from lance_format.storage import open_store
from lance_format.table import deletion


def _write(path: Path, table: pa.Table, version: str = "2.1") -> None:
    writer = LanceFileWriter(str(path), table.schema, version=version)
    writer.write_batch(table)
    writer.close()


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    reader_mod.clear_metadata_cache()
    deletion.clear_deletion_cache()


def test_metadata_cache_hit_gives_same_results(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    table = pa.table({"id": pa.array(np.arange(100)), "s": pa.array([str(i) for i in range(100)])})
    _write(path, table)
    first = LanceFileReader(str(path)).read_all().to_table()
    assert len(reader_mod._meta_cache) == 1
    second = LanceFileReader(str(path), columns=["s"]).read_all().to_table()
    assert len(reader_mod._meta_cache) == 1
    assert first.equals(table)
    assert second.equals(table.select(["s"]))


def test_metadata_cache_not_stale_after_rewrite_with_other_size(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    _write(path, pa.table({"x": pa.array(np.arange(10))}))
    assert LanceFileReader(str(path)).num_rows == 10
    _write(path, pa.table({"y": pa.array(np.arange(5000, dtype=np.float64))}))
    fresh = LanceFileReader(str(path))
    assert fresh.num_rows == 5000
    assert fresh.schema.names == ["y"]
    assert fresh.read_all().to_table().column("y").to_pylist() == list(map(float, range(5000)))


def test_metadata_cache_not_stale_after_same_size_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "a.lance"
    _write(path, pa.table({"x": pa.array(np.arange(10))}))
    size = path.stat().st_size
    assert LanceFileReader(str(path)).read_all().to_table().column("x").to_pylist() == list(range(10))
    _write(path, pa.table({"x": pa.array(np.arange(10, 20))}))
    assert path.stat().st_size == size
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # mtime differs from before
    got = LanceFileReader(str(path), file_size=size).read_all().to_table()
    assert got.column("x").to_pylist() == list(range(10, 20))


def test_metadata_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_mod, "_META_CACHE_ENTRIES", 3)
    for i in range(6):
        path = tmp_path / f"f{i}.lance"
        _write(path, pa.table({"x": pa.array([i])}))
        assert LanceFileReader(str(path)).read_all().to_table().column("x").to_pylist() == [i]
    assert len(reader_mod._meta_cache) == 3


def test_metadata_cache_skips_corrupt_files(tmp_path: Path) -> None:
    path = tmp_path / "bad.lance"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(Exception):  # noqa: B017 - any LanceError subclass
        LanceFileReader(str(path))
    assert len(reader_mod._meta_cache) == 0


def test_deletion_cache_keys_on_content(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    df = deletion.write_deletion_file(store, 0, 1, np.array([3, 1, 2]))
    got = deletion.read_deletion_file(store, 0, df)
    assert got.tolist() == [1, 2, 3]
    got[0] = 99  # callers get their own copy
    assert deletion.read_deletion_file(store, 0, df).tolist() == [1, 2, 3]
    # the same name with other bytes (never happens in a dataset) is decoded afresh
    store.delete(df.key(0))
    store.write(df.key(0), deletion.encode_arrow_deletions(np.array([7], np.uint32)))
    assert deletion.read_deletion_file(store, 0, df).tolist() == [7]


def test_deletion_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deletion, "_DECODED_CACHE_BYTES", 20_000)
    store = open_store(str(tmp_path))
    for frag in range(50):
        df = deletion.write_deletion_file(store, frag, 1, np.arange(frag + 1))
        assert deletion.read_deletion_file(store, frag, df).tolist() == list(range(frag + 1))
    assert deletion._decoded_held[0] <= 20_000
    assert len(deletion._decoded) < 50


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("rows", [1, 7, 300, 1000, 1500, 2100, 5000])
def test_small_page_fast_paths_match_pylance(tmp_path: Path, version: str, rows: int) -> None:
    """Few-chunk pages (strings, bit-packed ints) decode exactly as pylance wrote them."""
    lance_file = pytest.importorskip("lance.file")
    rng = np.random.default_rng(rows)
    strings = [None if i % 11 == 3 else "x" * int(rng.integers(0, 40)) for i in range(rows)]
    table = pa.table({
        "i": pa.array(rng.integers(-(1 << 40), 1 << 40, rows)),
        "small": pa.array(rng.integers(0, 100, rows).astype(np.int32)),
        "s": pa.array(strings, pa.string()),
        "ls": pa.array(strings, pa.large_string()),
        "f": pa.array(rng.random(rows)),
    })
    path = tmp_path / "theirs.lance"
    writer = lance_file.LanceFileWriter(str(path), table.schema, version=version)
    writer.write_batch(table)
    writer.close()
    got = LanceFileReader(str(path)).read_all().to_table()
    assert got.equals(table)
    ours = tmp_path / "ours.lance"
    _write(ours, table, version)
    assert LanceFileReader(str(ours)).read_all().to_table().equals(table)
    back = lance_file.LanceFileReader(str(ours)).read_all().to_table()
    assert back.equals(table)


def test_memory_store_files_are_not_cached() -> None:
    table = pa.table({"x": pa.array(np.arange(10))})
    path = "memory://scan-overhead-test/a.lance"
    writer = LanceFileWriter(path, table.schema, version="2.1")
    writer.write_batch(table)
    writer.close()
    assert LanceFileReader(path).read_all().to_table().equals(table)
    assert len(reader_mod._meta_cache) == 0
