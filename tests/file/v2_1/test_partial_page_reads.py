"""Reading parts of big mini-block pages: row ranges and takes decode only the chunks they need.

Pylance writes a whole column of a modest file as one page, so a scan that streams the file in
pieces, or a take of a few rows, must read just the chunks holding those rows. Every read is
compared with pylance's own reader on the same file, and with the whole-page decode.
"""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import ChunkSet, Fixed, Fsl, gather_ranges
from lance_format.file.v2_1.chunkrows import decode_rows
from lance_format.file.v2_1.chunkset import _variable_gathered, _zstd_chunkset, decode_chunkset
from lance_format.file.v2_1.compression import flat_encoding

from .helpers import open_decoder, read_table, write_file

ROWS = 40_000


def _table(rng: np.random.Generator) -> pa.Table:
    words = np.array([f"word{i:03d}_" + "x" * int(i % 13) for i in range(300)])
    text = [" ".join(words[rng.integers(0, 300, 3)]) for _ in range(ROWS)]
    maybe = rng.standard_normal(ROWS)
    return pa.table(
        {
            "id": pa.array(np.arange(ROWS, dtype=np.int64)),
            "x": pa.array(maybe, mask=rng.random(ROWS) < 0.1),
            "small": pa.array(rng.integers(0, 50, ROWS).astype(np.int32)),
            "category": pa.array([f"cat_{i:02d}" for i in rng.integers(0, 20, ROWS)]),
            "text": pa.array(text, mask=rng.random(ROWS) < 0.05),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 4, dtype=np.float32)), 4),
        }
    )


@pytest.fixture(scope="module")
def pylance_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    path = str(tmp_path_factory.mktemp("partial") / "one_page.lance")
    table = _table(np.random.default_rng(7))
    with lance.file.LanceFileWriter(path, version="2.2") as writer:
        writer.write_batch(table)
    return path, table


def test_pylance_columns_are_single_big_pages(pylance_file: tuple[str, pa.Table]) -> None:
    # the premise of the tests below: every column is one page far larger than a chunk
    path, _ = pylance_file
    dec = open_decoder(path)
    assert all(len(leaf.column.pages) == 1 for leaves in dec._leaves for leaf in leaves)


@pytest.mark.parametrize(("start", "stop"), [(0, 1), (1, 1000), (999, 1025), (12_345, 29_000), (39_990, ROWS)])
def test_row_range_inside_a_page_matches_pylance(pylance_file: tuple[str, pa.Table], start: int, stop: int) -> None:
    path, table = pylance_file
    dec = open_decoder(path)
    got = pa.Table.from_batches([dec.read_range(start, stop)])
    theirs = lance.file.LanceFileReader(path).read_range(start, stop - start).to_table()
    assert got.equals(theirs)
    assert got.equals(table.slice(start, stop - start))


def test_streaming_a_page_in_pieces_never_decodes_it_whole(pylance_file: tuple[str, pa.Table]) -> None:
    path, table = pylance_file
    dec = open_decoder(path)
    pieces = [dec.read_range(a, min(a + 7_000, ROWS)) for a in range(0, ROWS, 7_000)]
    assert pa.Table.from_batches(pieces).equals(table)
    assert dec._last == {}  # no whole decoded page was kept (memory: one piece per column)


def test_small_sequential_reads_decode_each_page_once(pylance_file: tuple[str, pa.Table]) -> None:
    path, table = pylance_file
    cols = ["x", "text", "vec"]  # nullable, strings, raw fixed-width
    dec = open_decoder(path, cols)
    pieces = [dec.read_range(a, min(a + 1000, ROWS)) for a in range(0, ROWS, 1000)]
    assert pa.Table.from_batches(pieces).equals(table.select(cols))
    assert len(dec._last) == 3  # from the second piece on, each column's page was decoded whole


