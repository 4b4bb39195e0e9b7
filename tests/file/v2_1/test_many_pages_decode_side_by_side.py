"""A long range over many whole pages decodes its pages side by side: same rows as pylance, errors name the page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader
from lance_format.file.v2_1 import decoder as decoder21

pytestmark = pytest.mark.usefixtures("fresh_caches")
ROWS = 60_000


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    cats = pa.array([f"category_{i:03d}" for i in range(100)])
    words = [None if i % 13 == 5 else "w" * int(rng.integers(0, 30)) for i in range(ROWS)]
    return pa.table({
        "x": pa.array(rng.standard_normal(ROWS)),
        "category": cats.take(pa.array(rng.integers(0, 100, ROWS))),  # dictionary-encoded pages
        "text": pa.array(words, pa.string()),
        "n": pa.array(np.where(np.arange(ROWS) % 17 == 0, None, rng.integers(0, 1 << 20, ROWS))),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(ROWS * 4, dtype=np.float32)), 4),
    })


def _write(path: Path, table: pa.Table, version: str, writer: str) -> None:
    if writer == "pylance":
        from lance.file import LanceFileWriter as Writer
    else:
        from lance_format.file import LanceFileWriter as Writer  # type: ignore[assignment]
    w = Writer(str(path), table.schema, version=version, max_page_bytes=16 * 1024)  # dozens of pages a column
    for batch in table.to_batches(max_chunksize=2_000):  # pages are cut between batches
        w.write_batch(batch)
    w.close()


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("writer", ["pylance", "ours"])
def test_many_whole_pages_read_at_once_match_pylance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    version: str, writer: str) -> None:
    lance_file = pytest.importorskip("lance.file")
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "3")
    table = _table()
    path = tmp_path / "f.lance"
    _write(path, table, version, writer)
    want = lance_file.LanceFileReader(str(path)).read_all().to_table()
    assert want.equals(table)

    decoded: list[int] = []
    real = decoder21.Decoder21._read_and_decode

    def counting(self: decoder21.Decoder21, leaf: object, p: int) -> pa.Array:
        decoded.append(p)
        return real(self, leaf, p)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder21.Decoder21, "_read_and_decode", counting)
    # one range over the whole file, then ranges that start and end inside pages
    got = LanceFileReader(str(path)).read_all(batch_size=ROWS).to_table()
    assert got.equals(want)
    # the pages went through the side-by-side path (pylance's writer cuts fewer, larger pages)
    assert len(decoded) > (100 if writer == "ours" else 2)
    reader = LanceFileReader(str(path))
    for start, n in ((123, 40_000), (20_001, 39_999), (0, ROWS)):
        assert reader.read_range(start, n, batch_size=n).to_table().equals(want.slice(start, n))


def test_a_corrupt_page_among_many_names_its_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_FORMAT_NUM_THREADS", "3")
    table = _table().select(["x", "category"])
    path = tmp_path / "f.lance"
    _write(path, table, "2.2", "ours")
    real = decoder21.Decoder21._decode_layout

    def broken(self: decoder21.Decoder21, leaf: object, page: object, bufs: list[np.ndarray], where: str) -> pa.Array:
        if "page 5" in where:
            raise ValueError("garbage")
        return real(self, leaf, page, bufs, where)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder21.Decoder21, "_decode_layout", broken)
    with pytest.raises(CorruptFileError, match=r"page 5.*malformed page"):
        LanceFileReader(str(path)).read_all(batch_size=ROWS).to_table()
