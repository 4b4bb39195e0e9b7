"""Range reads of list columns equal pylance's, wherever the range starts and ends.

A range that covers part of a list page is decoded from just the chunks holding its rows (the
page's repetition index says which), so ranges starting and ending inside chunks, inside pages
and across page boundaries are compared with pylance's ``LanceFileReader.read_range`` on files
pylance wrote: HNSW-graph-like ``list<uint32>`` rows, ``list<int64>`` with null and empty lists,
null items, lists longer than a chunk, strings, large lists, and nested types that keep the
whole-page path. The batched level decoders are checked against the per-chunk ones.
"""

from __future__ import annotations

import lance.file
import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.file.reader import LanceFileReader
from lance_format.file.v2_1 import bitpack, decoder, layout, levels, listrange
from lance_format.file.v2_1 import compression as comp

ROWS = 40_000


def _lists(lens: np.ndarray, values: pa.Array, null: np.ndarray | None = None,
           large: bool = False) -> pa.Array:
    offsets = np.zeros(len(lens) + 1, np.int64 if large else np.int32)
    np.cumsum(lens, out=offsets[1:])
    mask = None if null is None else pa.array(null)
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(pa.array(offsets), values, mask=mask)


def _table(rng: np.random.Generator, n: int) -> pa.Table:
    # the HNSW graph's neighbours: ~31 ids per row, now and then an empty list
    graph_lens = np.where(rng.random(n) < 0.03, 0, rng.integers(28, 33, n))
    graph = _lists(graph_lens, pa.array(rng.integers(0, 5000, int(graph_lens.sum())).astype(np.uint32)))
    # full-range int64 (stored flat), empty and null lists
    i64_lens = rng.integers(0, 60, n)
    i64_null = rng.random(n) < 0.1
    i64_lens[i64_null] = 0
    i64 = _lists(i64_lens, pa.array(rng.integers(-(1 << 62), 1 << 62, int(i64_lens.sum()))), i64_null)
    # null items inside lists, and null lists
    item_lens = rng.integers(0, 12, n)
    item_vals = rng.integers(0, 1000, int(item_lens.sum())).astype(np.int32)
    items = _lists(item_lens, pa.array(item_vals, mask=rng.random(len(item_vals)) < 0.1),
                   rng.random(n) < 0.05)
    # mostly short lists, a few longer than a chunk (1024 values): rows spanning several chunks
    long_lens = np.where(rng.random(n) < 0.002, rng.integers(1500, 4000, n), rng.integers(1, 4, n))
    long = _lists(long_lens, pa.array(rng.integers(0, 1 << 20, int(long_lens.sum())).astype(np.uint32)))
    str_lens = rng.integers(0, 4, n)
    words = np.array(["alpha", "beta", "gamma", "delta", "a longer string value"])
    strs = _lists(str_lens, pa.array(words[rng.integers(0, len(words), int(str_lens.sum()))].tolist()))
    big_lens = rng.integers(0, 20, n)
    big = _lists(big_lens, pa.array(rng.integers(-300, 300, int(big_lens.sum())).astype(np.int16)),
                 large=True)
    inner = pa.array([[int(v)] * int(v % 3) for v in rng.integers(0, 50, int(rng.integers(0, 3, n).sum()))],
                     pa.list_(pa.int32()))
    nested_lens = _split(rng, len(inner), n)
    nested = _lists(nested_lens, inner)
    in_struct = pa.StructArray.from_arrays([_lists(item_lens, pa.array(item_vals))], names=["xs"])
    return pa.table({"id": pa.array(np.arange(n, dtype=np.uint32)), "graph": graph, "i64": i64,
                     "items": items, "long": long, "strs": strs, "big": big, "nested": nested,
                     "in_struct": in_struct})


def _split(rng: np.random.Generator, total: int, n: int) -> np.ndarray:
    """``n`` list lengths adding up to ``total``."""
    cuts = np.sort(rng.integers(0, total + 1, n - 1))
    return np.diff(np.concatenate([[0], cuts, [total]]))


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    table = _table(np.random.default_rng(11), ROWS)
    path = str(tmp_path_factory.mktemp("list_ranges") / "f.lance")
    with lance.file.LanceFileWriter(path, version=request.param) as w:
        for start in range(0, ROWS, 2_500):  # several pages per column, cut where each column fills
            w.write_batch(table.slice(start, 2_500))
    return path, table


def _page_starts(path: str) -> list[int]:
    """Every column's page boundaries (they differ between columns)."""
    out: set[int] = set()
    for column in LanceFileReader(path).metadata().columns:
        at = 0
        for page in column.pages:
            at += int(page.length)
            out.add(at)
    return sorted(out - {0, ROWS})


