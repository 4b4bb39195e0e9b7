"""Takes decode just the wanted values: strings straight out of their (zstd-inflated) chunks,
and bit-packed runs unpacked straight into the page output; both agree with whole decoding and
with pylance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError
from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.blocks import ChunkSet, Var, take_var
from lance_format.file.v2_1.chunkrows import decode_rows
from lance_format.file.v2_1.chunkset import _variable_chunkset


def _variable_encoding(bits: int) -> pb.CompressiveEncoding:
    enc = pb.CompressiveEncoding()
    enc.variable.offsets.flat.bits_per_value = bits
    return enc


def _chunks(rng: np.random.Generator, counts: list[int], bits: int) -> ChunkSet:
    """Variable-width chunks: ``count + 1`` offsets from the chunk start, the bytes, padding."""
    width = bits // 8
    bufs = []
    for c in counts:
        lens = rng.integers(0, 12, c)
        offs = (c + 1) * width + np.concatenate([[0], np.cumsum(lens)])
        body = rng.integers(0, 256, int(lens.sum())).astype(np.uint8)
        buf = np.concatenate([offs.astype(f"<u{width}").view(np.uint8), body])
        bufs.append(np.concatenate([buf, np.full((-len(buf)) % 8, 0x55, np.uint8)]))
    sizes = np.array([len(b) for b in bufs], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return ChunkSet(np.concatenate(bufs), [starts], [sizes], np.array(counts, np.int64))


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("counts", [[6, 6, 6, 6, 6, 6, 6, 6, 6, 6], [64, 3, 0, 17, 1], [1]])
def test_variable_rows_match_whole_chunk_decode(bits: int, counts: list[int]) -> None:
    rng = np.random.default_rng(bits + sum(counts))
    cs = _chunks(rng, counts, bits)
    rows = rng.integers(0, sum(counts), 50)  # any order, repeats
    got = decode_rows(_variable_encoding(bits), cs, rows)
    want = take_var(_variable_chunkset(cs, bits), rows)
    assert isinstance(got, Var)
    assert np.array_equal(got.offsets, want.offsets)
    assert np.array_equal(got.data, want.data)


def test_variable_rows_reject_offsets_past_their_chunk() -> None:
    cs = _chunks(np.random.default_rng(3), [5, 5, 5], 32)
    data = cs.data.copy()
    start = int(cs.starts[0][1])
    data[start + 8 : start + 12] = np.array([10_000], "<u4").view(np.uint8)  # row 6's end
    bad = ChunkSet(data, cs.starts, cs.sizes, cs.counts)
    with pytest.raises(CorruptFileError):
        decode_rows(_variable_encoding(32), bad, np.array([6]))


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_unpack_blocks_into_a_given_output(t: int) -> None:
    rng = np.random.default_rng(t)
    dtype = bitpack.uint_dtype(t)
    for n, width in [(2, 5), (40, 1), (40, t - 3), (40, t)]:  # the gather path and the row loop
        values = rng.integers(0, 1 << min(width, 62), n * 1024, dtype=np.uint64).astype(dtype)
        packed = bitpack.pack_blocks(values, width, t)
        out = np.zeros(n * 1024, dtype)
        assert bitpack.unpack_blocks(packed, width, t, out=out) is out
        assert np.array_equal(out, values)
        assert np.array_equal(bitpack.unpack_blocks(packed, width, t), values)
    with pytest.raises(ValueError):
        bitpack.unpack_blocks(packed, width, t, out=np.zeros(5, dtype))


@pytest.mark.slow
def test_take_of_zstd_strings_and_growing_ints_matches_pylance(tmp_path: Path) -> None:
    import lance

    rng = np.random.default_rng(11)
    n = 120_000
    lens = rng.integers(0, 30, n)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    letters = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
    text = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(letters)])
    # ids grow, so their bit-packed chunks change width every few chunks; the strings are
    # zstd-compressed mini-block chunks (as the writer picks for big string pages)
    schema = pa.schema([
        pa.field("id", pa.int64()),
        pa.field("text", pa.string(), metadata={"lance-encoding:compression": "zstd"}),
    ])
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64) * 7), "text": text}, schema=schema)
    uri = str(tmp_path / "ds.lance")
    lance_format.write_dataset(table, uri, data_storage_version="2.2")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.to_table().equals(table)
    for idx in (sorted(rng.choice(n, 700, replace=False).tolist()), rng.integers(0, n, 300).tolist(), [n - 1, 0, 0]):
        got = ours.take(idx)
        assert got.equals(table.take(idx))
        assert got.equals(theirs.take(idx))
