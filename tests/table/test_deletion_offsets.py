"""Deleted row offsets are normalised (sorted, distinct, a private copy) before they are written."""

from __future__ import annotations

import numpy as np

from lance_format.table.deletion import sorted_unique


def test_sorted_unique_matches_numpy_and_never_aliases_its_input() -> None:
    rng = np.random.default_rng(2)
    for case in range(200):
        values = rng.integers(0, 60, int(rng.integers(0, 50))).astype(np.uint32)
        if case % 3 == 0:  # already sorted and distinct: the fast path
            values = np.unique(values)
        got = sorted_unique(values)
        assert got.dtype == np.uint32
        assert np.array_equal(got, np.unique(values))
        assert not np.shares_memory(got, values)
