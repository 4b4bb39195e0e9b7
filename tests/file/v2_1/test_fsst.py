"""FSST decoding: escapes, literal 255 and pylance's high-entropy binary pages."""

from __future__ import annotations

from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa

from lance_format.file.v2_1.fsst import SymbolTable, decode

from .helpers import read_table


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
