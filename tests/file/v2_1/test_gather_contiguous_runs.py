"""``gather_ranges`` copies ranges that continue one another as one run (one view when they are
all one run): the bytes equal the ranges' concatenation, the result is read-only; and a 2.2 file
of pylance's read through those paths (a take of adjacent and repeated rows) equals pylance's rows."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.file.v2_1.blocks import gather_ranges


def _expected(data: np.ndarray, starts: list[int], lens: list[int]) -> bytes:
    return b"".join(data[s : s + n].tobytes() for s, n in zip(starts, lens, strict=True))


@pytest.mark.parametrize(("starts", "lens"), [
    ([0, 10, 20], [10, 10, 5]),  # one run
    ([0, 10, 30, 40, 41], [10, 5, 10, 1, 9]),  # two runs and a gap
    ([5, 9, 50, 60, 70, 80], [4, 3, 10, 10, 10, 3]),  # a run, then strided-looking ranges
    ([3, 3, 7], [0, 4, 2]),  # an empty range inside a run
    ([0, 100], [100, 28]),  # the whole buffer
])
def test_adjacent_ranges_come_out_as_their_concatenation(starts: list[int], lens: list[int]) -> None:
    data = np.arange(128, dtype=np.uint8)
    got = gather_ranges(data, np.array(starts, np.int64), np.array(lens, np.int64))
    assert got.tobytes() == _expected(data, starts, lens)
    assert not got.flags.writeable


def test_many_random_runs_equal_the_slices() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 1 << 16, dtype=np.uint8)
    lens = rng.integers(0, 40, 500)
    gaps = rng.integers(0, 3, 500) * rng.integers(0, 2, 500)  # about half the ranges touch the previous
    starts = np.cumsum(np.concatenate([[0], (lens + gaps)[:-1]]))
    got = gather_ranges(data, starts, lens)
    assert got.tobytes() == _expected(data, starts.tolist(), lens.tolist())


def test_takes_of_adjacent_and_repeated_rows_equal_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "d.lance")
    n = 5000
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "s": pa.array([None if i % 9 == 0 else f"v{i % 311}-{i}" for i in range(n)]),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(n * 3, dtype=np.float32)), 3),
    })
    lance.write_dataset(table, uri, max_rows_per_file=1200, data_storage_version="2.2")
    lance.dataset(uri).delete("id % 13 = 0")
    rows = [7, 8, 9, 10, 10, 3, 1500, 1499, 1501, 4000, 9, 4001]
    assert lf.dataset(uri).take(rows).equals(lance.dataset(uri).take(rows))
