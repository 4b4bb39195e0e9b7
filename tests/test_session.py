"""Sessions: one bounded cache facility, shared by the datasets opened with it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file import reader as reader_mod
from lance_format.session import (
    DEFAULT_INDEX_CACHE_SIZE_BYTES,
    DEFAULT_METADATA_CACHE_SIZE_BYTES,
    ENTRY_OVERHEAD_BYTES,
    CacheKind,
    LruCache,
    Session,
    default_session,
)
from lance_format.storage import open_store

_A: CacheKind[str] = CacheKind("a")
_B: CacheKind[str] = CacheKind("b")


def test_lru_cache_evicts_least_recently_used_within_its_byte_bound() -> None:
    cache = LruCache(3 * (100 + ENTRY_OVERHEAD_BYTES))
    for key in "xyz":
        cache.put(_A, key, key.upper(), 100)
    assert cache.get(_A, "x") == "X"  # x is now the most recently used
    cache.put(_A, "w", "W", 100)
    assert cache.get(_A, "y") is None
    assert [cache.get(_A, k) for k in "xzw"] == ["X", "Z", "W"]
    assert cache.size_bytes() == 3 * (100 + ENTRY_OVERHEAD_BYTES) == cache.capacity_bytes


def test_lru_cache_kinds_do_not_collide_and_oversized_entries_are_not_kept() -> None:
    cache = LruCache(10_000)
    cache.put(_A, 1, "a", 10)
    cache.put(_B, 1, "b", 10)
    assert cache.get_many(_A, [1, 2]) == ["a", None]
    assert cache.get(_B, 1) == "b"
    cache.put(_A, 2, "huge", 20_000)
    assert cache.get(_A, 2) is None
    assert cache.count(_A) == 1 and cache.count(_B) == 1
    cache.put(_A, 1, "a2", 30)  # replacing re-counts the entry
    assert cache.size_bytes() == 40 + 2 * ENTRY_OVERHEAD_BYTES
    assert cache.size_by_kind() == {"a": 30 + ENTRY_OVERHEAD_BYTES, "b": 10 + ENTRY_OVERHEAD_BYTES}
    cache.clear()
    assert len(cache) == 0 and cache.size_bytes() == 0


def test_lru_cache_is_safe_under_concurrent_use() -> None:
    cache = LruCache(50 * (8 + ENTRY_OVERHEAD_BYTES))

    def work(seed: int) -> None:
        for i in range(2000):
            key = (seed * 7 + i) % 120
            if cache.get(_A, key) is None:
                cache.put(_A, key, str(key), 8)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.size_bytes() <= cache.capacity_bytes
    assert cache.size_bytes() == len(cache) * (8 + ENTRY_OVERHEAD_BYTES)


def test_session_defaults_and_bad_sizes() -> None:
    session = Session()
    assert session.metadata_cache_size_bytes == DEFAULT_METADATA_CACHE_SIZE_BYTES
    assert session.index_cache_size_bytes == DEFAULT_INDEX_CACHE_SIZE_BYTES
    assert session.size_bytes() == 0 and session.approx_num_items() == 0
    assert default_session() is default_session()
    assert default_session().is_same_as(default_session()) and not session.is_same_as(default_session())
    with pytest.raises(InvalidInputError, match="-1"):
        Session(metadata_cache_size_bytes=-1)


def test_dataset_carries_its_session(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": [1, 2, 3]}), uri)
    session = Session(metadata_cache_size_bytes=1 << 20)
    ds = lance_format.dataset(uri, session=session)
    assert ds.session() is session
    assert ds.to_table().column("id").to_pylist() == [1, 2, 3]
    held = session.metadata_cache.size_by_kind()
    assert held["file_tail"] > 0 and held["fragment_model"] > 0
    ds.delete("id = 2")  # the commit, its manifest and the deletion vector stay in the session
    again = lance_format.dataset(uri, session=session)
    assert again.to_table().column("id").to_pylist() == [1, 3]
    assert again.checkout_version(1).session() is session
    assert {"written_manifest", "deletion_vector"} <= set(session.metadata_cache.size_by_kind())
    assert lance_format.dataset(uri).session() is default_session()
    session.clear()
    assert session.size_bytes() == 0
    assert again.to_table().column("id").to_pylist() == [1, 3]  # re-read after clearing


def test_file_readers_use_the_session_of_their_store(tmp_path: Path) -> None:
    table = pa.table({"x": pa.array(np.arange(10))})
    writer = LanceFileWriter(str(tmp_path / "a.lance"), table.schema, version="2.1")
    writer.write_batch(table)
    writer.close()
    session = Session()
    store = open_store(str(tmp_path), session=session)
    assert LanceFileReader(store=store, key="a.lance").read_all().to_table().equals(table)
    assert session.metadata_cache.count(reader_mod.FILE_TAIL) == 1
    assert store.child("sub").session is session  # child stores inherit the session


def test_s3_clients_are_shared_per_option_set_across_sessions(s3_server: tuple[str, str, dict[str, str]],
                                                              s3_uri: str) -> None:
    # A client costs tens of ms to build (service model, endpoint resolution): one per option set
    # for the process, whatever session a store belongs to (issue 28 item 6).

    _endpoint, _bucket, options = s3_server
    session = Session()
    store = open_store(s3_uri, options, session=session)
    store.write("k", b"v")
    child = open_store(s3_uri, options, session=session).child("x")
    child.write("k", b"w")
    assert child.session is session and store.read("x/k") == b"w"
    other = Session()
    again = open_store(s3_uri, options, session=other)
    assert again.read("k") == b"v"
    assert again._client is store._client  # type: ignore[attr-defined]
    assert open_store(s3_uri, {**options, "region": "eu-west-3"}, session=other)._client \
        is not store._client  # type: ignore[attr-defined]


def test_a_zero_sized_session_caches_nothing_and_still_reads(tmp_path: Path) -> None:
    uri = str(tmp_path / "t.lance")
    lance_format.write_dataset(pa.table({"id": [1, 2, 3]}), uri)
    lance_format.write_dataset(pa.table({"id": [4]}), uri, mode="append")
    session = Session(metadata_cache_size_bytes=0, index_cache_size_bytes=0)
    ds = lance_format.dataset(uri, session=session)
    assert ds.to_table().column("id").to_pylist() == [1, 2, 3, 4]
    assert [v["version"] for v in ds.versions()] == [1, 2]
    assert session.size_bytes() == 0 and session.approx_num_items() == 0


_MANY_DATASETS = r"""
import gc, json, resource, sys, tracemalloc
import pyarrow as pa
import lance_format
from lance_format.session import Session