def test_take_of_scattered_rows_matches_pylance(pylance_file: tuple[str, pa.Table]) -> None:
    path, table = pylance_file
    rng = np.random.default_rng(3)
    for count in (1, 37, 900, 15_000):  # few chunks (scattered reads) up to most of the page
        idx = np.sort(rng.choice(ROWS, count, replace=False))
        got = pa.Table.from_batches([open_decoder(path).take(idx)])
        theirs = lance.file.LanceFileReader(path).take_rows(idx.tolist()).to_table()
        assert got.equals(theirs), count
    idx = rng.integers(0, ROWS, 500)  # unsorted, with repeats
    assert pa.Table.from_batches([open_decoder(path).take(idx)]).equals(table.take(pa.array(idx)))


def test_whole_read_equals_pieces(pylance_file: tuple[str, pa.Table]) -> None:
    path, table = pylance_file
    assert read_table(path).equals(table)


# ------------------------------------------------------------------ zstd and unaligned chunks


def test_zstd_string_pages_from_pylance_read_identically(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    strings = pa.array([("abc" * int(k)) + str(i) for i, k in enumerate(rng.integers(0, 9, 30_000))])
    field = pa.field("s", pa.string(), metadata={"lance-encoding:compression": "zstd"})
    table = pa.table({"s": strings}, schema=pa.schema([field]))
    path = str(tmp_path / "zstd.lance")
    with lance.file.LanceFileWriter(path, version="2.2") as writer:
        writer.write_batch(table)
    dec = open_decoder(path)
    layout = pb.PageLayout()
    layout.ParseFromString(dec._leaves[0][0].column.pages[0].encoding)
    assert layout.mini_block_layout.value_compression.WhichOneof("compression") == "general"
    assert read_table(path).column("s").combine_chunks().equals(strings)
    idx = np.sort(rng.choice(30_000, 300, replace=False))
    got = pa.Table.from_batches([open_decoder(path).take(idx)]).column("s").combine_chunks()
    assert got.equals(strings.take(pa.array(idx)))
    assert pa.concat_arrays([dec.read_range(a, a + 3_000).column(0) for a in range(0, 30_000, 3_000)]).equals(
        strings
    )


def _var_chunk(values: list[bytes]) -> bytes:
    head = 4 * (len(values) + 1)
    offs = np.cumsum([head] + [len(v) for v in values]).astype("<u4")
    return offs.tobytes() + b"".join(values)


def test_unaligned_variable_chunks_decode_like_per_chunk() -> None:
    rng = np.random.default_rng(5)
    chunks = [[bytes(rng.integers(0, 256, int(k)).astype(np.uint8)) for k in rng.integers(0, 12, n)]
              for n in rng.integers(1, 40, 50)]
    raw = b""
    starts, sizes = [], []
    for c in chunks:
        raw += bytes(int(rng.integers(0, 4)))  # misalign every chunk
        body = _var_chunk(c)
        starts.append(len(raw))
        sizes.append(len(body))
        raw += body
    data = np.frombuffer(raw, np.uint8)
    counts = np.array([len(c) for c in chunks], np.int64)
    got = _variable_gathered(data, np.array(starts, np.int64), np.array(sizes, np.int64), counts, 4)
    flat = [v for c in chunks for v in c]
    assert got.n == len(flat)
    assert [got.data[got.offsets[i] : got.offsets[i + 1]].tobytes() for i in range(got.n)] == flat


def test_zstd_chunkset_declines_frames_without_a_matching_size() -> None:
    # a chunk whose size prefix disagrees with its frame header goes to the per-chunk path
    frame = np.frombuffer(pa.compress(b"x" * 100, codec="zstd", asbytes=True), np.uint8)
    good = np.concatenate([np.frombuffer((100).to_bytes(8, "little"), np.uint8), frame])
    bad = np.concatenate([np.frombuffer((99).to_bytes(8, "little"), np.uint8), frame])
    for chunks, ok in (([good, good], True), ([good, bad], False)):
        data = np.concatenate(chunks)
        starts = np.array([0, len(chunks[0])], np.int64)
        sizes = np.array([len(c) for c in chunks], np.int64)
        cs = ChunkSet(data, [starts], [sizes], np.array([100, 100], np.int64))
        inflated = _zstd_chunkset(cs)
        assert (inflated is not None) == ok
        if inflated is not None:
            block = decode_chunkset(flat_encoding(8), inflated)
            assert bytes(block.data[:200]) == b"x" * 200  # type: ignore[union-attr]


# ------------------------------------------------------------------ single values for takes


def _bitpacked_chunkset(rng: np.random.Generator, t: int) -> tuple[ChunkSet, np.ndarray]:
    dtype = np.dtype(f"uint{t}")
    raw = b""
    starts, sizes, counts, values = [], [], [], []
    for width in [0, 1, 3, t // 2, t - 1, t, 5]:  # every kind of width, spilling or not
        n = 1024 if width != 5 else 700  # the last chunk is partial
        top = (1 << width) - 1 if width < 64 else np.iinfo(np.uint64).max
        vals = rng.integers(0, top, n, dtype=dtype, endpoint=True) if width else np.zeros(n, dtype)
        full = np.zeros(1024, dtype)
        full[:n] = vals
        body = np.array([width], dtype).tobytes() + bitpack.pack_blocks(full, width, t).tobytes()
        raw += bytes(int(rng.integers(0, 3)) * 8)  # gaps between chunks, as in a take's reads
        starts.append(len(raw))
        sizes.append(len(body))
        counts.append(n)
        values.append(vals)
        raw += body
    cs = ChunkSet(np.frombuffer(raw, np.uint8), [np.array(starts, np.int64)], [np.array(sizes, np.int64)],
                  np.array(counts, np.int64))
    return cs, np.concatenate(values)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_bitpacked_values_are_read_without_unpacking_chunks(t: int) -> None:
    rng = np.random.default_rng(t)
    cs, values = _bitpacked_chunkset(rng, t)
    enc = pb.CompressiveEncoding()
    enc.inline_bitpacking.uncompressed_bits_per_value = t
    rows = rng.integers(0, len(values), 3000)
    got = decode_rows(enc, cs, rows)
    assert isinstance(got, Fixed)
    assert np.array_equal(got.data.view(values.dtype), values[rows])


def test_fixed_and_fixed_size_list_values_are_read_in_place() -> None:
    rng = np.random.default_rng(9)
    counts = np.array([5, 7, 3], np.int64)
    rows = np.array([14, 0, 6, 5, 14, 11], np.int64)
    items = rng.random(int(counts.sum()) * 4, dtype=np.float32)
    raw = b""
    starts = []
    at = 0
    for c in counts.tolist():
        raw += b"\xff" * 8
        starts.append(len(raw))
        raw += items[at * 4 : (at + c) * 4].tobytes()
        at += c
    cs = ChunkSet(np.frombuffer(raw, np.uint8), [np.array(starts, np.int64)], [counts * 16], counts)
    enc = pb.CompressiveEncoding()
    enc.fixed_size_list.items_per_value = 4
    enc.fixed_size_list.values.flat.bits_per_value = 32
    fsl = decode_rows(enc, cs, rows)
    assert isinstance(fsl, Fsl)
    assert np.array_equal(fsl.items.data.view(np.float32).reshape(-1, 4), items.reshape(-1, 4)[rows])
    flat = decode_rows(flat_encoding(128), cs, rows)  # the same bytes read as 16-byte values
    assert isinstance(flat, Fixed)
    assert flat.data.tobytes() == items.reshape(-1, 4)[rows].tobytes()


@pytest.mark.parametrize(("step", "size", "last"), [(4104, 4096, 4096), (4104, 4096, 100), (16, 16, 16), (24, 8, 3)])
def test_evenly_spaced_ranges_gather_like_slices(step: int, size: int, last: int) -> None:
    rng = np.random.default_rng(step + last)
    n = 9
    data = rng.integers(0, 256, 8 + n * step, dtype=np.uint8)
    starts = 8 + np.arange(n, dtype=np.int64) * step
    lens = np.full(n, size, np.int64)
    lens[-1] = last
    got = gather_ranges(data, starts, lens)
    want = np.concatenate([data[s : s + k] for s, k in zip(starts.tolist(), lens.tolist(), strict=True)])
    assert np.array_equal(got, want)


# ------------------------------------------------------------------ full-zip pages


@pytest.fixture(scope="module")
def fullzip_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    rng = np.random.default_rng(21)
    n = 3_000
    big = [bytes(rng.integers(97, 123, int(k), dtype=np.uint8)).decode() for k in rng.integers(300, 700, n)]
    lists = [None if i % 17 == 0 else big[i : i + int(i % 4)] for i in range(n)]
    table = pa.table(
        {
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 256, dtype=np.float32)), 256),
            "doc": pa.array(big, mask=rng.random(n) < 0.1),
            "docs": pa.array(lists, pa.list_(pa.string())),
        }
    )
    path = str(tmp_path_factory.mktemp("fullzip") / "zipped.lance")
    with lance.file.LanceFileWriter(path, version="2.2") as writer:
        writer.write_batch(table)
    return path, table


