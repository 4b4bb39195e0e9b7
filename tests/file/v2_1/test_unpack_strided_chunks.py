"""Chunk value ranges at equal distances are copied as one strided view: same bytes as slicing."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.file.v2_1.blocks import gather_into, gather_ranges


def _expected(data: np.ndarray, st: np.ndarray, ln: np.ndarray) -> np.ndarray:
    return np.concatenate([data[a : a + b] for a, b in zip(st.tolist(), ln.tolist(), strict=True)])


@pytest.mark.parametrize("last", [24, 10, 0])
@pytest.mark.parametrize("readonly", [False, True])
def test_equal_ranges_copy_like_slices(last: int, readonly: bool) -> None:
    # 9 ranges of 24 bytes every 32 bytes, the last one `last` long and ending at the buffer's end
    n, size, step = 9, 24, 32
    data = np.random.default_rng(1).integers(0, 256, (n - 1) * step + last + 3, dtype=np.uint8)[3:]
    data.flags.writeable = not readonly
    st = np.arange(n, dtype=np.int64) * step
    ln = np.full(n, size, np.int64)
    ln[-1] = last
    assert (gather_ranges(data, st, ln) == _expected(data, st, ln)).all()
    out = np.empty(int(ln.sum()) - 5, np.uint8)
    st2, ln2 = st.copy(), ln.copy()
    st2[0] += 5
    ln2[0] -= 5  # a row range starting inside the first chunk
    gather_into(data, st2, ln2, out)
    assert (out == _expected(data, st2, ln2)).all()


def test_strided_source_still_copies_like_slices() -> None:
    data = np.arange(2000, dtype=np.uint16).view(np.uint8)[::2]  # not contiguous
    st = np.arange(0, 960, 40, dtype=np.int64)
    ln = np.full(len(st), 30, np.int64)
    out = np.empty(int(ln.sum()), np.uint8)
    gather_into(data, st, ln, out)
    assert (out == _expected(data, st, ln)).all()
