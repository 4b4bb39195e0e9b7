"""Audit of issue 5 (2.1/2.2): lance-encoding:* honoured as pylance sees it, versions, bad data files."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as TheirReader

import lance_format as lf
from lance_format.errors import LanceError
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


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_data_storage_version_recorded_everywhere(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array(range(100), pa.int64()), "s": [str(i) for i in range(100)]})
    lf.write_dataset(t, uri, data_storage_version=version, max_rows_per_file=40)  # type: ignore[arg-type]
    lf.write_dataset(t, uri, mode="append")  # append keeps the dataset's version
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == version == lf.dataset(uri).data_storage_version
    major, minor = map(int, version.split("."))
    for frag in theirs.get_fragments():
        for df in frag.metadata.files:
            assert (df.file_major_version, df.file_minor_version) == (major, minor)
    assert theirs.to_table().equals(pa.concat_tables([t, t]))
    # pylance appends to our dataset and we read both
    lance.write_dataset(t.slice(0, 5), uri, mode="append")
    assert lf.dataset(uri).to_table().equals(lance.dataset(uri).to_table())


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("damage", ["truncate", "zero_middle"])
def test_damaged_data_file_in_dataset_is_a_lance_error(tmp_path: Path, version: str, damage: str) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array(_RNG.integers(0, 1 << 40, 5000)), "s": [f"s{i % 7}" * 3 for i in range(5000)]})
    lance.write_dataset(t, uri, data_storage_version=version)
    path = next((Path(uri) / "data").glob("*.lance"))
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        mid = len(data) // 4
        path.write_bytes(data[:mid] + b"\xff" * 512 + data[mid + 512:])
    ds = lf.dataset(uri)
    try:
        got = ds.to_table()
    except LanceError as exc:
        assert path.name in str(exc)
    else:  # flipping value bytes may still decode; then the schema must hold
        assert got.schema == t.schema and got.num_rows == 5000
