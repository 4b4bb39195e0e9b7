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
