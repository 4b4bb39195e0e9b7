"""The query's lookup table of IVF_RQ sign codes is built and quantized the way pylance's is.

On one of ~60 random pylance builds of a 200-d cosine 5-bit index, an entry of the quantized
table landed on x.5: pylance's table rounds it up (Rust's ``round``) and sums subsets in its own
order, and ~7% of the rows (those with that nibble in that group) scored ~1e-3 apart from
pylance's ``_distance`` (``tests/index/test_rq_warm_scoring_equal.py`` failed then). Both
details are pinned here on constructed values.
"""

from __future__ import annotations

import numpy as np

from lance_format.index.vector import rabitq


def test_an_entry_on_a_half_rounds_up_as_rust_round_does() -> None:
    table = np.zeros((2, 16), np.float32)
    table[0, 1] = 510.0  # range 0..510: each unit is half a quantization step
    table[0, 2] = 193.0  # 96.5 steps: numpy's rint gives 96, Rust's round 97
    table[0, 3] = 191.0  # 95.5 steps: 96 both ways
    quant, qmin, span = rabitq._quantized(table)
    assert (quant[0, 1], quant[0, 2], quant[0, 3]) == (255.0, 97.0, 96.0)
    assert qmin == 0.0 and span == 510.0


def test_a_flat_table_quantizes_to_zeros() -> None:
    quant, _, span = rabitq._quantized(np.full((3, 16), 0.25, np.float32))
    assert span == 0.0 and not quant.any()


def test_subset_sums_add_each_entry_s_lowest_value_last() -> None:
    # entry 13 = values 0, 2 and 3: (v3 + v2) + v0 in float32, which differs from v0 + v2 + v3
    # left to right when the first two cancel beyond float32's precision
    q = np.array([1e8, 5.0, -1e8, 1.0], np.float32)
    table = rabitq._subset_sums(q)
    assert table.shape == (1, 16) and table.dtype == np.float32
    assert table[0, 13] == np.float32(np.float32(np.float32(1.0) + np.float32(-1e8)) + np.float32(1e8))
    assert table[0, 13] != np.float32(np.float32(np.float32(1e8) + np.float32(-1e8)) + np.float32(1.0))
    for j in range(16):  # every entry is the sum of its subset (exactly, on small whole numbers)
        small = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
        assert rabitq._subset_sums(small)[0, j] == float(j)