def test_large_values_are_full_zip_pages(fullzip_file: tuple[str, pa.Table]) -> None:
    dec = open_decoder(fullzip_file[0])
    for leaves in dec._leaves:
        layout = pb.PageLayout()
        layout.ParseFromString(leaves[0].column.pages[0].encoding)
        assert layout.WhichOneof("layout") == "full_zip_layout"


def test_full_zip_take_reads_only_its_rows_and_matches_pylance(fullzip_file: tuple[str, pa.Table]) -> None:
    path, table = fullzip_file
    rng = np.random.default_rng(2)
    for idx in (np.array([0]), np.sort(rng.choice(3_000, 40, replace=False)), rng.integers(0, 3_000, 300)):
        got = pa.Table.from_batches([open_decoder(path).take(idx)])
        assert got.equals(table.take(pa.array(idx))), len(idx)
    idx = np.sort(rng.choice(3_000, 100, replace=False))
    assert pa.Table.from_batches([open_decoder(path).take(idx)]).equals(
        lance.file.LanceFileReader(path).take_rows(idx.tolist()).to_table()
    )


def test_full_zip_row_ranges_match_pylance(fullzip_file: tuple[str, pa.Table]) -> None:
    path, table = fullzip_file
    dec = open_decoder(path)
    for start, stop in ((5, 6), (100, 1_900), (2_500, 3_000)):
        got = pa.Table.from_batches([dec.read_range(start, stop)])
        assert got.equals(lance.file.LanceFileReader(path).read_range(start, stop - start).to_table())
    assert read_table(path).equals(table)


