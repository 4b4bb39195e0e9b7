"""The table-driven FastLanes unpack used for small inputs equals the per-row loop."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.file.v2_1 import bitpack


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_gather_unpack_matches_loop_for_every_width(t: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(t)
    for width in range(1, t):
        for blocks in (1, 3):
            values = rng.integers(0, 2**width, blocks * 1024, dtype=np.uint64).astype(bitpack.uint_dtype(t))
            packed = bitpack.pack_blocks(values, width, t)
            fast = bitpack.unpack_blocks(packed, width, t)
            monkeypatch.setattr(bitpack, "_SMALL_BLOCKS", 0)
            slow = bitpack.unpack_blocks(packed, width, t)
            monkeypatch.undo()
            assert np.array_equal(fast, values), (t, width, blocks)
            assert np.array_equal(slow, values), (t, width, blocks)


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_small_pack_is_byte_identical_to_loop(t: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(100 + t)
    for width in range(1, t):
        for blocks in (1, 4):
            values = rng.integers(0, 2**width, blocks * 1024, dtype=np.uint64).astype(bitpack.uint_dtype(t))
            fast = bitpack.pack_blocks(values, width, t)
            monkeypatch.setattr(bitpack, "_SMALL_BLOCKS", 0)
            slow = bitpack.pack_blocks(values, width, t)
            monkeypatch.undo()
            assert np.array_equal(fast, slow), (t, width, blocks)
