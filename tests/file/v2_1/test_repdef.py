"""Repetition/definition levels unravel into Arrow validity and offsets."""

from __future__ import annotations

import numpy as np

from lance_format.file.v2_1.repdef import Layer, unravel


def test_unravel_nested_example() -> None:
    # [[1, 2], [], null, [3]] as list<int32> with null and empty lists
    layers = [Layer.ALL_VALID_ITEM, Layer.NULL_AND_EMPTY_LIST]
    rep = np.array([1, 0, 1, 1, 1], np.uint16)
    defs = np.array([0, 0, 2, 1, 0], np.uint16)
    outs, npos = unravel(rep, defs, layers, 5)
    assert npos == 3
    assert outs[1].offsets is not None and outs[1].offsets.tolist() == [0, 2, 2, 2, 3]
    assert outs[1].validity is not None and outs[1].validity.tolist() == [True, True, False, True]
