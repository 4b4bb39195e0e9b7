"""Vectorized legacy reads (lance_format/file/legacy/gather.py): every piece of every field at once.

Takes and scans over many on-disk batches must give exactly what pylance reads, for the types read
in one gather (plain values, strings) and the ones still read batch by batch (booleans, lists,
structs, dictionaries) in the same request; damaged string positions must still be refused.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file.legacy.gather import vectorizable

ROWS = 5_000  # about five 1,024-row batches per file


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    words = ["", "a", "bb", None, "ccc" * 10]
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "u8": pa.array(rng.integers(0, 255, n, dtype=np.uint8)),
        "s": pa.array([words[i % 5] for i in range(n)], pa.string()),
        "ls": pa.array([None if i % 7 == 0 else str(i) * (i % 4) for i in range(n)], pa.large_string()),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
        "flag": pa.array([i % 3 == 0 for i in range(n)]),
        "lst": pa.array([[i] * (i % 3) for i in range(n)], pa.list_(pa.int32())),
        "st": pa.array([{"k": i, "v": str(i)} for i in range(n)]),
        "d": pa.array([["p", "q", "r"][i % 3] for i in range(n)]).dictionary_encode(),
    })


def test_only_plain_values_and_strings_are_gathered() -> None:
    """Which types take the vectorized path; the others stay on the per-batch reader."""
    t = _table(3)
    fast = {f.name for f in t.schema if vectorizable(f.type)}
    assert fast == {"id", "x", "u8", "s", "ls", "vec"}


def test_take_and_scan_match_pylance_on_many_batches(tmp_path: Path) -> None:
    """Random takes (unsorted, repeated, first/last rows of batches) and projections, as pylance."""
    uri = str(tmp_path / "ds")
    lance.write_dataset(_table(ROWS), uri, data_storage_version="legacy", max_rows_per_file=2_000)
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert len(ours.get_fragments()) == 3
    rng = np.random.default_rng(1)
    picks = [sorted(rng.choice(ROWS, 300, replace=False).tolist()),
             [ROWS - 1, 0, 1023, 1024, 2047, 2048, 17, 17, 4999]]
    for idx in picks:
        assert ours.take(idx).equals(theirs.take(idx))
    for cols in (["x", "s"], ["ls", "vec", "flag"], None):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols))


def test_file_reader_takes_in_requested_order(tmp_path: Path) -> None:
    """take_rows keeps the caller's order and repeats, across batches and both paths."""
    path = str(tmp_path / "f.lance")
    t = _table(ROWS).drop_columns(["d"])  # we do not write legacy dictionaries
    with LanceFileWriter(path, t.schema, version="legacy") as w:
        for batch in t.to_batches(max_chunksize=1024):
            w.write_batch(batch)
    reader = LanceFileReader(path)
    full = reader.read_all().to_table()  # pylance's file reader does not open legacy files
    assert full.column("x").equals(t.column("x")) and full.column("lst").equals(t.column("lst"))
    idx = [4_000, 3, 3, 1_024, 0, 4_999, 1_023]
    assert reader.take_rows(idx).to_table().equals(full.take(idx))
    assert reader.read_range(1_000, 2_100).to_table().equals(full.slice(1_000, 2_100))


def test_decreasing_string_positions_raise_corrupt_file_error(tmp_path: Path) -> None:
    """A string page whose positions go backwards is refused, naming the file, by scan and take."""
    path = tmp_path / "bad.lance"
    t = pa.table({"s": pa.array(["abc", "de", "f", "ghij"] * 8)})
    with LanceFileWriter(str(path), t.schema, version="legacy") as w:
        w.write_batch(t)
    data = bytearray(path.read_bytes())
    # the positions of the only page follow its 40 value bytes: swap the second and third
    pos_at = data.index(struct.pack("<q", 3))
    second, third = data[pos_at : pos_at + 8], data[pos_at + 8 : pos_at + 16]
    data[pos_at : pos_at + 8], data[pos_at + 8 : pos_at + 16] = third, second
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="bad.lance"):
        LanceFileReader(str(path)).read_all().to_table()
    with pytest.raises(CorruptFileError, match="bad.lance"):
        LanceFileReader(str(path)).take_rows([0, 1, 2]).to_table()


def test_invalid_utf8_in_a_string_page_raises_corrupt_file_error(tmp_path: Path) -> None:
    """Strings read in one gather are still checked for UTF-8 (by the file reader, once)."""
    path = tmp_path / "utf8.lance"
    t = pa.table({"s": pa.array(["okay", "zzzq", "fine"] * 500)})
    with LanceFileWriter(str(path), t.schema, version="legacy") as w:
        for batch in t.to_batches(max_chunksize=1024):
            w.write_batch(batch)
    path.write_bytes(path.read_bytes().replace(b"zzzq", b"z\xff\xfeq"))
    with pytest.raises(CorruptFileError, match="utf8.lance"):
        LanceFileReader(str(path)).read_all().to_table()
    with pytest.raises(CorruptFileError, match="utf8.lance"):
        LanceFileReader(str(path)).take_rows([1, 1_200]).to_table()
