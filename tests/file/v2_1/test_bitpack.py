"""FastLanes bit-packing: round trips and lance's bit order."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.file.v2_1 import bitpack


@pytest.mark.parametrize("t", [8, 16, 32, 64])
def test_fastlanes_roundtrip(t: int) -> None:
    rng = np.random.default_rng(t)
    for w in range(t + 1):
        mask = (1 << w) - 1 if w < 64 else (1 << 64) - 1
        v = (rng.integers(0, 2**63, 2048, dtype=np.uint64) & np.uint64(mask)).astype(bitpack.uint_dtype(t))
        packed = bitpack.pack_blocks(v, w, t)
        assert len(packed) == 2 * 1024 * w // t
        if w:
            assert (bitpack.unpack_blocks(packed, w, t) == v).all()


def test_fastlanes_matches_lance_bit_order() -> None:
    # pylance 14.0.2 writes these def bytes for a nullable float64 chunk with a null at rows 3, 8, 13, ...
    # (u16 levels, width 1, FastLanes order of lance's rust/compression/bitpacking): 42 08 10 42
    v = np.zeros(1024, np.uint16)
    v[3::5] = 1
    assert bitpack.pack_blocks(v, 1, 16).view(np.uint8)[:4].tobytes() == bytes([0x42, 0x08, 0x10, 0x42])
