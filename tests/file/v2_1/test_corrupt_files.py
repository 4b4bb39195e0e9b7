"""Bad input raises LanceError subclasses naming the file / column / page, never crashes or hangs."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_1_pb2 as pb
from lance_format.errors import CorruptFileError, LanceError
from lance_format.file.v2_1 import compression as comp
from lance_format.file.v2_1.blocks import Chunk

from . import tables
from .helpers import open_decoder


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, pa.Table]:
    d = tmp_path_factory.mktemp("corrupt21")
    table = tables.variety_table(3000).select(["i32_seq", "str_words", "str_long", "list_nulls", "f64_nulls"])
    path = d / "c.lance"
    w = lf.LanceFileWriter(str(path), table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    return path.read_bytes(), table


def _read_all(path: Path) -> None:
    dec = open_decoder(str(path))
    dec.read_range(0, dec.num_rows)
    dec.take(np.array([0, dec.num_rows - 1]))


def test_random_byte_flips_in_data(tmp_path: Path, sample: tuple[bytes, pa.Table]) -> None:
    data, table = sample
    rng = np.random.default_rng(11)
    gb0 = struct.unpack_from("<QQ", data, struct.unpack("<QQQIIHH", data[-40:-4])[2])[0]
    for i in range(40):
        buf = bytearray(data)
        for pos in rng.integers(0, gb0, 8):
            buf[pos] = int(rng.integers(0, 256))
        path = tmp_path / f"f{i}.lance"
        path.write_bytes(bytes(buf))
        with contextlib.suppress(LanceError):
            _read_all(path)


def test_zeroed_page_buffers_name_the_page(tmp_path: Path, sample: tuple[bytes, pa.Table]) -> None:
    data, _ = sample
    gb0 = struct.unpack_from("<QQ", data, struct.unpack("<QQQIIHH", data[-40:-4])[2])[0]
    buf = bytearray(data)
    buf[:gb0] = b"\xff" * gb0
    path = tmp_path / "z.lance"
    path.write_bytes(bytes(buf))
    with pytest.raises(LanceError) as info:
        _read_all(path)
    assert "z.lance" in str(info.value) and "column" in str(info.value)


def test_bad_inline_bit_width() -> None:
    enc = pb.CompressiveEncoding()
    enc.inline_bitpacking.uncompressed_bits_per_value = 32
    chunk = Chunk([np.frombuffer(struct.pack("<I", 40) + b"\0" * 64, np.uint8)], 1024)
    with pytest.raises(CorruptFileError):
        comp.decode_miniblock(enc, [chunk])


def test_truncated_flat_chunk() -> None:
    enc = pb.CompressiveEncoding()
    enc.flat.bits_per_value = 64
    with pytest.raises(CorruptFileError):
        comp.decode_miniblock(enc, [Chunk([np.zeros(10, np.uint8)], 1024)])


def test_variable_offsets_past_end() -> None:
    enc = pb.CompressiveEncoding()
    enc.variable.offsets.flat.bits_per_value = 32
    offsets = np.array([8, 9999], np.uint32).tobytes()
    with pytest.raises(CorruptFileError):
        comp.decode_miniblock(enc, [Chunk([np.frombuffer(offsets, np.uint8)], 1)])


def test_truncated_lz4_and_huge_size_prefix() -> None:
    good = comp.general_decompress(
        comp.LZ4,
        np.frombuffer(
            (5).to_bytes(4, "little") + pa.Codec("lz4_raw").compress(b"hello", asbytes=True), np.uint8
        ),
    )
    assert good.tobytes() == b"hello"
    with pytest.raises(CorruptFileError):
        comp.general_decompress(comp.LZ4, (1 << 30).to_bytes(4, "little") + b"\x00" * 8)
    with pytest.raises(CorruptFileError):
        comp.general_decompress(comp.LZ4, (100).to_bytes(4, "little") + b"\xf0\x01")
    with pytest.raises(CorruptFileError):
        comp.general_decompress(comp.ZSTD, (1 << 40).to_bytes(8, "little") + b"\x00" * 8)


def test_bad_fsst_table() -> None:
    from lance_format.file.v2_1.fsst import SymbolTable

    with pytest.raises(CorruptFileError):
        SymbolTable(b"\x00" * 16)
    with pytest.raises(CorruptFileError):
        SymbolTable(b"\x05\x00\x00\x01TSSF")


def test_rle_runs_too_short() -> None:
    enc = pb.CompressiveEncoding()
    enc.rle.values.flat.bits_per_value = 8
    enc.rle.run_lengths.flat.bits_per_value = 8
    chunk = Chunk([np.array([1, 2], np.uint8), np.array([3, 3], np.uint8)], 100)
    with pytest.raises(CorruptFileError):
        comp.decode_miniblock(enc, [chunk])