# ------------------------------------------------------------------ fixed-width rows across pages


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def many_pages_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    rng = np.random.default_rng(4)
    n = 60_000
    table = pa.table(
        {
            "x": pa.array(rng.standard_normal(n)),
            "small": pa.array(rng.integers(0, 1 << 30, n).astype(np.int32)),
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 8, dtype=np.float32)), 8),
        }
    )
    path = str(tmp_path_factory.mktemp("pages") / f"many_{request.param}.lance")
    pieces = pa.Table.from_batches(table.to_batches(max_chunksize=4_000))  # the writer pages per batch
    write_file(path, pieces, request.param, max_page_bytes=50_000)
    return path, table


def test_rows_spanning_pages_are_copied_once_and_match_pylance(many_pages_file: tuple[str, pa.Table]) -> None:
    path, table = many_pages_file
    dec = open_decoder(path)
    fixed = [dec._leaves[0][0], dec._leaves[2][0]]  # x and vec: raw fixed-width values
    assert all(len(leaf.column.pages) > 3 for leaf in fixed)
    for start, stop in ((0, 60_000), (3, 59_999), (12_345, 47_890), (30_000, 30_001)):
        got = pa.Table.from_batches([dec.read_range(start, stop)])
        assert got.equals(table.slice(start, stop - start)), (start, stop)
        theirs = lance.file.LanceFileReader(path).read_range(start, stop - start).to_table()
        assert got.equals(theirs)
    # every range of x and vec went straight into its output: no page of theirs decoded whole
    assert not {leaf.column.index for leaf in fixed} & set(dec._last)


