"""How many IVF partitions a query probes first when it does not fix ``nprobes``.

pylance 14.0.2 calls this mode *Auto* (``rust/lance/src/io/exec/knn/adaptive_probe.rs`` in its
build; the public d2039d75 tree predates it and only has the ``early_pruning`` factors of
``knn.rs``). Its rule, measured on pylance's ``partitions_searched`` metric (``analyze_plan``)
for l2 / cosine / dot, 16 to 400 partitions, dimensions 8 to 128, k from 1 to 3,000, with and
without ``minimum_nprobes`` / ``maximum_nprobes`` / ``search_effort``, and confirmed by its
``LANCE_AUTO_PROBE_MARGIN`` / ``LANCE_AUTO_MIN_INITIAL_NPROBES`` /
``LANCE_AUTO_MAX_INITIAL_NPROBES`` overrides, which this module honours too:

1. Rank the partitions by centroid distance ``d`` (the index's ranking units: squared l2, l2
   of the normalized query for cosine, ``1 - q·c`` for dot).
2. *Close* partitions are those within a relative margin of the nearest one:
   ``d ≤ d₀ + margin · s`` with ``s = |d₀|`` (l2, cosine) or the best dot product ``|1 - d₀|``.
3. The Auto count is the number of close partitions, clamped to ``[min_initial, max_initial]``,
   then to the caller's ``[minimum_nprobes, maximum_nprobes]`` and the partition count.
   ``margin``, ``min_initial`` and ``max_initial`` come from a table per metric and k bucket
   (k ≤ 1, 10, 100, 200, 500, 1000, more): :data:`RULES`.
4. ``search_effort`` (default 0.5 = Auto) moves the start geometrically: from the caller's
   minimum at 0 through the Auto count at 0.5 to every allowed partition at 1, rounded up.

After that first round the search widens (in rank order) only while fewer than k candidates
were found (:func:`lance_format.index.vector.search.search_segment`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Upper ends of the k buckets of :data:`RULES` (the last bucket holds every larger k).
K_BUCKETS = (1, 10, 100, 200, 500, 1000)
_ALL = 1 << 30  # no cap (pylance's value is above every partition count we could observe)


@dataclass(frozen=True)
class AutoRule:
    """One row of the Auto table: the margin and the clamp of the first round."""

    margin: float
    min_initial: int
    max_initial: int


def _rules(rows: list[tuple[float, int, int]]) -> tuple[AutoRule, ...]:
    return tuple(AutoRule(*r) for r in rows)


#: Per metric, one rule per k bucket (:data:`K_BUCKETS`, then k > 1000). Margins are the
#: midpoints of the intervals the measurements allow (each narrower than 0.001 for k ≤ 100).
RULES: dict[str, tuple[AutoRule, ...]] = {
    "l2": _rules([(0.2174, 5, 19), (0.265, 6, 24), (0.33, 11, 38), (0.375, 15, 56), (0.373, 22, 81),
                  (0.417, 29, 93), (0.570, 98, 238)]),
    "cosine": _rules([(0.235, 3, 50), (0.2875, 8, 77), (0.38, 7, 106), (0.415, 18, 156), (0.45, 28, 192),
                      (0.47, 34, 248), (0.65, 104, _ALL)]),
    "dot": _rules([(0.14, 56, 112), (0.05, 144, _ALL), (0.06, 200, _ALL), (0.07, 211, _ALL), (0.07, 244, _ALL),
                   (0.07, 279, _ALL), (0.1, _ALL, _ALL)]),
}
#: Hamming was not measured; it ranks partitions by bit counts like l2 ranks squared distances.
RULES["hamming"] = RULES["l2"]


def auto_rule(metric: str, k: int) -> AutoRule:
    """The Auto rule for ``metric`` and ``k``, with the ``LANCE_AUTO_*`` overrides pylance reads."""
    bucket = next((i for i, b in enumerate(K_BUCKETS) if k <= b), len(K_BUCKETS))
    rule = RULES.get(metric, RULES["l2"])[bucket]
    margin = _env_float("LANCE_AUTO_PROBE_MARGIN", rule.margin)
    lo = _env_int("LANCE_AUTO_MIN_INITIAL_NPROBES", rule.min_initial)
    hi = _env_int("LANCE_AUTO_MAX_INITIAL_NPROBES", rule.max_initial)
    return AutoRule(margin, lo, hi)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return default if raw is None else float(raw)
    except ValueError:
        return default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    try:
        return default if raw is None else int(raw)
    except ValueError:
        return default


def close_partitions(metric: str, sorted_dists: npt.NDArray[np.floating], margin: float) -> int:
    """How many of the ranked partitions lie within ``margin`` of the nearest (step 2 above)."""
    if sorted_dists.size == 0:
        return 0
    d0 = float(sorted_dists[0])
    if not math.isfinite(d0):
        return int(sorted_dists.size)
    scale = abs(1.0 - d0) if metric == "dot" else abs(d0)
    # The bound is a float32 in pylance; comparing in float32 keeps ties at the edge the same.
    bound = np.float32(d0 + margin * scale)
    return int(np.searchsorted(sorted_dists.astype(np.float32, copy=False), bound, side="right"))


def initial_probes(metric: str, k: int, sorted_dists: npt.NDArray[np.floating], minimum: int,
                   maximum: int | None, effort: float | None) -> int:
    """Partitions the first round probes when ``nprobes`` is not given.

    Args:
        metric: The index's metric.
        k: Candidates wanted from the segment (``k × refine_factor``).
        sorted_dists: Centroid distances of every partition, nearest first.
        minimum: The caller's ``minimum_nprobes`` (1 when not given).
        maximum: The caller's ``maximum_nprobes`` (``None``: every partition).
        effort: ``search_effort`` in ``[0, 1]`` (``None``: 0.5, Auto).
    """
    parts = int(sorted_dists.size)
    if parts == 0:
        return 0
    top = parts if maximum is None else max(1, min(maximum, parts))
    low = max(1, min(minimum, top))
    rule = auto_rule(metric, k)
    auto = min(max(close_partitions(metric, sorted_dists, rule.margin), rule.min_initial), rule.max_initial)
    auto = min(max(auto, low), top)
    e = 0.5 if effort is None else float(effort)
    if e == 0.5:
        return auto
    if e < 0.5:
        n = low * (auto / low) ** (e / 0.5)
    else:
        n = auto * (top / auto) ** ((e - 0.5) / 0.5)
    # Rounded up, as pylance does; the epsilon keeps exact powers (e.g. 64 ** 0.5) from rounding up.
    return min(top, max(low, math.ceil(float(n) - 1e-9)))
