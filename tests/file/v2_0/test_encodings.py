"""Less common 2.0 encodings: buffer compression, FSST, packed structs, bit-packing."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import lance.file
import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_0_pb2 as pb
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file.container import ARRAY_ENCODING_URL, ContainerWriter, make_column_metadata
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_to_pb


def _strings(n: int) -> pa.Array:
    return pa.array([f"value number {i} xyz" if i % 11 else None for i in range(n)])


def _check_same(path: Path) -> pa.Table:
    theirs = lance.file.LanceFileReader(str(path)).read_all().to_table()
    r = LanceFileReader(str(path))
    assert r.read_all().to_table().equals(theirs)
    idx = [0, 7, 123, len(theirs) - 1]
    assert r.take_rows(idx).to_table().equals(theirs.take(idx))
    assert r.read_range(100, 300).to_table().equals(theirs.slice(100, 300))
    return theirs


@pytest.mark.parametrize("scheme", ["zstd", "lz4", "fsst"])
def test_pylance_compressed_strings(tmp_path: Path, scheme: str) -> None:
    f = pa.field("s", pa.string(), metadata={"lance-encoding:compression": scheme})
    t = pa.table([_strings(3000)], schema=pa.schema([f]))
    path = tmp_path / "c.lance"
    with lance.file.LanceFileWriter(str(path), t.schema, version="2.0") as w:
        w.write_batch(t)
    assert _check_same(path).equals(t)


@pytest.mark.parametrize("scheme", ["zstd", "lz4"])
def test_we_write_compressed_strings(tmp_path: Path, scheme: str) -> None:
    f = pa.field(
        "s",
        pa.large_binary(),
        metadata={"lance-encoding:compression": scheme, "lance-encoding:compression-level": "3"},
    )
    t = pa.table([_strings(3000).cast(pa.large_binary())], schema=pa.schema([f]))
    path = tmp_path / "c.lance"
    with LanceFileWriter(str(path), t.schema, max_page_bytes=20_000) as w:
        w.write_batch(t)
    meta = LanceFileReader(str(path)).metadata()
    enc = pb.ArrayEncoding()
    enc.ParseFromString(meta.columns[0].pages[0].encoding_bytes)
    assert enc.binary.bytes.flat.compression.scheme == scheme
    assert len(meta.columns[0].pages) > 1
    assert _check_same(path).equals(t)


def test_packed_struct_identical(tmp_path: Path) -> None:
    n = 500
    st = pa.StructArray.from_arrays(
        [
            pa.array(np.arange(n, dtype=np.int32)),
            pa.array(np.linspace(0, 1, n)),
            pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * n, dtype=np.float32)), 2),
        ],
        names=["a", "b", "c"],
    )
    t = pa.table([st], schema=pa.schema([pa.field("p", st.type, metadata={"packed": "true"})]))
    with LanceFileWriter(str(tmp_path / "o.lance"), t.schema) as w:
        w.write_batch(t)
    with lance.file.LanceFileWriter(str(tmp_path / "t.lance"), t.schema, version="2.0") as pw:
        pw.write_batch(t)
    assert (tmp_path / "o.lance").read_bytes() == (tmp_path / "t.lance").read_bytes()
    assert w.field_ids == [0]
    assert _check_same(tmp_path / "o.lance").equals(t)


def _craft(path: Path, typ: pa.DataType, n: int, buffers: list[bytes], enc: Any) -> None:
    sink = io.BytesIO()
    cw = ContainerWriter(sink, str(path))
    locs = [cw.write_buffer(b) for b in buffers]
    fields, md = schema_to_pb(LanceSchema.from_arrow(pa.schema([("v", typ)])))
    cm = make_column_metadata([(locs, n, 0, ARRAY_ENCODING_URL, enc.SerializeToString())])
    cw.finish(fields, md, n, [cm], (2, 0))
    path.write_bytes(sink.getvalue())


@pytest.mark.parametrize("signed", [False, True])
def test_legacy_bitpacked(tmp_path: Path, signed: bool) -> None:
    rng = np.random.default_rng(1)
    bits = 11
    values = (
        rng.integers(-(2 ** (bits - 1)), 2 ** (bits - 1), 3000) if signed else rng.integers(0, 2**bits, 3000)
    )
    raw = (values.astype(np.int64) & ((1 << bits) - 1)).astype(np.uint64)
    stream = ((raw[:, None] >> np.arange(bits, dtype=np.uint64)) & 1).astype(np.uint8).reshape(-1)
    packed = np.packbits(stream, bitorder="little").tobytes()
    enc = pb.ArrayEncoding()
    enc.bitpacked.compressed_bits_per_value = bits
    enc.bitpacked.uncompressed_bits_per_value = 32
    enc.bitpacked.signed = signed
    enc.bitpacked.buffer.SetInParent()  # page buffer 0; the real writer always says which
    typ = pa.int32() if signed else pa.uint32()
    _craft(tmp_path / "b.lance", typ, len(values), [packed], enc)
    r = LanceFileReader(str(tmp_path / "b.lance"))
    expected = pa.array(values, typ)
    assert r.read_all().to_table().column(0).combine_chunks().equals(expected)
    assert r.take_rows([2999, 5, 1000]).to_table().column(0).to_pylist() == [
        values[2999],
        values[5],
        values[1000],
    ]


def test_fastlanes_bitpacked(tmp_path: Path) -> None:
    from lance_format.file.v2_1.bitpack import pack_blocks

    rng = np.random.default_rng(2)
    n, bits = 2500, 9
    values = rng.integers(0, 2**bits, n).astype(np.uint16)
    padded = np.zeros(-(-n // 1024) * 1024, np.uint16)
    padded[:n] = values
    packed = pack_blocks(padded, bits, 16).tobytes()
    enc = pb.ArrayEncoding()
    enc.bitpacked_for_non_neg.compressed_bits_per_value = bits
    enc.bitpacked_for_non_neg.uncompressed_bits_per_value = 16
    enc.bitpacked_for_non_neg.buffer.SetInParent()  # page buffer 0; the real writer always says which
    _craft(tmp_path / "f.lance", pa.uint16(), n, [packed], enc)
    r = LanceFileReader(str(tmp_path / "f.lance"))
    assert r.read_all().to_table().column(0).to_pylist() == values.tolist()
    assert r.read_range(1000, 1100).to_table().column(0).to_pylist() == values[1000:2100].tolist()
    assert r.take_rows([2499, 3]).to_table().column(0).to_pylist() == [values[2499], values[3]]
