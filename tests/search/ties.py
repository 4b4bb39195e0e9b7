"""Ties in search results compared with pylance's.

Quantised codes (PQ, SQ) give rows exactly equal distances, and each engine keeps tied rows in
its own search order (and cuts a tie at k differently), so comparisons group ranks by distance.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def tie_groups(dist: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Per rank, the index of its tie group: consecutive ranks whose distances differ by at most
    1e-5 relative share one."""
    steps = np.abs(np.diff(dist)) > 1e-5 * (1 + np.abs(dist[1:]))
    return np.concatenate([[0], np.cumsum(steps)]).astype(np.int64)


def assert_same_answers(theirs: tuple[list[int], list[float]], ours: tuple[list[int], list[float]]) -> None:
    """Two engines' ``(ids, distances)`` for one query: rank by rank the same distances, and the
    same rows in every tie group but the last (which k cuts)."""
    assert len(ours[0]) == len(theirs[0])
    if not theirs[0]:
        return
    d = np.asarray(theirs[1])
    np.testing.assert_allclose(ours[1], d, rtol=1e-5, atol=1e-5)
    groups = tie_groups(d)
    ids_t, ids_o = np.asarray(theirs[0]), np.asarray(ours[0])
    for g in range(int(groups[-1])):
        assert set(ids_o[groups == g].tolist()) == set(ids_t[groups == g].tolist())