def _ranges(path: str) -> list[tuple[int, int]]:
    rng = np.random.default_rng(5)
    ranges = [(0, ROWS), (0, 1), (ROWS - 1, 1), (ROWS - 4_000, 4_000)]
    for _ in range(40):
        size = int(rng.choice([1, 2, 7, 33, 100, 1_000, 4_000, 9_000]))
        ranges.append((int(rng.integers(0, ROWS - size)), size))
    for boundary in _page_starts(path)[::2]:  # starting, ending and crossing at page boundaries
        for start, size in ((boundary, 3_000), (boundary - 3_000, 3_000), (boundary - 1, 2),
                            (boundary - 1_500, 3_000), (boundary + 1, 500)):
            if start >= 0 and start + size <= ROWS:
                ranges.append((start, size))
    return ranges


def test_list_ranges_equal_pylance(written: tuple[str, pa.Table]) -> None:
    path, table = written
    ours = LanceFileReader(path)
    theirs = lance.file.LanceFileReader(path)
    for start, size in _ranges(path):
        got = ours.read_range(start, size, batch_size=size).to_table()
        want = theirs.read_range(start, size, batch_size=size).to_table()
        assert got.equals(want), (start, size)
        assert got.equals(table.slice(start, size)), (start, size)


def test_list_ranges_in_small_batches_equal_pylance(written: tuple[str, pa.Table]) -> None:
    # batches that start and end mid-page (and a reader that reads on where it stopped)
    path, _table = written
    got = LanceFileReader(path, columns=["graph", "items"]).read_range(1_234, 20_000, batch_size=777).to_table()
    want = lance.file.LanceFileReader(path, columns=["graph", "items"]).read_range(1_234, 20_000).to_table()
    assert got.equals(want)


