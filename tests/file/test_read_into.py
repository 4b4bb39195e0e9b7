"""ByteSource.read_into: ranges land at their places in one buffer, whatever their layout or store."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from lance_format.errors import CorruptFileError
from lance_format.file.bytesource import ByteSource, pooled_bytes
from lance_format.storage import open_store


def _check(source: ByteSource, payload: bytes, starts: list[int], lengths: list[int]) -> None:
    lens = np.asarray(lengths, dtype=np.int64)
    dest_pos = np.zeros(lens.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=dest_pos[1:])
    dest = pooled_bytes(int(lens.sum()))
    source.read_into(np.asarray(starts), lens, dest, dest_pos)
    want = b"".join(payload[s : s + n] for s, n in zip(starts, lengths, strict=True))
    assert bytes(dest) == want


@pytest.mark.parametrize("count", [10, 1_500])  # 1,500 close ranges need more iovecs than one preadv takes
def test_close_far_overlapping_and_unsorted_ranges(tmp_path: Path, count: int) -> None:
    payload = os.urandom(count * 700 + 5_000)
    (tmp_path / "f.bin").write_bytes(payload)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    rng = np.random.default_rng(5)
    starts = (rng.permutation(count) * 700 + rng.integers(0, 100, count)).tolist()
    lengths = rng.integers(0, 600, count).tolist()
    starts += [10, 12, 4_990 + count * 700 - 5_000]  # overlapping pair, a far one
    lengths += [30, 5, 5_000]
    _check(source, payload, starts, lengths)
    source.close()


def test_ranges_in_the_cached_tail_and_other_stores(tmp_path: Path) -> None:
    payload = os.urandom(200_000)
    (tmp_path / "f.bin").write_bytes(payload)
    local = ByteSource(open_store(str(tmp_path)), "f.bin")
    local.prefetch_tail(64 * 1024)
    _check(local, payload, [199_000, 100, 150_000, 120_000], [1_000, 50, 40_000, 10])
    local.close()
    memory = open_store("memory://read_into")
    memory.write("f.bin", payload)
    remote = ByteSource(memory, "f.bin")
    _check(remote, payload, [5, 100_000, 3], [10, 7, 1])


def test_ranges_outside_the_file_raise(tmp_path: Path) -> None:
    (tmp_path / "f.bin").write_bytes(b"x" * 100)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    dest = np.zeros(20, np.uint8)
    with pytest.raises(CorruptFileError, match="f.bin"):
        source.read_into(np.array([90]), np.array([20]), dest, np.array([0]))
    source.close()


@pytest.mark.parametrize(("length", "step"), [(10_000, 15_000), (100, 10_000)])  # dense window, sparse take
def test_many_separate_requests_land_in_place(tmp_path: Path, length: int, step: int) -> None:
    # gaps wider than the merge gap: one request per range, 100 of them (the kernel is told
    # about one span when they cover most of it, else about each request)
    payload = os.urandom(100 * step + 1_000)
    (tmp_path / "f.bin").write_bytes(payload)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    starts = [i * step + 7 for i in range(100)]
    _check(source, payload, starts[::-1], [length] * 100)
    source.close()
