"""Unit tests of the building blocks: FastLanes bit-packing, FSST decoding, rep/def unravel."""

from __future__ import annotations

from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from lance_format.file.v2_1 import bitpack
from lance_format.file.v2_1.fsst import SymbolTable, decode
from lance_format.file.v2_1.repdef import Layer, unravel

from .helpers import read_table


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_fastlanes_roundtrip(t: int) -> None:
    rng = np.random.default_rng(t)
    for w in range(t + 1):
        mask = (1 << w) - 1 if w < 64 else (1 << 64) - 1
        v = (rng.integers(0, 2**63, 2048, dtype=np.uint64) & np.uint64(mask)).astype(bitpack.uint_dtype(t))
        packed = bitpack.pack_blocks(v, w, t)
        assert len(packed) == 2 * 1024 * w // t
        if w:
            assert (bitpack.unpack_blocks(packed, w, t) == v).all()


def test_fastlanes_matches_lance_bit_order() -> None:
    # FACTS e8: u16 width 1, a set bit at rows 3, 8, 13, ... gives def bytes 42 08 10 42
    v = np.zeros(1024, np.uint16)
    v[3::5] = 1
    assert bitpack.pack_blocks(v, 1, 16).view(np.uint8)[:4].tobytes() == bytes([0x42, 0x08, 0x10, 0x42])


def _table(symbols: list[bytes]) -> SymbolTable:
    n = len(symbols)
    header = (0x46535354 << 32) | (1 << 24) | n
    raw = header.to_bytes(8, "little")
    raw += b"".join(s.ljust(8, b"\0") for s in symbols) + bytes(len(s) for s in symbols)
    return SymbolTable(raw.ljust(8 + 256 * 9, b"\0"))


def test_fsst_escapes_and_literal_255() -> None:
    table = _table([b"hello", b" ", b"x"])
    # "hello x" | "\xff\xff" (escaped 255 twice) + "hello" | "" | "A" (escape)
    data = np.frombuffer(bytes([0, 1, 2, 255, 255, 255, 255, 0, 255, 65]), np.uint8)
    offsets = np.array([0, 3, 8, 8, 10], np.int64)
    out, offs = decode(table, data, offsets)
    strings = [out[a:b].tobytes() for a, b in zip(offs[:-1], offs[1:], strict=True)]
    assert strings == [b"hello x", b"\xff\xffhello", b"", b"A"]


def test_fsst_high_entropy_binary_from_pylance(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    values = ["".join(map(chr, rng.integers(0x80, 0x3000, 12))) for _ in range(4000)]
    table = pa.table({"s": pa.array(values), "h": pa.array([v.encode().hex() for v in values])})
    path = str(tmp_path / "f.lance")
    w = lf.LanceFileWriter(path, table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    assert read_table(path).equals(table)


def test_unravel_nested_example() -> None:
    # [[1, 2], [], null, [3]] as list<int32> with null and empty lists
    layers = [Layer.ALL_VALID_ITEM, Layer.NULL_AND_EMPTY_LIST]
    rep = np.array([1, 0, 1, 1, 1], np.uint16)
    defs = np.array([0, 0, 2, 1, 0], np.uint16)
    outs, npos = unravel(rep, defs, layers, 5)
    assert npos == 3
    assert outs[1].offsets is not None and outs[1].offsets.tolist() == [0, 2, 2, 2, 3]
    assert outs[1].validity is not None and outs[1].validity.tolist() == [True, True, False, True]
