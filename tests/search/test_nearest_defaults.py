"""``nearest=`` without ``nprobes``: how many partitions are probed, compared with pylance 14.0.2.

pylance's Auto mode (``lance_format.index.vector.probes``) picks the first round from the
centroid distances and a table per metric and k; ``search_effort`` and
``minimum_nprobes``/``maximum_nprobes`` move it. The count is checked against pylance's own
``partitions_searched`` (``analyze_plan``), and the neighbours against its results.
Indices are built by pylance once per module on clustered data (so partitions matter).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError
from lance_format.index.vector.distance import centroid_distances
from lance_format.index.vector.probes import initial_probes
from lance_format.search.segment_rows import open_segment as _segment
from lance_format.search.segment_rows import vector_segments as _vector_segments

from .ties import tie_groups

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, FRAG, CLUSTERS = 4000, 16, 1000, 60
KINDS = [("IVF_FLAT", "l2"), ("IVF_PQ", "l2"), ("IVF_SQ", "l2"), ("IVF_HNSW_FLAT", "l2"), ("IVF_HNSW_PQ", "l2"),
         ("IVF_HNSW_SQ", "l2"), ("IVF_FLAT", "cosine"), ("IVF_SQ", "cosine"), ("IVF_HNSW_PQ", "cosine"),
         ("IVF_PQ", "dot"), ("IVF_HNSW_SQ", "dot")]


def _data(seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(CLUSTERS, DIM)).astype(np.float32)
    return (centres[rng.integers(0, CLUSTERS, N)] + 0.4 * rng.normal(size=(N, DIM))).astype(np.float32)


def _queries(x: np.ndarray[Any, Any], n: int = 20, seed: int = 5) -> list[np.ndarray[Any, Any]]:
    """Half near rows of the data, half anywhere (far queries see many equally close centroids)."""
    rng = np.random.default_rng(seed)
    near = [x[i] + 0.3 * rng.normal(size=DIM).astype(np.float32) for i in rng.integers(0, N, n // 2)]
    return near + [(rng.normal(size=DIM) * s).astype(np.float32) for s in np.linspace(0.5, 2.0, n - n // 2)]


def _write(uri: str, x: np.ndarray[Any, Any]) -> Any:
    table = pa.table({"id": pa.array(np.arange(N)), "cat": pa.array(np.arange(N) % 7),
                      "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    return lance.write_dataset(table, uri, max_rows_per_file=FRAG)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    root = tmp_path_factory.mktemp("nearest_defaults")
    x = _data()
    out = {}
    for kind, metric in KINDS:
        uri = str(root / f"{kind}_{metric}.lance")
        kw = {"num_sub_vectors": 4} if "PQ" in kind else {}
        _write(uri, x).create_index("vec", kind, metric=metric, num_partitions=32, **kw)
        out[(kind, metric)] = uri
    return out


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """IVF_FLAT with 48 partitions (every one holding well over 50 rows) per metric."""
    root = tmp_path_factory.mktemp("nearest_wide")
    x = _data(1)
    out = {}
    for metric in ("l2", "cosine", "dot"):
        uri = str(root / f"flat_{metric}.lance")
        _write(uri, x).create_index("vec", "IVF_FLAT", metric=metric, num_partitions=24)
        out[metric] = uri
    return out


def _ids(table: pa.Table) -> list[int]:
    return [int(v) for v in table["_rowid"].to_pylist()]


def _overlaps(uri: str, nearest: dict[str, Any], **kw: Any) -> list[float]:
    """Per query, the share of pylance's rows we return; 1.0 also when the rows differ only in a
    tie at the cut (PQ/SQ codes give exactly equal distances, kept in each engine's search order)."""
    theirs_ds, ours_ds = lance.dataset(uri), lance_format.dataset(uri)
    out = []
    for q in _queries(_data()):
        n = {"column": "vec", "q": q, "k": 10, **nearest}
        theirs_t = theirs_ds.to_table(nearest=n, columns=["id", "_distance"], with_row_id=True, **kw)
        ours_t = ours_ds.to_table(nearest=n, columns=["id", "_distance"], with_row_id=True, **kw)
        theirs, ours = _ids(theirs_t), _ids(ours_t)
        share = len(set(theirs) & set(ours)) / max(1, len(theirs))
        if share < 1.0 and len(theirs) == len(ours) and theirs:
            d_theirs, d_ours = theirs_t["_distance"].to_numpy(), ours_t["_distance"].to_numpy()
            groups = tie_groups(d_theirs)
            inside = {i for i, g in zip(theirs, groups, strict=True) if g < groups[-1]}
            if inside <= set(ours) and np.allclose(np.sort(d_ours), np.sort(d_theirs), rtol=1e-5, atol=1e-5):
                share = 1.0
        out.append(share)
    return out


@pytest.mark.parametrize(("kind", "metric"), KINDS)
def test_default_search_returns_pylances_neighbours(built: dict[tuple[str, str], str], kind: str,
                                                    metric: str) -> None:
    overlaps = _overlaps(built[(kind, metric)], {})
    assert np.mean(overlaps) >= 0.95, overlaps
    if "HNSW" not in kind:  # same partitions and storage scores: at most a float tie at the cut differs
        assert min(overlaps) >= 0.9, overlaps


@pytest.mark.parametrize("nearest", [
    {"search_effort": 0.2}, {"search_effort": 0.8}, {"search_effort": 0.0}, {"minimum_nprobes": 12},
    {"maximum_nprobes": 3}, {"minimum_nprobes": 2, "maximum_nprobes": 20, "search_effort": 0.7},
    {"refine_factor": 4}, {"k": 1}, {"k": 40}, {"nprobes": 2, "search_effort": 0.9},
], ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()))
def test_effort_and_bounds_return_pylances_neighbours(built: dict[tuple[str, str], str],
                                                      nearest: dict[str, Any]) -> None:
    for key in (("IVF_PQ", "l2"), ("IVF_FLAT", "cosine")):
        overlaps = _overlaps(built[key], nearest)
        assert min(overlaps) == 1.0, (key, overlaps)


