"""The encoder's rotation (one matrix product with the rotated identity) is pylance's fast rotation
(the butterflies of :func:`rabitq.rotate`) to float32 rounding, for power-of-two dimensions and for
the others (halves mixed every round), and the sign codes of residuals agree but for values
within rounding of zero."""

from __future__ import annotations

import numpy as np
import pytest

from lance_format.index.vector import rabitq


@pytest.mark.parametrize("dim", [8, 24, 72, 96, 128, 200, 256])
def test_matrix_rotation_is_the_fast_rotation(dim: int) -> None:
    rng = np.random.default_rng(dim)
    model = rabitq.new_model(dim, 5, seed=dim)
    x = (rng.standard_normal((3000, dim)) * rng.uniform(0.1, 10, (3000, 1))).astype(np.float32)
    fast, matrix = rabitq.rotate(x, model.signs), rabitq.rotate_rows(x, model.signs)
    assert matrix.dtype == np.float32 and matrix.shape == x.shape
    scale = np.abs(fast).max(axis=1, keepdims=True)
    assert np.abs(matrix - fast).max() <= 1e-5 * scale.max()
    assert (np.abs(matrix - fast) <= 1e-5 * scale).all()
    # a rotation keeps norms
    assert np.allclose(np.linalg.norm(matrix, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)
    flips = np.signbit(matrix) != np.signbit(fast)
    assert (np.abs(fast[flips]) <= 1e-5 * np.broadcast_to(scale, fast.shape)[flips]).all()
