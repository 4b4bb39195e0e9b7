"""Decoding with large temporaries in Arrow's pool (not fresh numpy arrays) gives what pylance
reads: strings (FSST and plain), nulls, pages of several MiB, full reads, ranges and takes."""

from __future__ import annotations

from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from lance_format.arrays import pool_empty
from lance_format.file.v2_1 import fsst
from lance_format.file.v2_1.blocks import Var, pool_take, range_index, take_var

from .helpers import read_table, take_table

_ROWS = 200_000


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(26)
    words = np.array(["lance", "dagster", "arrow", "numpy", "page", "fault", "huge", "pool", "\xff\xfe"])
    picks = words[rng.integers(0, len(words), (rows, 3))]
    # distinct values (a number in each) so pylance compresses with FSST, not a dictionary
    num = rng.integers(0, 10**9, rows).astype(str)
    text = np.char.add(np.char.add(np.char.add(picks[:, 0], num), picks[:, 1]), picks[:, 2])
    nulls = rng.random(rows) < 0.1
    rand = [rng.bytes(int(k)) for k in rng.integers(0, 40, 2000)]  # incompressible, empty ones too
    return pa.table({
        "text": pa.array(text.tolist(), mask=nulls),
        "cat": pa.array([f"category_{i % 100:03d}" for i in range(rows)]),
        "blob": pa.array(rand * (rows // len(rand)), pa.binary()),
        "id": pa.array(np.arange(rows, dtype=np.int64)),
    })


def _pylance_file(tmp_path: Path, version: str) -> tuple[str, pa.Table]:
    table = _table(_ROWS)
    path = str(tmp_path / f"f{version}.lance")
    with lf.LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    return path, table


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_full_read_and_take_equal_pylance(tmp_path: Path, version: str) -> None:
    path, table = _pylance_file(tmp_path, version)
    assert read_table(path).equals(table)
    ref = lf.LanceFileReader(path)
    idx = np.random.default_rng(1).choice(_ROWS, 300, replace=False)  # sparse: values out of chunks
    asc = np.sort(idx)
    assert take_table(path, asc).equals(ref.take_rows(asc.tolist()).to_table())  # pylance: ascending only
    assert take_table(path, idx).equals(table.take(pa.array(idx)))


def test_range_index_matches_repeat() -> None:
    rng = np.random.default_rng(3)
    starts = rng.integers(0, 1000, 500).astype(np.int64)
    lens = rng.integers(0, 5, 500).astype(np.int64)  # zero lengths (empty strings) included
    lens[:3] = 0
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    want = np.repeat(starts - offsets[:-1], lens) + np.arange(int(offsets[-1]))
    assert np.array_equal(range_index(starts, lens, offsets), want)
    none = np.zeros(4, np.int64)
    assert len(range_index(none[:3], none[:3], none)) == 0


def test_pool_take_casts_and_checks_bounds() -> None:
    a = np.arange(10, dtype=np.int32) * 3
    idx = np.array([9, 0, 4])
    got = pool_take(a, idx, np.int64)
    assert got.dtype == np.int64 and got.tolist() == [27, 0, 12]
    assert pool_take(a, idx[:0]).dtype == np.int32
    with pytest.raises(IndexError):
        pool_take(a, np.array([10]))
    assert pool_empty(0, np.int64).shape == (0,)


def test_take_var_equals_fancy_indexing() -> None:
    data = np.frombuffer(b"abcdefghij", np.uint8)
    block = Var(np.array([0, 3, 3, 7, 10], np.int64), data)
    got = take_var(block, np.array([3, 1, 0, 2, 0]))
    assert got.offsets.tolist() == [0, 3, 3, 6, 10, 13]
    assert got.data.tobytes() == b"hijabcdefgabc"


def test_pair_decode_equals_single_code_decode() -> None:
    syms = [b"ab", b"cde", b"f", b"ghijklmn"]
    header = (0x46535354 << 32) | (1 << 24) | len(syms)
    raw = header.to_bytes(8, "little") + b"".join(s.ljust(8, b"\0") for s in syms) + bytes(map(len, syms))
    table = fsst.SymbolTable(raw)
    rng = np.random.default_rng(5)
    codes = rng.integers(0, len(syms), 10_001).astype(np.uint8)  # odd: the last code decodes alone
    cuts = rng.integers(0, len(codes), 800)
    offsets = np.unique(np.concatenate([[0, len(codes)], cuts])).astype(np.int64)
    out1, offs1 = fsst._decode(table, codes, offsets, pairs=False)
    out2, offs2 = fsst._decode_pairs(table, codes, offsets)
    assert out1.tobytes() == out2.tobytes()
    assert np.array_equal(offs1, offs2)