def test_a_list_range_decodes_only_its_chunks(written: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    path, table = written
    spans = []
    real = listrange.list_rows

    def spy(plan: listrange.ListPlan, source: object, lo: int, hi: int) -> object:
        spans.append(len(plan.counts))
        return real(plan, source, lo, hi)

    whole = []
    real_decode = layout.decode_page

    def decode_spy(*args: object) -> object:
        whole.append(1)
        return real_decode(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder, "list_rows", spy)
    monkeypatch.setattr(decoder, "decode_page", decode_spy)  # a whole page decoded
    reader = LanceFileReader(path, columns=["graph"])
    first = _page_starts(path)[0]
    got = reader.read_range(first // 3, 200, batch_size=200).to_table()
    assert got.column("graph").combine_chunks().equals(table.column("graph").slice(first // 3, 200).combine_chunks())
    assert spans and not whole


def _ool_encoding(width: int) -> pb.CompressiveEncoding:
    enc = pb.CompressiveEncoding()
    enc.out_of_line_bitpacking.uncompressed_bits_per_value = 16
    enc.out_of_line_bitpacking.values.flat.bits_per_value = width
    return enc


def _ool_buffer(levels_: np.ndarray, width: int, raw_tail: bool) -> bytes:
    """Out-of-line bit-packed levels as lance lays them out: whole blocks, then the tail packed
    into a padded block or raw."""
    whole = len(levels_) // 1024
    out = [bitpack.pack_blocks(levels_[: whole * 1024], width, 16).tobytes()] if whole else []
    tail = levels_[whole * 1024 :]
    if len(tail):
        if raw_tail:
            out.append(tail.astype("<u2").tobytes())
        else:
            padded = np.zeros(1024, np.uint16)
            padded[: len(tail)] = tail
            out.append(bitpack.pack_blocks(padded, width, 16).tobytes())
    return b"".join(out)


@pytest.mark.parametrize("width", [1, 3, 16])
def test_batched_bitpacked_levels_equal_chunk_by_chunk(width: int) -> None:
    rng = np.random.default_rng(width)
    enc = _ool_encoding(width)
    counts = [1024, 1025, 1022, 2048, 3000, 64, 0, 1024, 7, 2100, 1024 + 64 * width]
    for raw_pattern in range(4):
        data = bytearray()
        starts, sizes, wanted = [], [], []
        for i, n in enumerate(counts):
            lv = rng.integers(0, 1 << width, n).astype(np.uint16)
            # a raw tail as long as a packed block reads as raw (the sizes cannot tell): lance writes it raw
            tie = 2 * (n % 1024) == 128 * width
            raw = bool(n % 1024) and (raw_pattern == 3 or (i + raw_pattern) % 2 == 0 or tie)
            buf = _ool_buffer(lv, width, raw)
            data += b"\xfe" * 8  # something between chunks
            starts.append(len(data))
            sizes.append(len(buf))
            data += buf
            wanted.append(lv)
        arr = np.frombuffer(bytes(data) + b"\x00" * 8, np.uint8)
        st, sz, nl = (np.array(x, np.int64) for x in (starts, sizes, counts))
        got = levels.chunk_levels(enc, arr, st, sz, nl)
        assert np.array_equal(got, np.concatenate(wanted))
        one_by_one = [comp.levels_from_block(comp.decode_block(enc, arr[s : s + z], n), n)
                      for s, z, n in zip(starts, sizes, counts, strict=True)]
        assert np.array_equal(got, np.concatenate(one_by_one))


def test_batched_rle_levels_equal_chunk_by_chunk() -> None:
    rng = np.random.default_rng(3)
    enc = pb.CompressiveEncoding()
    enc.rle.values.flat.bits_per_value = 16
    enc.rle.run_lengths.flat.bits_per_value = 8
    data = bytearray()
    starts, sizes, counts, wanted = [], [], [], []
    for _ in range(40):
        runs = rng.integers(1, 256, int(rng.integers(1, 12)))
        vals = rng.integers(0, 4, len(runs)).astype("<u2")
        buf = len(vals.tobytes()).to_bytes(8, "little") + vals.tobytes() + runs.astype(np.uint8).tobytes()
        starts.append(len(data))
        sizes.append(len(buf))
        counts.append(int(runs.sum()))
        wanted.append(np.repeat(vals, runs))
        data += buf + b"\xfe" * (-len(buf) % 8)
    arr = np.frombuffer(bytes(data), np.uint8)
    st, sz, nl = (np.array(x, np.int64) for x in (starts, sizes, counts))
    got = levels.chunk_levels(enc, arr, st, sz, nl)
    assert np.array_equal(got, np.concatenate(wanted))


def test_unpacking_every_block_count_and_width_round_trips() -> None:
    rng = np.random.default_rng(0)
    for t in (8, 16, 32, 64):
        for width in sorted({1, 2, t // 4, t // 2 - 1, t // 2 + 1, t - 1, t}):
            for blocks in (1, 2, 5, 47, 64, 65, 97, 130):
                top = (1 << width) - 1
                vals = (rng.integers(0, 1 << 62, blocks * 1024).astype(np.uint64) & np.uint64(top))
                vals = vals.astype(bitpack.uint_dtype(t))
                vals[:3] = top
                packed = bitpack.pack_blocks(vals, width, t)
                assert np.array_equal(bitpack.unpack_blocks(packed, width, t), vals), (t, width, blocks)


def test_a_repetition_index_that_disagrees_with_its_page_is_not_used(written: tuple[str, pa.Table]) -> None:
    # such a page is decoded whole instead (that does not rely on the index)
    path, _table = written
    dec = LanceFileReader(path, columns=["graph"])._decoder
    assert isinstance(dec, decoder.Decoder21)
    page = dec._leaves[0][0].column.pages[0]
    layout_ = decoder._page_layout(page)
    wanted = listrange.list_plan_buffers(page, layout_)
    assert wanted is not None
    raw = dec.source.read_arrays(wanted, "page buffer")
    assert listrange.build_list_plan(page, layout_, raw) is not None
    entries = np.ascontiguousarray(raw[-1]).view("<u8").reshape(-1, 2).copy()
    for change in ("more rows", "open last row", "short"):
        bad = entries.copy()
        if change == "more rows":
            bad[0, 0] += 1
        elif change == "open last row":
            bad[-1, 1] = 3
        index = bad.view(np.uint8).reshape(-1)
        if change == "short":
            index = index[:-16]
        assert listrange.build_list_plan(page, layout_, [*raw[:-1], index]) is None, change


def test_map_ranges_equal_pylance(tmp_path_factory: pytest.TempPathFactory) -> None:
    # a map's keys and values are list leaves too (pylance writes maps from 2.2 on)
    rng = np.random.default_rng(1)
    lens = rng.integers(0, 6, 30_000)
    keys = pa.array([f"k{i}" for i in rng.integers(0, 50, int(lens.sum()))])
    offsets = np.zeros(len(lens) + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    maps = pa.MapArray.from_arrays(pa.array(offsets), keys, pa.array(rng.integers(0, 1000, int(lens.sum()))))
    table = pa.table({"m": maps})
    path = str(tmp_path_factory.mktemp("maps") / "f.lance")
    with lance.file.LanceFileWriter(path, version="2.2") as w:
        for start in range(0, len(table), 3_000):
            w.write_batch(table.slice(start, 3_000))
    ours, theirs = LanceFileReader(path), lance.file.LanceFileReader(path)
    for _ in range(20):
        size = int(rng.integers(1, 9_000))
        start = int(rng.integers(0, len(table) - size))
        got = ours.read_range(start, size, batch_size=size).to_table()
        assert got.equals(theirs.read_range(start, size, batch_size=size).to_table()), (start, size)
