"""IVF_HNSW_* searches return pylance's rows: the graph walk, its misses included.

On unclustered 64-dimensional data a beam of ``ef`` ≈ k misses true neighbours often, so an
exhaustive scoring of the probed partitions (what this reader did before it walked the graphs)
answers differently from pylance on nearly every query; the walk must answer as pylance does with
its default ``ef``, a given one, a prefilter (flat below a tenth of a partition, a walk through
a bitset above), a postfilter, deleted rows, a distance range, and on a graph we built.
Ties (equal quantised distances) are compared per distance group (``ties.py``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError

from .ties import assert_same_answers as _same

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM = 10_000, 64
KINDS = {  # name: (index type, metric, extra build args)
    "sq_l2": ("IVF_HNSW_SQ", "l2", {}),
    "sq_cosine": ("IVF_HNSW_SQ", "cosine", {}),
    "pq_l2": ("IVF_HNSW_PQ", "l2", {"num_sub_vectors": 16}),
    "flat_dot": ("IVF_HNSW_FLAT", "dot", {}),
}


def _table() -> pa.Table:
    x = np.random.default_rng(1).standard_normal((N, DIM)).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(N)), "cat": pa.array(np.arange(N) % 50),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _queries(n: int = 12) -> np.ndarray[Any, Any]:
    return np.random.default_rng(2).standard_normal((n, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hnsw_walk")
    out = {}
    for name, (kind, metric, kw) in KINDS.items():
        uri = str(root / f"{name}.lance")
        ds = lance.write_dataset(_table(), uri, max_rows_per_file=N // 2)
        ds.create_index("vec", kind, num_partitions=2, metric=metric, **kw)
        out[name] = uri
    return out


def _answers(ds: Any, q: np.ndarray[Any, Any], nearest: dict[str, Any], **kw: Any) -> tuple[list[int], list[float]]:
    t = ds.to_table(columns=["id", "_distance"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": 1,
                                                          **nearest}, **kw)
    return t.column("id").to_pylist(), t.column("_distance").to_pylist()


def _compare(uri: str, nearest: dict[str, Any], **kw: Any) -> None:
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for q in _queries():
        _same(_answers(theirs, q, nearest, **kw), _answers(ours, q, nearest, **kw))


@pytest.mark.parametrize("name", list(KINDS))
@pytest.mark.parametrize("ef", [None, 10, 40])
def test_every_hnsw_kind_answers_as_pylance_with_default_and_given_ef(built: dict[str, str], name: str,
                                                                      ef: int | None) -> None:
    _compare(built[name], {} if ef is None else {"ef": ef})


def test_an_exhaustive_scoring_of_the_probed_partitions_would_answer_differently(built: dict[str, str]) -> None:
    """The data is hard enough that the walk's misses show: exact search differs from pylance's
    walk on most queries (so the equality above is the walk's, not a partition scan's)."""
    theirs = lance.dataset(built["flat_dot"])
    differ = 0
    for q in _queries():
        walk = _answers(theirs, q, {"ef": 10})[0]
        exact = _answers(theirs, q, {"use_index": False})[0]
        differ += set(walk) != set(exact)
    assert differ >= len(_queries()) // 2


@pytest.mark.parametrize("where, prefilter", [("cat < 2", True),  # 4%: pylance scores the partition flat
                                              ("cat < 20", True),  # 40%: a walk through the allowed rows
                                              ("cat < 20", False)])  # a postfilter of the walk's answers
def test_filtered_searches_answer_as_pylance(built: dict[str, str], where: str, prefilter: bool) -> None:
    _compare(built["sq_l2"], {}, filter=where, prefilter=prefilter)


def test_a_distance_range_answers_as_pylance(built: dict[str, str]) -> None:
    _compare(built["sq_l2"], {"distance_range": (60.0, 95.0)})


def test_deleted_rows_are_walked_through_but_never_returned(built: dict[str, str], tmp_path: Path) -> None:
    uri = str(tmp_path / "deleted.lance")
    shutil.copytree(built["sq_l2"], uri)
    lance.dataset(uri).delete("id % 7 = 0")
    _compare(uri, {})
    ours = lance_format.dataset(uri)
    for q in _queries(4):
        assert all(i % 7 for i in _answers(ours, q, {})[0])


def test_an_ef_below_k_is_refused_as_pylance_refuses_it(built: dict[str, str]) -> None:
    q = _queries(1)[0]
    with pytest.raises(Exception, match="ef must be greater than or equal to k"):
        _answers(lance.dataset(built["sq_l2"]), q, {"ef": 5})
    with pytest.raises(InvalidInputError, match=r"ef \(5\) must be at least k \(10\)"):
        _answers(lance_format.dataset(built["sq_l2"]), q, {"ef": 5})


def test_a_graph_we_built_is_walked_alike_by_both_readers(tmp_path: Path) -> None:
    uri = str(tmp_path / "ours.lance")
    lance.write_dataset(_table(), uri, max_rows_per_file=N // 2)
    lance_format.dataset(uri).create_index("vec", "IVF_HNSW_SQ", num_partitions=2)
    _compare(uri, {})
    _compare(uri, {"ef": 10})
