"""Container layout of 2.x files: footer, offset tables, alignment, versions, ByteSource."""

from __future__ import annotations

import struct
from pathlib import Path

import lance.file
import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError, UnsupportedVersionError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.file.container import (
    FOOTER_SIZE,
    ByteSource,
    normalize_version,
    parse_version_string,
    read_file_metadata,
)
from lance_format.storage import open_store


def _write(path: Path, table: pa.Table, **kw: object) -> LanceFileWriter:
    with LanceFileWriter(str(path), table.schema, **kw) as w:
        w.write_batch(table)
    return w


def test_layout_matches_spec(tmp_path: Path) -> None:
    t = pa.table({"a": pa.array(range(1000), pa.int64()), "s": pa.array([f"v{i}" for i in range(1000)])})
    w = _write(tmp_path / "f.lance", t)
    data = (tmp_path / "f.lance").read_bytes()
    assert len(data) == w.file_size
    cm_start, cmo, gbo, n_gb, n_cols, major, minor, magic = struct.unpack("<QQQIIHH4s", data[-FOOTER_SIZE:])
    assert (major, minor, magic, n_gb, n_cols) == (0, 3, b"LANC", 1, 2)
    assert cmo + 16 * n_cols == gbo and gbo + 16 == len(data) - FOOTER_SIZE
    gb0_pos, gb0_size = struct.unpack_from("<QQ", data, gbo)
    assert gb0_pos % 64 == 0 and gb0_pos + gb0_size == cm_start
    meta = read_file_metadata(ByteSource(open_store(str(tmp_path)), "f.lance"))
    assert meta.version == (2, 0) and meta.footer_version == (0, 3) and meta.num_rows == 1000
    for col in meta.columns:
        for page in col.pages:
            for off, size in zip(page.buffer_offsets, page.buffer_sizes, strict=True):
                assert off % 64 == 0
                pad_end = -(-(off + size) // 64) * 64
                assert set(data[off + size : pad_end]) <= {0x48}
    assert w.file_version == (2, 0)


def test_version_mapping() -> None:
    assert normalize_version(0, 3, "f") == (2, 0)
    assert normalize_version(2, 0, "f") == (2, 0)
    assert normalize_version(2, 1, "f") == (2, 1)
    assert normalize_version(2, 2, "f") == (2, 2)
    with pytest.raises(UnsupportedVersionError, match="legacy"):
        normalize_version(0, 2, "f")
    with pytest.raises(UnsupportedVersionError, match="9.9"):
        normalize_version(9, 9, "f")
    assert parse_version_string("2.0") == (2, 0) and parse_version_string("stable") == (2, 2)
    with pytest.raises(UnsupportedVersionError):
        parse_version_string("3.0")


def test_2x_file_relabelled_legacy_is_corrupt_not_misread(tmp_path: Path) -> None:
    """A 2.0 file whose footer claims 0.2 is parsed as legacy and fails cleanly, naming the file."""
    t = pa.table({"a": [1, 2, 3]})
    path = tmp_path / "legacy.lance"
    with lance.file.LanceFileWriter(str(path), t.schema, version="2.0") as w:
        w.write_batch(t)
    data = bytearray(path.read_bytes())
    data[-8:-4] = struct.pack("<HH", 0, 2)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="legacy.lance"):
        LanceFileReader(str(path)).read_all().to_table()


def test_byte_source_gather(tmp_path: Path) -> None:
    blob = np.arange(100_000, dtype=np.uint32).tobytes()
    (tmp_path / "b").write_bytes(blob)
    src = ByteSource(open_store(str(tmp_path)), "b")
    starts = np.array([400, 0, 399_000, 4, 200_000], dtype=np.int64)
    data, pos = src.gather(starts, 4)
    for s, p in zip(starts, pos, strict=True):
        assert bytes(data[p : p + 4]) == blob[s : s + 4]
    with pytest.raises(CorruptFileError):
        src.gather(np.array([len(blob) - 2]), 4)
    ranges = src.read_ranges([(8, 4), (0, 4), (10_000, 8)])
    assert [bytes(r) for r in ranges] == [blob[8:12], blob[0:4], blob[10_000:10_008]]
    src.close()


def test_global_buffer_and_metadata(tmp_path: Path) -> None:
    t = pa.table({"a": [1, 2]})
    path = tmp_path / "m.lance"
    with LanceFileWriter(str(path), t.schema) as w:
        w.write_batch(t)
        w.add_schema_metadata("k", "v")
    r = LanceFileReader(str(path))
    assert r.schema.metadata == {b"k": b"v"}
    assert lance.file.LanceFileReader(str(path)).metadata().num_rows == 2
    gb0 = r.read_global_buffer(0)
    assert len(gb0) == r.metadata().global_buffers[0][1]
