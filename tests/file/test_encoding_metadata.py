"""lance-encoding:* field metadata is honoured as pylance sees it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as TheirReader

from lance_format.file import LanceFileReader, LanceFileWriter

N = 20_000


_RNG = np.random.default_rng(0)


COLUMNS = {
    "ints": pa.array(_RNG.integers(0, 1000, N)),
    "floats": pa.array(_RNG.random(N)),
    "unique_strings": pa.array([f"u{i}" for i in range(N)]),
    "long_strings": pa.array([("x" * 300) + str(i) for i in range(N)]),
    "lists": pa.array([[1, 2, 3]] * N, pa.list_(pa.int32())),
    "dict_strings": pa.array([f"value-{i % 50}-xxxxxxxxxxxxxxxx" for i in range(N)]),
}


META = {
    "zstd": ({"lance-encoding:compression": "zstd"}, "CompressionAlgorithmZstd"),
    "lz4": ({"lance-encoding:compression": "lz4"}, "CompressionAlgorithmLz4"),
    "fullzip": ({"lance-encoding:structural-encoding": "fullzip"}, "FullZipLayout"),
    "miniblock": ({"lance-encoding:structural-encoding": "miniblock"}, "MiniBlockLayout"),
}


def _cases() -> list[object]:
    out: list[object] = []
    for key in META:
        for version in ("2.1", "2.2"):
            for col in COLUMNS:
                out.append(pytest.param(key, version, col, id=f"{key}-{version}-{col}"))
    return out


@pytest.mark.parametrize(("key", "version", "col"), _cases())
def test_encoding_metadata_is_honoured(tmp_path: Path, key: str, version: str, col: str) -> None:
    meta, needle = META[key]
    arr = COLUMNS[col]
    table = pa.table([arr], schema=pa.schema([pa.field(col, arr.type, metadata=meta)]))
    path = str(tmp_path / "f.lance")
    with LanceFileWriter(path, table.schema, version=version) as w:
        w.write_batch(table)
    theirs = TheirReader(path)
    assert theirs.read_all().to_table().column(0).equals(table.column(0))
    pages = [str(p.encoding) for c in theirs.metadata().columns for p in c.pages]
    assert pages and all(needle in p for p in pages), pages[0][:400]
    assert LanceFileReader(path).read_all().to_table().column(0).equals(table.column(0))