@pytest.mark.parametrize("flt", ["id < 150", "cat = 3", "id % 97 = 0"])
def test_prefiltered_search_widens_as_pylance(built: dict[tuple[str, str], str], flt: str) -> None:
    """Few rows pass: the search probes further partitions until k were found, as pylance does."""
    overlaps = _overlaps(built[("IVF_SQ", "l2")], {}, filter=flt, prefilter=True)
    assert min(overlaps) == 1.0, overlaps


def _partitions_searched(ds: Any, nearest: dict[str, Any]) -> int:
    plan = ds.scanner(nearest=nearest, columns=["id", "_distance"]).analyze_plan()
    found = re.search(r"partitions_searched=(\d+)", plan)
    assert found, plan
    return int(found.group(1))


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_first_round_has_pylances_partition_count(wide: dict[str, str], metric: str) -> None:
    uri = wide[metric]
    theirs = lance.dataset(uri)
    ours = lance_format.dataset(uri)
    seg = _segment(ours._ctx, _vector_segments(ours._ctx, "vec")[0])
    cases: list[dict[str, Any]] = [{"k": 1}, {"k": 10}, {"k": 50}, {"k": 10, "search_effort": 0.3},
                                   {"k": 10, "search_effort": 0.75}, {"k": 10, "minimum_nprobes": 9},
                                   {"k": 10, "maximum_nprobes": 5}]
    for q in _queries(_data(1), 12, seed=9):
        d = centroid_distances(seg.metric, seg.centroids, q)
        order = np.lexsort((np.arange(d.size), d))
        for case in cases:
            k = case["k"]
            n = initial_probes(seg.metric, k, d[order], case.get("minimum_nprobes", 1), case.get("maximum_nprobes"),
                               case.get("search_effort"))
            assert int(np.minimum(seg.lengths[order[:n]], k).sum()) >= k or n == order.size  # no widening
            assert n == _partitions_searched(theirs, {"column": "vec", "q": q, **case}), (metric, case)


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), "0.5"])
def test_search_effort_outside_unit_interval_is_rejected(built: dict[tuple[str, str], str], bad: Any,
                                                         tmp_path: Path) -> None:
    ds = lance_format.dataset(built[("IVF_FLAT", "l2")])
    with pytest.raises(InvalidInputError, match="search_effort"):
        ds.to_table(nearest={"column": "vec", "q": np.zeros(DIM, np.float32), "search_effort": bad})
    with pytest.raises((ValueError, TypeError)):
        lance.dataset(built[("IVF_FLAT", "l2")]).to_table(
            nearest={"column": "vec", "q": np.zeros(DIM, np.float32), "search_effort": bad})
