"""Takes read single values out of mini-block chunks: many aligned words are gathered whole,
with the same bytes as the byte-by-byte gather (unaligned, few, or odd widths), and a take of
many scattered rows returns pylance's values on 2.1 and 2.2 files."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.file.v2_1 import chunkrows


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("count", [3, 16, 500])
def test_word_gather_returns_the_bytes_at_every_address(width: int, aligned: bool, count: int) -> None:
    rng = np.random.default_rng(width * 100 + count)
    data = rng.integers(0, 256, 10_003, dtype=np.uint8)
    addr = rng.integers(0, (data.size - width) // width, count).astype(np.int64) * width
    if not aligned:
        addr[count // 2] += 1
    want = np.stack([data[a : a + width] for a in addr.tolist()])
    got = chunkrows._words(data, addr, width)
    assert got.shape == want.shape and np.array_equal(got, want)
    strided = np.repeat(data, 2)[::2]  # the same bytes, not contiguous
    assert np.array_equal(chunkrows._words(strided, addr, width), want)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_scattered_take_equals_pylance(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "t.lance")
    n = 60_000
    rng = np.random.default_rng(5)
    table = pa.table({"a": pa.array(rng.integers(-(1 << 40), 1 << 40, n)),
                      "b": pa.array(rng.integers(0, 1000, n).astype(np.int32)),
                      "c": pa.array(rng.integers(0, 200, n).astype(np.uint16)),
                      "f": pa.array(rng.random(n))})
    lance.write_dataset(table, uri, data_storage_version=version)
    rows = np.sort(rng.choice(n, 3000, replace=False))
    assert lance_format.dataset(uri).take(rows).to_pydict() == lance.dataset(uri).take(rows).to_pydict()
