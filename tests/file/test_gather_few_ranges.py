"""A gather of a few ranges (a take of a few rows) plans its reads in plain integers: the same
merged reads and positions as the vectorised plan, the bytes of every range, and the same error
for a range outside the file."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from lance_format.errors import CorruptFileError
from lance_format.file import bytesource
from lance_format.file.container import ByteSource
from lance_format.storage import open_store


def _cases(size: int) -> list[tuple[np.ndarray, np.ndarray | int]]:
    rng = np.random.default_rng(11)
    out: list[tuple[np.ndarray, np.ndarray | int]] = [
        (np.array([5000, 10, 10, 9000 + 4096]), np.array([7, 0, 30, 3])),  # unsorted, equal starts
        (np.array([0, 4096 + 8, 4096 + 9]), 8),  # a gap of exactly the merge distance, a scalar length
        (np.array([100, 50]), np.array([400, 10])),  # one range inside another
        (np.array([size - 1]), 1),
    ]
    for _ in range(40):
        n = int(rng.integers(1, bytesource._FEW_RANGES + 1))
        starts = rng.integers(0, size - 300, n)
        if rng.random() < 0.3:
            starts = np.sort(starts)
        out.append((starts, rng.integers(0, 300, n)))
    return out


def test_few_ranges_read_the_same_blocks_and_bytes_as_the_vectorised_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = os.urandom(200_000)
    (tmp_path / "f.bin").write_bytes(payload)
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    reads: list[list[tuple[int, int, int]]] = []
    real = ByteSource._pread_blocks

    def spy(self: ByteSource, fd: int, blob: np.ndarray, blocks: list[tuple[int, int, int]], tail: int) -> None:
        reads.append(list(blocks))
        real(self, fd, blob, blocks, tail)

    monkeypatch.setattr(ByteSource, "_pread_blocks", spy)
    for starts, lengths in _cases(len(payload)):
        few_blob, few_pos = source.gather(starts, lengths)
        monkeypatch.setattr(bytesource, "_FEW_RANGES", 0)
        blob, pos = source.gather(starts, lengths)
        monkeypatch.setattr(bytesource, "_FEW_RANGES", 16)
        assert reads[-2] == reads[-1]
        assert few_pos.tolist() == pos.tolist() and few_pos.dtype == pos.dtype
        lens = np.broadcast_to(lengths, starts.shape)
        for s, n, p in zip(starts.tolist(), lens.tolist(), few_pos.tolist(), strict=True):
            assert bytes(few_blob[p : p + n]) == payload[s : s + n]
        assert bytes(few_blob) == bytes(blob)
    source.close()


@pytest.mark.parametrize(("starts", "lengths"), [([-1], 4), ([10, 199_999], [1, 2]), ([5], [-1])])
def test_a_range_outside_the_file_is_refused(tmp_path: Path, starts: list[int], lengths: object) -> None:
    (tmp_path / "f.bin").write_bytes(os.urandom(200_000))
    source = ByteSource(open_store(str(tmp_path)), "f.bin")
    with pytest.raises(CorruptFileError, match="outside the file"):
        source.gather(np.array(starts), lengths)  # type: ignore[arg-type]
    source.close()
