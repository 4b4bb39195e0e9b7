"""Equivalence tests for the vectorized fast paths of the 2.1/2.2 reader (PERF21).

Each fast path is compared against a simple reference (a per-value loop here in the test, or
the generic per-chunk decoder) on random data, including the awkward cases: FSST escapes and
odd code counts, ragged mini-block chunks, out-of-order or overlapping ranges.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError
from lance_format.file.container import ByteSource
from lance_format.file.v2_1 import bitpack, fsst
from lance_format.file.v2_1.blocks import Chunk, ChunkSet, gather_ranges
from lance_format.file.v2_1.chunkset import _variable_chunkset
from lance_format.file.v2_1.compression import variable_chunks
from lance_format.storage import open_store

from .helpers import open_decoder, write_file

# ---------------------------------------------------------------------------------- FSST


def _random_table(rng: np.random.Generator, n: int) -> tuple[fsst.SymbolTable, list[bytes]]:
    lens = rng.integers(1, 9, n)
    symbols = [bytes(rng.integers(0, 256, int(k)).astype(np.uint8)) for k in lens]
    raw = bytearray(((0x46535354 << 32) | (1 << 24) | n).to_bytes(8, "little"))
    for s in symbols:
        raw += s.ljust(8, b"\0")
    raw += bytes(int(k) for k in lens)
    return fsst.SymbolTable(bytes(raw)), symbols


def _reference_decode(symbols: list[bytes], data: np.ndarray, offsets: np.ndarray) -> tuple[bytes, list[int]]:
    """Per-code loop straight from the format description (test-only)."""
    out = bytearray()
    starts = set(offsets.tolist())
    positions = {}
    i = 0
    b = data.tolist()
    while i < len(b):
        if i in starts:
            positions[i] = len(out)
        if b[i] == 255:
            out.append(b[i + 1])
            i += 2
        else:
            out += symbols[b[i]]
            i += 1
    positions[len(b)] = len(out)
    return bytes(out), [positions[int(o)] for o in offsets]


def _random_codes(
    rng: np.random.Generator, n_sym: int, n_tokens: int, escapes: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Codes of ``n_tokens`` tokens (symbols, or escape + literal byte) and the tokens' starts."""
    is_esc = rng.random(n_tokens) < (0.1 if escapes else 0.0)
    widths = np.where(is_esc, 2, 1)
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    codes = np.empty(int(starts[-1]), np.uint8)
    codes[starts[:-1]] = np.where(is_esc, 255, rng.integers(0, n_sym, n_tokens))
    codes[starts[:-1][is_esc] + 1] = rng.integers(0, 256, int(is_esc.sum()))  # literals, 255 too
    return codes, starts


def _string_offsets(rng: np.random.Generator, token_starts: np.ndarray) -> np.ndarray:
    """String boundaries at random token starts (never between an escape and its literal)."""
    inner = token_starts[1:-1]
    cuts = rng.choice(inner, size=min(len(inner), len(inner) // 7 + 1), replace=False) if len(inner) else []
    return np.unique(np.concatenate([[0, token_starts[-1]], cuts])).astype(np.int64)


@pytest.mark.parametrize("escapes", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 4097, 4098])
def test_fsst_pair_decode_matches_reference(monkeypatch: pytest.MonkeyPatch, escapes: bool, n: int) -> None:
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 1)
    rng = np.random.default_rng(n * 2 + escapes)
    for n_sym in (1, 7, 255):
        table, symbols = _random_table(rng, n_sym)
        codes, tokens = _random_codes(rng, n_sym, n, escapes)
        offsets = _string_offsets(rng, tokens)
        want_data, want_offs = _reference_decode(symbols, codes, offsets)
        for pairs in (False, True):
            data, offs = fsst._decode(table, codes, offsets, pairs)
            assert bytes(data) == want_data
            assert offs.tolist() == want_offs
        data, offs = fsst.decode(table, codes, offsets)
        assert bytes(data) == want_data and offs.tolist() == want_offs