root, bound = sys.argv[1], 1 << 20
session = Session(metadata_cache_size_bytes=bound, index_cache_size_bytes=0)
uris = []
for i in range(2000):
    uri = f"{root}/d{i}.lance"
    lance_format.write_dataset(pa.table({"id": pa.array([i, i + 1], pa.int64()), "name": [f"n{i}", None]}), uri)
    uris.append(uri)


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def open_and_read(i: int) -> None:
    ds = lance_format.dataset(uris[i], session=session)
    assert ds.to_table(columns=["id"]).column("id").to_pylist() == [i, i + 1]
    assert ds.count_rows("id > 0") == (2 if i else 1)
    assert len(ds.versions()) == 1
    assert session.size_bytes() <= bound


gc.collect()
tracemalloc.start()
for i in range(200):
    open_and_read(i)
gc.collect()
traced_start, rss_start = tracemalloc.get_traced_memory()[0], rss()
for i in range(200, 2000):
    open_and_read(i)
gc.collect()
print(json.dumps({"traced": tracemalloc.get_traced_memory()[0] - traced_start, "rss": rss() - rss_start,
                  "size": session.size_bytes(), "held": session.metadata_cache.size_by_kind()}))
"""


@pytest.mark.slow
def test_two_thousand_datasets_stay_within_the_session_bound(tmp_path: Path) -> None:
    """A long-running process (Dagster code server, Spark executor) opening many datasets.

    Memory held after the first 200 datasets does not grow with the next 1,800: the session
    stays within its bound and nothing else keeps per-dataset state. It runs in a fresh process:
    inside the test run, RSS also moved with what earlier tests left behind (16.1 MiB once).
    """
    proc = subprocess.run([sys.executable, "-c", _MANY_DATASETS, str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    bound = 1 << 20
    assert got["size"] <= bound
    assert got["held"]["file_tail"] > 0  # the cache was in use throughout, only bounded
    # 1,800 more datasets: each holds ~10 KiB of tails, schemas and fragments while cached,
    # ~18 MiB without a bound; the session keeps that under its 1 MiB.
    assert got["traced"] < bound, got
    assert got["rss"] < 16 * bound, got  # RSS is coarse (allocator arenas); a sanity check
