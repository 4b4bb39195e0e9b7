"""The ``nearest=`` argument of a scan, checked as pylance 14.0.2 checks it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import numbers
from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index.vector.distance import Metric, metric_name
from lance_format.index.vector.search import Probe
from lance_format.search import multivector

_KEYS = {"column", "q", "k", "nprobes", "minimum_nprobes", "maximum_nprobes", "refine_factor", "metric", "ef",
         "use_index", "distance_range", "query_parallelism", "approx_mode", "search_effort"}
_FLOATS = (pa.float16(), pa.float32(), pa.float64())
#: The distance column of a search's result.
DISTANCE = "_distance"


@dataclass(frozen=True)
class NearestQuery:
    """A validated ``nearest=`` argument."""

    column: str
    q: npt.NDArray[Any]
    k: int
    metric: Metric | None
    probe: Probe
    refine_factor: int | None
    use_index: bool
    ef: int | None
    distance_range: tuple[float | None, float | None]
    #: A multivector column: ``q`` holds ``[m, dim]`` query vectors (:mod:`.multivector`).
    multi: bool = False


def _int(d: Mapping[str, Any], key: str, minimum: int) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise InvalidInputError(f"nearest[{key!r}] must be an integer, got {v!r}")
    if int(v) < minimum:
        raise InvalidInputError(f"nearest[{key!r}] must be >= {minimum}, got {v}")
    return int(v)


def _effort(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(v)) or not 0.0 <= float(v) <= 1.0:
        raise InvalidInputError(f"nearest['search_effort'] must be finite and in [0, 1], got {v!r}")
    return float(v)


def parse_nearest(nearest: Mapping[str, Any], schema: pa.Schema) -> NearestQuery:
    """Check ``nearest=`` as pylance's ``_build_vector_search_query`` does.

    Raises:
        InvalidInputError: unknown keys, a missing or non-vector column, a query of another
            dimension, ``k``/``nprobes``/``refine_factor``/``ef`` out of range.
        NotSupportedError: batch queries, unsupported element types.
    """
    if not isinstance(nearest, Mapping):
        raise InvalidInputError(f"nearest= must be a dict, got {type(nearest).__name__}")
    unknown = sorted(set(nearest) - _KEYS)
    if unknown:
        raise InvalidInputError(f"nearest= has unknown key(s) {unknown} (accepted: {sorted(_KEYS)})")
    column = nearest.get("column")
    if not isinstance(column, str) or column not in schema.names:
        raise InvalidInputError(f"nearest column {column!r} is not in the dataset (columns: {schema.names})")
    typ = schema.field(column).type
    multi = multivector.is_multivector(typ)
    if multi:
        typ = typ.value_type  # the vectors inside each row
    elif not pa.types.is_fixed_size_list(typ):
        raise InvalidInputError(f"nearest column {column!r} must be a vector (fixed_size_list), got {typ}")
    elem, dim = typ.value_type, typ.list_size
    if elem not in _FLOATS and elem != pa.uint8():
        raise NotSupportedError(f"nearest= on {column!r}: vectors of {elem} are not supported "
                                "(float16, float32, float64 and uint8 are)")
    q = nearest.get("q")
    if q is None:
        raise InvalidInputError("nearest= needs a query vector 'q'")
    if isinstance(q, (pa.Array, pa.ChunkedArray)):
        q = numbers(q)  # from the buffer (Array.to_numpy imports pandas)
    qa = multivector.parse_query(q, column, dim) if multi else np.asarray(q)
    if not multi and qa.ndim != 1:
        raise NotSupportedError(f"nearest= with a {qa.ndim}-D query (batch queries) is not supported")
    if not multi and qa.size != dim:
        raise InvalidInputError(f"query vector size {qa.size} does not match index column size {dim} ({column!r})")
    k = _int(nearest, "k", 1)
    effort = _effort(nearest.get("search_effort"))
    nprobes = _int(nearest, "nprobes", 1 if effort is None else 0)  # ignored when search_effort is given
    lo_p, hi_p = _int(nearest, "minimum_nprobes", 0), _int(nearest, "maximum_nprobes", 0)
    if lo_p is not None and hi_p is not None and lo_p > hi_p:
        raise InvalidInputError("minimum_nprobes must be <= maximum_nprobes")
    # As pylance: nprobes fixes the count unless search_effort is given, which ignores nprobes;
    # otherwise the first round is pylance's Auto count (lance_format.index.vector.probes).
    k = 10 if k is None else k
    probe = Probe(nprobes, nprobes, exact=True, k=k) if nprobes is not None and effort is None \
        else Probe(lo_p or 1, hi_p, effort=effort, k=k)
    metric = nearest.get("metric")
    rng = nearest.get("distance_range")
    if rng is not None and len(rng) != 2:
        raise InvalidInputError("distance_range must be a tuple of (lower_bound, upper_bound)")
    lo, hi = (None, None) if rng is None else rng
    return NearestQuery(column, qa, k, None if metric is None else metric_name(metric), probe,
                        _int(nearest, "refine_factor", 1), bool(nearest.get("use_index", True)), _int(nearest, "ef", 1),
                        (None if lo is None else float(lo), None if hi is None else float(hi)), multi)
