"""A small 2.1/2.2 file read whole fetches every column's page in one request and reads what
pylance reads; a page buffer outside the file is still refused naming the file."""

from __future__ import annotations

import struct
from pathlib import Path

import lance.file as plf
import numpy as np
import pyarrow as pa
import pytest

from lance_format import io_stats
from lance_format._pb import file2_pb2
from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader
from lance_format.file.container import FOOTER_SIZE


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "cat": pa.array([f"c{i % 5}" for i in range(n)]),
        "text": pa.array([f"w{i % 97} v{i % 13} u{i}" for i in range(n)]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
    })


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_whole_small_file_reads_as_pylance_in_one_request(tmp_path: Path, version: str) -> None:
    table = _table(3000)
    path = tmp_path / f"f{version}.lance"
    w = plf.LanceFileWriter(str(path), table.schema, version=version)
    w.write_batch(table)
    w.close()
    expected = plf.LanceFileReader(str(path)).read_all().to_table()
    reader = LanceFileReader(str(path))
    root = reader._source.store.root  # type: ignore[attr-defined]
    before = io_stats.totals(root)[0]
    got = reader.read_all().to_table()
    requests = io_stats.totals(root)[0] - before
    assert got.equals(expected)
    assert requests == 1  # one page per column, all read together
    # a range inside the pages still reads and matches
    part = LanceFileReader(str(path), columns=["text", "id"]).read_range(100, 50).to_table()
    assert part.equals(expected.select(["text", "id"]).slice(100, 50))


def test_page_buffer_outside_the_file_is_refused(tmp_path: Path) -> None:
    table = _table(2000)
    path = tmp_path / "bad.lance"
    w = plf.LanceFileWriter(str(path), table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    data = bytearray(path.read_bytes())
    _cm, _cmo, gbo_start, _ngb, n_cols, *_ = struct.unpack("<QQQIIHH4s", data[-FOOTER_SIZE:])
    cmo_start = gbo_start - 16 * n_cols
    for ci in range(n_cols):  # a page size claim of the same encoded length, reaching past the end
        pos, size = struct.unpack_from("<QQ", data, cmo_start + 16 * ci)
        cm = file2_pb2.ColumnMetadata.FromString(bytes(data[pos : pos + size]))
        sizes = cm.pages[0].buffer_sizes
        wide = [b for b in range(len(sizes)) if (1 << (7 * len(_varint(sizes[b])))) - 1 > len(data)]
        if wide:
            sizes[wide[0]] = (1 << (7 * len(_varint(sizes[wide[0]])))) - 1
            raw = cm.SerializeToString()
            assert len(raw) == size
            data[pos : pos + size] = raw
            break
    else:
        pytest.skip("no page size wide enough to reach past the file")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="bad.lance"):
        LanceFileReader(str(path)).read_all().to_table()


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)