def test_fsst_pair_path_large_page_and_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page big enough for the pair table and the threaded split (escape-free and with escapes)."""
    monkeypatch.setattr(fsst, "_PARALLEL_MIN_BYTES", 1 << 16)
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 1 << 16)
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    rng = np.random.default_rng(7)
    table, symbols = _random_table(rng, 200)
    for escapes in (False, True):
        codes, tokens = _random_codes(rng, 200, 150_001, escapes)
        offsets = _string_offsets(rng, tokens)
        slow = fsst._decode(table, codes, offsets, False)
        for data, offs in (fsst._decode(table, codes, offsets), fsst.decode(table, codes, offsets)):
            assert np.array_equal(data, slow[0]) and np.array_equal(offs, slow[1])


def test_fsst_pairs_table_entries() -> None:
    table, symbols = _random_table(np.random.default_rng(3), 255)
    pairs = table.pairs(False)
    assert len(pairs) == 65536
    for lo, hi in ((0, 0), (3, 200), (254, 1), (17, 254)):
        assert pairs[lo | hi << 8].as_py() == symbols[lo] + symbols[hi]
    assert table.pairs(True).type == pa.large_binary()
    twin = fsst.SymbolTable(bytes(table_raw(table)))
    assert twin.pairs(False) is pairs  # shared through the module cache


def table_raw(table: fsst.SymbolTable) -> bytes:
    """Re-serialize a parsed table (test-only)."""
    n = table.n
    head = ((0x46535354 << 32) | (1 << 24) | n).to_bytes(8, "little")
    return head + table.symbols[:n].tobytes() + table.lens[:n].tobytes()


def test_fsst_pair_path_rejects_unknown_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 1)
    table, _ = _random_table(np.random.default_rng(4), 5)
    codes = np.array([0, 1, 9, 2], np.uint8)
    with pytest.raises(CorruptFileError):
        fsst._decode(table, codes, np.array([0, 4], np.int64))


# ------------------------------------------------------------------------ gather / bits


def test_gather_ranges_matches_concatenate() -> None:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, 10_000).astype(np.uint8)
    lengths = rng.integers(0, 50, 200)
    gaps = rng.integers(0, 4, 200)
    starts = np.cumsum(gaps + np.concatenate([[0], lengths[:-1]]))
    want = np.concatenate([data[s : s + n] for s, n in zip(starts, lengths, strict=True)])
    assert np.array_equal(gather_ranges(data, starts, lengths), want)
    # overlapping / descending ranges and a strided source take the fallback
    st2 = starts[::-1].copy()
    want2 = np.concatenate([data[s : s + n] for s, n in zip(st2, lengths, strict=True)])
    assert np.array_equal(gather_ranges(data, st2, lengths), want2)
    strided = data[::2]
    assert np.array_equal(
        gather_ranges(strided, np.array([1, 5]), np.array([3, 2])), strided[[1, 2, 3, 5, 6]]
    )
    assert len(gather_ranges(data, np.zeros(0, np.int64), np.zeros(0, np.int64))) == 0
    assert len(gather_ranges(data, np.array([5, 9]), np.array([0, 0]))) == 0


def _unpack_reference(packed: np.ndarray, width: int, t: int) -> np.ndarray:
    """Value-at-a-time FastLanes unpacking from the layout formula (test-only)."""
    lanes = 1024 // t
    out = np.zeros(1024 * (len(packed) * t // (1024 * width) if width else 0), np.uint64)
    words = packed.astype(np.uint64).tolist()
    per_block = 1024 * width // t
    for blk in range(len(out) // 1024):
        base = blk * per_block
        for lane in range(lanes):
            for r in range(t):
                bit = r * width
                v = 0
                for k in range(width):
                    w, s = divmod(bit + k, t)
                    v |= ((words[base + w * lanes + lane] >> s) & 1) << k
                idx = int(bitpack.FL_ORDER[r // 8]) * 16 + (r % 8) * 128 + lane
                out[blk * 1024 + idx] = v
    return out


@pytest.mark.parametrize(("t", "width"), [(8, 3), (16, 16), (32, 7), (32, 31), (64, 1), (64, 62)])
def test_unpack_blocks_matches_reference(t: int, width: int) -> None:
    dtype = bitpack.uint_dtype(t)
    rng = np.random.default_rng(t * 100 + width)
    packed = rng.integers(0, 1 << 62, 1024 * width // t, dtype=np.uint64).astype(dtype)
    got = bitpack.unpack_blocks(packed, width, t)
    assert np.array_equal(got.astype(np.uint64), _unpack_reference(packed, width, t))


# ----------------------------------------------------------------- variable chunk sets


def _variable_chunkset_of(rng: np.random.Generator, counts: list[int]) -> ChunkSet:
    bufs = []
    for c in counts:
        lens = rng.integers(0, 9, c)
        head = (c + 1) * 4
        offs = head + np.concatenate([[0], np.cumsum(lens)])
        body = rng.integers(0, 256, int(lens.sum())).astype(np.uint8)
        buf = np.concatenate([offs.astype(np.uint32).view(np.uint8), body])
        pad = (-len(buf)) % 8
        bufs.append(np.concatenate([buf, np.full(pad, 0x48, np.uint8)]))
    sizes = np.array([len(b) for b in bufs], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return ChunkSet(np.concatenate(bufs), [starts], [sizes], np.array(counts, np.int64))


@pytest.mark.parametrize("counts", [[5, 5, 5, 2], [64, 128, 64, 1], [0, 3, 0], [7], [1, 40, 2, 40, 0]])
def test_variable_chunkset_matches_generic(counts: list[int]) -> None:
    cs = _variable_chunkset_of(np.random.default_rng(sum(counts)), counts)
    fast = _variable_chunkset(cs, 32)
    slow = variable_chunks(cs.chunks(), 32)
    assert np.array_equal(fast.offsets, slow.offsets)
    assert np.array_equal(fast.data, slow.data)


def test_variable_chunkset_rejects_descending_offsets() -> None:
    cs = _variable_chunkset_of(np.random.default_rng(1), [6, 6, 6])
    data = cs.data.copy()
    words = data[int(cs.starts[0][1]) :].view(np.uint32)
    words[2], words[3] = words[3] + 1, words[2]  # second chunk: offsets 2 and 3 out of order
    bad = ChunkSet(data, cs.starts, cs.sizes, cs.counts)
    with pytest.raises(CorruptFileError):
        _variable_chunkset(bad, 32)
    with pytest.raises(CorruptFileError):
        variable_chunks(bad.chunks(), 32)
    assert isinstance(bad.chunks()[0], Chunk)


# ------------------------------------------------------------------------------ reading


def test_read_ranges_matches_byte_source(tmp_path: Path) -> None:
    blob = np.random.default_rng(2).integers(0, 256, 300_000).astype(np.uint8).tobytes()
    (tmp_path / "f.bin").write_bytes(blob)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    source.prefetch_tail(1000)
    ranges = [(10, 100), (50, 10), (200_000, 5000), (299_500, 500), (5000, 0), (120, 4000)]
    got = source.read_arrays(ranges, "page buffer")
    assert [bytes(g) for g in got] == [blob[s : s + n] for s, n in ranges]
    assert all(not g.flags.writeable for g in got)
    with pytest.raises(CorruptFileError):
        source.read_arrays([(299_999, 2)], "page buffer")
    source.close()


def test_scan_in_chunks_across_pages(tmp_path: Path) -> None:
    """Sequential ranges (whole-page decoding) and small ranges (partial decoding) agree."""
    n = 50_000
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "i": pa.array(np.arange(n, dtype=np.int64)),
            "s": pa.array([f"v{k % 977}-{k}" for k in range(n)]),
            "f": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4).astype(np.float32)), 4),
        }
    )
    path = os.path.join(tmp_path, "pages.lance")
    # pages are cut per written batch: several batches give several pages per column
    write_file(path, pa.Table.from_batches(table.to_batches(max_chunksize=6000)), max_page_bytes=64 * 1024)
    for step in (100, 997, 7000, 20_000):
        dec = open_decoder(path)
        assert any(len(leaf.column.pages) > 2 for leaves in dec._leaves for leaf in leaves)
        batches = [dec.read_range(s, min(n, s + step)) for s in range(0, n, step)]
        assert pa.Table.from_batches(batches).equals(table)
    dec = open_decoder(path)
    for s in (123, 40_000, 9_000):  # out-of-order small reads use the partial path
        assert pa.Table.from_batches([dec.read_range(s, s + 100)]).equals(table.slice(s, 100))


# ------------------------------------------------------------------------------ writing


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("nb", [1, 2, 3])
def test_serialize_flat_matches_general(large: bool, nb: int) -> None:
    from lance_format._pb import encodings_v2_1_pb2 as pb
    from lance_format.file.v2_1.miniblock import ValueChunks, _serialize_flat, _serialize_general

    rng = np.random.default_rng(nb + 10 * large)
    counts = [256] * 40 + [17]
    buffers = [
        [bytes(rng.integers(0, 256, int(rng.integers(0, 300))).astype(np.uint8)) for _ in range(nb)]
        for _ in counts
    ]
    buffers[3][0] = b""  # empty buffers are framed too
    values = ValueChunks(counts, buffers, pb.CompressiveEncoding())
    fast = _serialize_flat(values, large)
    assert fast is not None
    meta, data, rep_enc, def_enc, rep_idx = _serialize_general(values, None, None, None, large, 0)
    assert fast[0] == meta
    assert fast[1].to_pybytes() == data
    assert rep_enc is None and def_enc is None and rep_idx is None
    ragged = ValueChunks([4, 4], [[b"ab"], [b"c", b"d"]], pb.CompressiveEncoding())
    assert _serialize_flat(ragged, large) is None


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_fsst_page_split_across_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: str
) -> None:
    """FSST pages (written by pylance) decoded whole, split by chunks, and with the pair table."""
    import lance.file as lf

    from lance_format.file.v2_1 import chunkset

    monkeypatch.setattr(chunkset, "_FSST_SPLIT_MIN_BYTES", 1024)
    monkeypatch.setattr(fsst, "_PAIR_MIN_CODES", 64)
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", threads)
    n = 40_000
    rng = np.random.default_rng(11)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", np.uint8)
    lens = rng.integers(0, 30, n)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    text = letters[rng.integers(0, len(letters), int(offsets[-1]))]
    table = pa.table(
        {"t": pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])}
    )
    path = str(tmp_path / "fsst.lance")
    w = lf.LanceFileWriter(path, table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    dec = open_decoder(path)
    assert pa.Table.from_batches([dec.read_range(0, n)]).equals(table)
    idx = np.sort(rng.choice(n, 500, replace=False))
    assert pa.Table.from_batches([open_decoder(path).take(idx)]).equals(table.take(idx))


@pytest.mark.parametrize("t", [8, 16, 32, 64])
@pytest.mark.parametrize("pattern", ["one", "runs", "mixed", "zeros"])
def test_inline_bitpacked_chunkset_width_groups(t: int, pattern: str) -> None:
    from lance_format.file.v2_1.chunkset import _inline_bitpacked_chunkset

    rng = np.random.default_rng(t)
    dtype = bitpack.uint_dtype(t)
    n_chunks = 9
    widths = {
        "one": [t - 1] * n_chunks,
        "runs": sorted(rng.integers(1, t + 1, n_chunks).tolist()),
        "mixed": rng.integers(0, t + 1, n_chunks).tolist(),
        "zeros": [0, 3, 0, 0, 5, 5, 0, 1, 0],
    }[pattern]
    counts = [1024] * (n_chunks - 1) + [700]
    values, bufs = [], []
    for wd, c in zip(widths, counts, strict=True):
        v = (
            rng.integers(0, 1 << min(wd, 62), 1024, dtype=np.uint64).astype(dtype)
            if wd
            else np.zeros(1024, dtype)
        )
        packed = bitpack.pack_blocks(v, wd, t) if wd else np.zeros(0, dtype)
        bufs.append(np.concatenate([np.array([wd], dtype).view(np.uint8), packed.view(np.uint8)]))
        values.append(v[:c])
    sizes = np.array([len(b) for b in bufs], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    cs = ChunkSet(np.concatenate(bufs), [starts], [sizes], np.array(counts, np.int64))
    got = _inline_bitpacked_chunkset(cs, t)
    assert got.n == sum(counts)
    assert np.array_equal(got.data.view(dtype), np.concatenate(values))
