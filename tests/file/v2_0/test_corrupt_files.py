"""Malformed 2.0 files raise LanceError subclasses naming the file and the problem."""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_0_pb2 as pb
from lance_format.errors import CorruptFileError, LanceError, UnsupportedEncodingError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file.container import ARRAY_ENCODING_URL, ContainerWriter, make_column_metadata
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_to_pb


def _good_file(path: Path) -> bytes:
    t = pa.table(
        {
            "i": pa.array(range(300), pa.int32()),
            "s": pa.array([f"v{i}" for i in range(300)]),
            "l": pa.array([[i, None] for i in range(300)], pa.list_(pa.int64())),
        }
    )
    with LanceFileWriter(str(path), t.schema, max_page_bytes=512) as w:
        w.write_batch(t)
    return path.read_bytes()


def _read_everything(path: Path) -> None:
    r = LanceFileReader(str(path))
    r.read_all().to_table()
    if r.num_rows:
        r.take_rows([0, r.num_rows - 1]).to_table()


def _craft(path: Path, schema: pa.Schema, rows: int, pages: list[tuple[list[bytes], int, Any]]) -> None:
    """A file with one column whose pages are given as (buffers, length, ArrayEncoding)."""
    sink = io.BytesIO()
    cw = ContainerWriter(sink, str(path))
    meta = []
    for buffers, length, enc in pages:
        locs = [cw.write_buffer(b) for b in buffers]
        meta.append((locs, length, 0, ARRAY_ENCODING_URL, enc.SerializeToString()))
    fields, md = schema_to_pb(LanceSchema.from_arrow(schema))
    cw.finish(fields, md, rows, [make_column_metadata(meta)], (2, 0))
    path.write_bytes(sink.getvalue())


def _flat(bits: int, index: int) -> Any:
    enc = pb.ArrayEncoding()
    enc.flat.bits_per_value = bits
    enc.flat.buffer.buffer_index = index
    return enc


@pytest.mark.parametrize("cut", [1, 39, 40, 100, 1000])
def test_truncated(tmp_path: Path, cut: int) -> None:
    data = _good_file(tmp_path / "g.lance")
    bad = tmp_path / "trunc.lance"
    bad.write_bytes(data[: len(data) - cut] if cut < len(data) else data[:cut])
    with pytest.raises(CorruptFileError, match="trunc.lance"):
        _read_everything(bad)


def test_tiny_and_bad_magic(tmp_path: Path) -> None:
    (tmp_path / "tiny.lance").write_bytes(b"LANC")
    with pytest.raises(CorruptFileError, match="tiny.lance.*too small"):
        LanceFileReader(str(tmp_path / "tiny.lance"))
    data = bytearray(_good_file(tmp_path / "g.lance"))
    data[-4:] = b"XXXX"
    (tmp_path / "magic.lance").write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="magic.lance.*magic"):
        LanceFileReader(str(tmp_path / "magic.lance"))


def test_unknown_encoding(tmp_path: Path) -> None:
    enc = pb.ArrayEncoding()
    enc.rle.bits_per_value = 32
    _craft(tmp_path / "u.lance", pa.schema([("a", pa.int32())]), 4, [([b"\0" * 16], 4, enc)])
    with pytest.raises(UnsupportedEncodingError, match="u.lance.*rle"):
        _read_everything(tmp_path / "u.lance")


def test_offsets_past_end(tmp_path: Path) -> None:
    enc = pb.ArrayEncoding()
    enc.binary.indices.nullable.no_nulls.values.CopyFrom(_flat(64, 0))
    enc.binary.bytes.CopyFrom(_flat(8, 1))
    enc.binary.null_adjustment = 10**6
    ends = np.array([2, 5000], dtype="<u8").tobytes()
    _craft(tmp_path / "o.lance", pa.schema([("s", pa.string())]), 2, [([ends, b"abcde"], 2, enc)])
    with pytest.raises(CorruptFileError, match="o.lance.*past the end"):
        _read_everything(tmp_path / "o.lance")
    r = LanceFileReader(str(tmp_path / "o.lance"))
    with pytest.raises(CorruptFileError, match="past the end"):
        r.take_rows([1]).to_table()


def test_corrupt_lengths(tmp_path: Path) -> None:
    # the FileDescriptor claims more rows than the pages hold
    _craft(tmp_path / "n.lance", pa.schema([("a", pa.int64())]), 10**12, [([b"\0" * 32], 4, _flat(64, 0))])
    r = LanceFileReader(str(tmp_path / "n.lance"))
    with pytest.raises(CorruptFileError, match="n.lance"):
        r.read_all().to_table()
    # a page claiming more values than its buffer holds
    _craft(tmp_path / "p.lance", pa.schema([("a", pa.int64())]), 1000, [([b"\0" * 32], 1000, _flat(64, 0))])
    with pytest.raises(CorruptFileError, match="p.lance.*past the end"):
        _read_everything(tmp_path / "p.lance")


def test_tables_pointing_outside(tmp_path: Path) -> None:
    data = bytearray(_good_file(tmp_path / "g.lance"))
    cm_start, cmo, gbo = struct.unpack_from("<QQQ", data, len(data) - 40)
    bad = bytearray(data)
    struct.pack_into("<Q", bad, gbo, len(data) * 4)  # global buffer 0 position
    (tmp_path / "gb.lance").write_bytes(bytes(bad))
    with pytest.raises(CorruptFileError, match="gb.lance"):
        LanceFileReader(str(tmp_path / "gb.lance"))
    bad = bytearray(data)
    struct.pack_into("<Q", bad, gbo - 16 + 8, 2**40)  # last column metadata size
    (tmp_path / "cm.lance").write_bytes(bytes(bad))
    with pytest.raises(CorruptFileError, match="cm.lance"):
        LanceFileReader(str(tmp_path / "cm.lance"))


def test_random_corruption_never_escapes(tmp_path: Path) -> None:
    data = _good_file(tmp_path / "g.lance")
    rng = np.random.default_rng(11)
    tail_start = struct.unpack_from("<Q", data, len(data) - 40)[0] - 700
    for trial in range(int(__import__("os").environ.get("CORRUPT_TRIALS", "150"))):
        bad = bytearray(data)
        lo = 0 if trial % 3 == 0 else tail_start
        for pos in rng.integers(lo, len(data), int(rng.integers(1, 4))):
            bad[int(pos)] = int(rng.integers(0, 256))
        path = tmp_path / f"r{trial}.lance"
        path.write_bytes(bytes(bad))
        try:
            _read_everything(path)
        except LanceError as exc:
            assert f"r{trial}.lance" in str(exc)
