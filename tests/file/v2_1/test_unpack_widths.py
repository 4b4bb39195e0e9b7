"""Bit unpacking: every width 1..t of every path equals a plain reading of the FastLanes layout,
and pylance-written 2.2 pages of every width read back equal to pylance."""

from __future__ import annotations

import os

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.v2_1 import bitpack


def _reference_unpack(packed: np.ndarray, width: int, t: int) -> np.ndarray:
    """The layout read literally: lane ``l``'s words (``packed[w * lanes + l]``) form one
    LSB-first bit stream holding its ``t`` values; value ``r`` goes to logical position
    ``FL_ORDER[r // 8] * 16 + (r % 8) * 128 + l``."""
    lanes = 1024 // t
    per_block = 1024 * width // t
    n = len(packed) // per_block if per_block else 0
    out = np.zeros(n * 1024, np.uint64)
    order = [0, 4, 2, 6, 1, 5, 3, 7]
    for b in range(n):
        words = packed[b * per_block : (b + 1) * per_block].reshape(width, lanes)
        for lane in range(lanes):
            bits = np.unpackbits(words[:, lane].astype(f"<u{t // 8}").view(np.uint8), bitorder="little")
            vals = bits.reshape(t, width).astype(np.uint64) << np.arange(width, dtype=np.uint64)
            pos = np.array([order[r // 8] * 16 + (r % 8) * 128 + lane for r in range(t)])
            out[b * 1024 + pos] = vals.sum(axis=1, dtype=np.uint64)
    return out.astype(bitpack.uint_dtype(t))


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_every_width_and_path_matches_the_layout(t: int) -> None:
    rng = np.random.default_rng(t)
    for width in range(1, t + 1):
        words = rng.integers(0, 2**63, 2 * 1024 * width // t, dtype=np.uint64).astype(bitpack.uint_dtype(t))
        want = _reference_unpack(words, width, t)
        assert (bitpack.unpack_blocks(words, width, t) == want).all(), width
        # the three ways of unpacking, whatever the block count would choose
        for unpack in (bitpack._unpack_groups, bitpack._unpack_rows_first):
            got = np.empty(2048, bitpack.uint_dtype(t))
            unpack(words, 2, width, t, got)
            assert (got == want).all(), (unpack.__name__, width)
        if width < t:
            assert (bitpack._unpack_gather(words, 2, width, t) == want).all(), width
            assert (bitpack._unpack_gather(words[: len(words) // 2], 1, width, t) == want[:1024]).all()


@pytest.mark.parametrize("t", [16, 32, 64])
@pytest.mark.parametrize("nblocks", [3, 17, 40, 70])
def test_page_sized_runs_round_trip(t: int, nblocks: int) -> None:
    # block counts on each side of the gather / group / row-first thresholds, into `out` too
    rng = np.random.default_rng(nblocks)
    for width in sorted({1, 3, 7, 8, 9, t // 2, t // 2 + 1, t - 1, t}):
        vals = (rng.integers(0, 2**63, nblocks * 1024, dtype=np.uint64) >> np.uint64(64 - width)).astype(
            bitpack.uint_dtype(t)
        )
        packed = bitpack.pack_blocks(vals, width, t)
        assert (bitpack.unpack_blocks(packed, width, t) == vals).all(), width
        out = np.empty(nblocks * 1024, bitpack.uint_dtype(t))
        assert bitpack.unpack_blocks(packed, width, t, out=out) is out
        assert (out == vals).all(), width


def _width_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    cols: dict[str, pa.Array] = {}
    for width in range(1, 65):
        v = rng.integers(0, 2**63, rows, dtype=np.uint64) >> np.uint64(64 - width)
        v[::997] = np.uint64((1 << width) - 1)  # every chunk-sized stretch reaches the full width
        cols[f"u{width}"] = pa.array(v, pa.uint64())
    for bits in (8, 16, 32):
        for width in sorted({1, 5, bits // 2 + 1, bits - 1, bits}):
            v = rng.integers(0, 1 << width, rows, dtype=np.uint64).astype(f"u{bits // 8}")
            cols[f"u{bits}_{width}"] = pa.array(v)
    nulls = rng.random(rows) < 0.1
    cols["i32_nulls"] = pa.array(rng.integers(-(2**20), 2**20, rows, dtype=np.int32), mask=nulls)
    cols["i64_nulls"] = pa.array(rng.integers(0, 2**40, rows, dtype=np.int64), mask=nulls)
    cols["i16_neg"] = pa.array(rng.integers(-300, 300, rows, dtype=np.int16))
    return pa.table(cols)


@pytest.mark.parametrize("rows", [
    70 * 1024 + 123,  # pages of more than 64 bit-packed chunks (row-first unpacking), a partial last chunk
    3 * 1024 + 5,  # a few chunks per page (the gather path)
])
def test_pylance_pages_of_every_width_read_equal(tmp_path: str, rows: int) -> None:
    table = _width_table(rows)
    path = os.path.join(str(tmp_path), "widths")
    lance.write_dataset(table, path, data_storage_version="2.2")
    ours = lance_format.dataset(path).to_table()
    theirs = lance.dataset(path).to_table()
    assert ours.schema == theirs.schema
    for name in theirs.column_names:
        assert ours.column(name).equals(theirs.column(name)), name
    assert ours.column("u64").equals(table.column("u64"))
    # a slice starting inside a chunk
    mine = lance_format.dataset(path).to_table(offset=1500, limit=1100)
    for name in theirs.column_names:
        assert mine.column(name).equals(theirs.column(name).slice(1500, 1100)), name


def test_pylance_long_64bit_pages_read_equal(tmp_path: str) -> None:
    # few columns: pages of ~100 chunks of 64-bit values (row-first unpacking of every kind of
    # narrow word: 8, 16, 32 and 64 bits), nulls, a partial last chunk
    rows = 100 * 1024 + 77
    rng = np.random.default_rng(3)
    cols = {}
    for width in (5, 12, 20, 31, 40, 63):
        v = rng.integers(0, 2**63, rows, dtype=np.uint64) >> np.uint64(64 - width)
        cols[f"u{width}"] = pa.array(v, pa.uint64())
    cols["i64_nulls"] = pa.array(rng.integers(0, 2**33, rows, dtype=np.int64), mask=rng.random(rows) < 0.05)
    path = os.path.join(str(tmp_path), "long")
    lance.write_dataset(pa.table(cols), path, data_storage_version="2.2")
    ours = lance_format.dataset(path).to_table()
    theirs = lance.dataset(path).to_table()
    for name in theirs.column_names:
        assert ours.column(name).equals(theirs.column(name)), name
