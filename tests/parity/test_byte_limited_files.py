"""``max_bytes_per_file`` ends data files where pylance 14.0.2 ends them: it counts what the file
writer has written (a 2.x writer writes a column's pages once it has buffered 8 MiB, or
``data_cache_bytes`` shared by the columns; a legacy writer writes each row group), checked after
each input batch, in ``write_dataset`` and in compaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import lance.fragment
import numpy as np
import pyarrow as pa
import pytest

import lance_format
import lance_format.fragment

LIBS = {"pylance": lance, "ours": lance_format}


def _batches(count: int, rows: int, strings: bool) -> Iterator[pa.RecordBatch]:
    for i in range(count):
        rng = np.random.default_rng(i)
        cols: dict[str, Any] = {"id": np.arange(i * rows, (i + 1) * rows), "x": rng.random(rows)}
        if strings:
            cols["s"] = pa.array(np.char.add("k", rng.integers(0, 10**6, rows).astype(str)))
        yield pa.record_batch(cols)


def _rows_per_file(lib: Any, uri: str, **kwargs: Any) -> list[int]:
    strings = kwargs.pop("strings")
    schema = next(_batches(1, 1, strings)).schema
    reader = pa.RecordBatchReader.from_batches(schema, _batches(60, 1000, strings))
    ds = lib.write_dataset(reader, uri, max_rows_per_file=25_000, data_cache_bytes=300_000, **kwargs)
    return [f.metadata.physical_rows for f in ds.get_fragments()]


# 2.1+ compresses strings: pylance's written bytes are then smaller than the Arrow size we count
# for a flushed column, so only limits below a page's size (or fixed-width data) are compared there.
CASES = [("legacy", 1, True), ("legacy", 100_000, True), ("legacy", 400_000, True),
         ("2.0", 1, True), ("2.0", 100_000, True), ("2.0", 400_000, True),
         ("2.1", 1, True), ("2.1", 100_000, False), ("2.1", 400_000, False),
         ("2.2", 1, True), ("2.2", 100_000, False)]


@pytest.mark.parametrize(("version", "limit", "strings"), CASES)
def test_write_dataset_ends_files_where_pylance_does(tmp_path: Path, version: str, limit: int, strings: bool) -> None:
    got = {name: _rows_per_file(lib, str(tmp_path / name), max_bytes_per_file=limit, strings=strings,
                                data_storage_version=version)
           for name, lib in LIBS.items()}
    assert got["ours"] == got["pylance"]
    assert len(got["ours"]) > 1 and sum(got["ours"]) == 60_000


def test_a_small_write_is_one_file_whatever_the_limit(tmp_path: Path) -> None:
    """Nothing is written before the file is finished (no column filled its page cache)."""
    batches = [pa.record_batch({"id": np.arange(i, i + 1000), "s": pa.array([f"v{j}" for j in range(i, i + 1000)])})
               for i in range(0, 50_000, 1000)]
    for name, lib in LIBS.items():
        ds = lib.write_dataset(pa.RecordBatchReader.from_batches(batches[0].schema, batches), str(tmp_path / name),
                               max_bytes_per_file=10_000)
        assert [f.metadata.physical_rows for f in ds.get_fragments()] == [50_000], name


def test_slices_of_one_table_weigh_up_to_their_end(tmp_path: Path) -> None:
    """Batches sliced from one table cross into pylance as their buffers from the table's start, so
    its page caches fill sooner than the rows' own size says (here after 42 of 50 slices)."""
    table = pa.table({"id": np.arange(50_000), "s": pa.array([f"v{i}" for i in range(50_000)])})
    got = {}
    for name, lib in LIBS.items():
        reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1000))
        ds = lib.write_dataset(reader, str(tmp_path / name), max_bytes_per_file=10_000)
        got[name] = [f.metadata.physical_rows for f in ds.get_fragments()]
    assert got["ours"] == got["pylance"] == [42_000, 8_000]


@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_compaction_ends_files_where_pylance_does(tmp_path: Path, version: str) -> None:
    """2.2M int64 rows: a column's 8 MiB page cache fills every ~1M rows, and a file ends there."""
    table = pa.table({"id": pa.array(np.arange(2_200_000), pa.int64())})
    got = {}
    for name, lib in LIBS.items():
        uri = str(tmp_path / name)
        lib.write_dataset(table, uri, max_rows_per_file=200_000, data_storage_version=version)
        metrics = lib.dataset(uri).optimize.compact_files(max_bytes_per_file=1_000_000,
                                                          target_rows_per_fragment=4_000_000)
        got[name] = ([f.metadata.physical_rows for f in lib.dataset(uri).get_fragments()],
                     metrics.fragments_removed, metrics.fragments_added)
    assert got["ours"] == got["pylance"]
    assert len(got["ours"][0]) == 3


def test_write_fragments_ends_files_where_pylance_does(tmp_path: Path) -> None:
    got = {}
    for name, lib in LIBS.items():
        schema = next(_batches(1, 1, True)).schema
        reader = pa.RecordBatchReader.from_batches(schema, _batches(60, 1000, True))
        writer = lance.fragment.write_fragments if lib is lance else lance_format.fragment.write_fragments
        frags = writer(reader, str(tmp_path / name), max_bytes_per_file=1, data_cache_bytes=300_000,
                       max_rows_per_file=25_000, mode="create")
        got[name] = [f.physical_rows for f in frags]
    assert got["ours"] == got["pylance"] and len(got["ours"]) > 1