def test_fixed_width_chunk_with_a_wrong_header_is_reported(many_pages_file: tuple[str, pa.Table], tmp_path: Path) -> None:
    path, _ = many_pages_file
    dec = open_decoder(path, ["x"])
    leaf = dec._leaves[0][0]
    plan = dec._plan(leaf, 0)
    assert plan is not None and plan.row_width == 8
    raw = bytearray(Path(path).read_bytes())
    at = plan.data_pos + int(plan.first_byte[1]) + 2  # the value size in the second chunk's header
    raw[at] ^= 0xFF
    raw[at + 1] ^= 0x0F
    bad = tmp_path / "bad.lance"
    bad.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="column .* page 0: fixed-width mini-block chunk disagrees"):
        open_decoder(str(bad), ["x"]).read_range(10, 5_000)


# ------------------------------------------------------------------ the next range, decoded ahead


def test_sequential_big_reads_are_decoded_ahead(
    pylance_file: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    path, table = pylance_file
    dec = open_decoder(path)
    first = dec.read_range(0, 17_000)
    assert dec._ahead is not None and dec._ahead[0] == (17_000, 34_000)
    second = dec.read_range(17_000, 34_000)  # served by the read ahead, which queues the next one
    assert dec._ahead is not None and dec._ahead[0] == (34_000, ROWS)
    third = dec.read_range(34_000, ROWS)
    assert dec._ahead is None  # nothing after the end of the file
    assert pa.Table.from_batches([first, second, third]).equals(table)


def test_a_read_elsewhere_ignores_the_range_read_ahead(
    pylance_file: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "2")
    path, table = pylance_file
    dec = open_decoder(path)
    dec.read_range(0, 17_000)
    assert pa.Table.from_batches([dec.read_range(5, 20)]).equals(table.slice(5, 15))
    assert dec._ahead is None  # not sequential: nothing is read ahead
    assert pa.Table.from_batches([dec.read_range(17_000, 34_000)]).equals(table.slice(17_000, 17_000))


# ------------------------------------------------------------------ takes across many pages


@pytest.fixture(scope="module", params=["2.1", "2.2"])
def small_pages_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    table = _table(np.random.default_rng(11))
    path = str(tmp_path_factory.mktemp("small_pages") / f"small_{request.param}.lance")
    write_file(path, pa.Table.from_batches(table.to_batches(max_chunksize=5_000)), request.param,
               max_page_bytes=40_000)
    return path, table


def test_take_over_many_pages_decodes_alike_pages_together_and_matches_pylance(
    small_pages_file: tuple[str, pa.Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lance_format.file.v2_1.decoder as decoder_module

    path, table = small_pages_file
    calls: list[int] = []
    real = decoder_module.decode_taken

    def counting(plans, reqs, data, ats):  # type: ignore[no-untyped-def]
        calls.append(len(plans))
        return real(plans, reqs, data, ats)

    monkeypatch.setattr(decoder_module, "decode_taken", counting)
    idx = np.sort(np.random.default_rng(3).choice(ROWS, 500, replace=False))
    dec = open_decoder(path)
    assert all(len(leaf.column.pages) > 3 for leaves in dec._leaves for leaf in leaves)
    got = pa.Table.from_batches([dec.take(idx)])
    assert got.equals(table.take(pa.array(idx)))
    assert got.equals(lance.file.LanceFileReader(path).take_rows(idx.tolist()).to_table())
    # runs of several pages were decoded by one call, and none of a page's rows went missing
    assert max(calls) > 1 and sum(calls) > len(calls)
    # repeats and any order come back as asked
    shuffled = np.concatenate([idx[::-1], idx[:7]])
    assert pa.Table.from_batches([dec.take(shuffled)]).equals(table.take(pa.array(shuffled)))
