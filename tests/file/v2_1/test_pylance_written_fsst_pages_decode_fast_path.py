"""pylance-written FSST text decodes through the pair table, as our own big pages do.

pylance 14.0.2 writes text pages of ~2.5M FSST codes, which a scan decodes in one piece per
thread; with large pages of one distribution the pages even share one symbol table. A rule on
one decode call's size never built the 65536-entry pair table for them, so pylance's files took
the one-code-at-a-time path (the ``text`` column cost 2.4x pylance's scan). The codes decoded with
a symbol table are now summed over calls; a table seen for few codes (compaction's small pages)
still builds none. Rows are compared with pylance's reader.
"""

from __future__ import annotations

from pathlib import Path

import lance
import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.v2_1 import chunkset, fsst

from .helpers import read_table


def _text_table(rows: int, seed: int) -> pa.Table:
    """Strings of 15-25 random lowercase letters, as ``benchmarks/bench_file.py`` builds them."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(15, 26, rows)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    letters = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
    text = pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(letters)])
    return pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "text": text})


class _Spy:
    """Counts the codes each FSST decode got and how many went through the pair table."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.decodes: list[tuple[bytes, int]] = []
        self.pair_codes = 0
        decode, pairs = fsst._decode, fsst._decode_pairs

        def spy_decode(table: fsst.SymbolTable, data: np.ndarray, offsets: np.ndarray,
                       use_pairs: bool = True) -> tuple[np.ndarray, np.ndarray]:
            self.decodes.append((table.symbols.tobytes(), len(data)))
            return decode(table, data, offsets, use_pairs)

        def spy_pairs(table: fsst.SymbolTable, codes: np.ndarray,
                      offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            self.pair_codes += len(codes)
            return pairs(table, codes, offsets)

        monkeypatch.setattr(fsst, "_decode", spy_decode)
        monkeypatch.setattr(fsst, "_decode_pairs", spy_pairs)


@pytest.fixture(autouse=True)
def _fresh_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsst, "_USES", {})
    monkeypatch.setattr(fsst, "_PAIR_CACHE", fsst.LruCache(fsst.PAIR_CACHE_BYTES))
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "1")


def test_thread_pieces_of_pylance_pages_take_the_pair_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _text_table(20_000, seed=5)
    path = str(tmp_path / "text.lance")
    writer = lf.LanceFileWriter(path, table.schema, version="2.2", data_cache_bytes=64 * 1024)
    for batch in table.to_batches(max_chunksize=5_000):
        writer.write_batch(batch)
    writer.close()
    spy = _Spy(monkeypatch)
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    monkeypatch.setattr(chunkset, "_FSST_SPLIT_MIN_BYTES", 1024)
    # scaled to this file: one thread's piece is below, a page's two pieces together reach it
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 60_000)
    monkeypatch.setattr(fsst, "_PAIR_REUSE_MIN_CODES", 1_000)

    got = read_table(path)
    want = lf.LanceFileReader(path).read_all().to_table()
    assert got.equals(want) and got.equals(table)
    pieces = [n for _, n in spy.decodes]
    assert len(pieces) >= 6 and max(pieces) < fsst._PAIR_MIN_CODES < min(pieces) * 2
    assert 0 < spy.pair_codes < sum(pieces)  # each page's first piece counts, the second uses it

    spy.pair_codes = 0
    spy.decodes.clear()
    assert read_table(path).equals(want)  # read again: every piece uses its page's built table
    assert spy.pair_codes == sum(n for _, n in spy.decodes)


def test_pages_with_one_symbol_table_add_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages that come with the same table (fresh objects, as each page parses its own) add up."""
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 150_000)
    monkeypatch.setattr(fsst, "_PAIR_REUSE_MIN_CODES", 1_000)
    raw, codes, offsets = _raw_table_and_codes(seed=8, n_codes=70_000)
    want = fsst._decode(fsst.SymbolTable(raw), codes, offsets, False)
    built = []
    for _ in range(4):
        table = fsst.SymbolTable(raw)
        got = fsst._decode(table, codes, offsets)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        built.append(table.has_pairs(False))
    assert built == [False, False, True, True]  # 210k codes reach 150k on the third page


def test_dataset_scan_equals_pylance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _text_table(30_000, seed=6)
    uri = str(tmp_path / "ds.lance")
    lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=12_000)
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 200_000)
    monkeypatch.setattr(fsst, "_PAIR_REUSE_MIN_CODES", 1_000)
    want = lance.dataset(uri).to_table()
    ours = lance_format.dataset(uri)
    for _ in range(2):
        assert ours.to_table().equals(want)
        assert ours.to_table(columns=["text"]).equals(want.select(["text"]))
    assert spy.pair_codes > 0
    rows = np.array([0, 7, 11_999, 12_000, 29_999])
    assert ours.take(rows).equals(want.take(rows))


def _raw_table_and_codes(seed: int, n_codes: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 200
    head = ((0x46535354 << 32) | (1 << 24) | n).to_bytes(8, "little")
    lens = rng.integers(1, 9, n).astype(np.uint8)
    raw = head + rng.integers(0, 255, (n, 8), dtype=np.uint8).tobytes() + lens.tobytes()
    codes = rng.integers(0, n, n_codes).astype(np.uint8)  # escape-free
    cuts = np.sort(rng.choice(np.arange(1, n_codes), n_codes // 20, replace=False))
    return raw, codes, np.concatenate([[0], cuts, [n_codes]]).astype(np.int64)


def test_a_table_seen_for_few_codes_builds_no_pair_table() -> None:
    raw, codes, offsets = _raw_table_and_codes(seed=9, n_codes=70_000)
    want = fsst._decode(fsst.SymbolTable(raw), codes, offsets, False)
    for _ in range(3):  # 210k codes in all, below the real threshold: never worth a build
        table = fsst.SymbolTable(raw)
        got = fsst._decode(table, codes, offsets)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert not table.has_pairs(False)
