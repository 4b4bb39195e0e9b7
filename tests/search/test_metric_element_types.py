"""A search's metric follows the vectors' element type as pylance's does, and a metric that does not
apply to them is refused, never answered with distances of another meaning (single and multivector
columns, flat and indexed); multivector builds with another metric than cosine are refused as
pylance refuses them; hamming and ``distance_range`` on multivector columns give pylance's rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import InvalidInputError, LanceError

DIM = 16
ROWS = 400


def _single(kind: str) -> pa.Table:
    rng = np.random.default_rng(7)
    values = rng.integers(0, 256, ROWS * DIM).astype(np.uint8) if kind == "u8" \
        else rng.standard_normal(ROWS * DIM).astype(np.float32)
    return pa.table({"id": pa.array(range(ROWS)), "v": pa.FixedSizeListArray.from_arrays(pa.array(values), DIM)})


def _multi(kind: str) -> pa.Table:
    rng = np.random.default_rng(11)
    counts = rng.integers(1, 4, ROWS)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    total = int(offsets[-1])
    values = rng.integers(0, 256, total * DIM).astype(np.uint8) if kind == "u8" \
        else rng.standard_normal(total * DIM).astype(np.float32)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(values), DIM)
    return pa.table({"id": pa.array(range(ROWS)), "v": pa.ListArray.from_arrays(pa.array(offsets), vectors)})


def _both(tmp_path: Path, table: pa.Table) -> tuple[Any, Any]:
    return (lance.write_dataset(table, str(tmp_path / "pylance")),
            lance_format.write_dataset(table, str(tmp_path / "ours")))


def _query(table: pa.Table, multi: bool) -> np.ndarray:
    row = table["v"][3].as_py()
    return np.asarray(row).reshape(-1, DIM) if multi else np.asarray(row)


def _rows(ds: Any, nearest: dict[str, Any]) -> tuple[list[int], list[float]]:
    t = ds.to_table(nearest=nearest, columns=["id"])
    return t["id"].to_pylist(), t["_distance"].to_pylist()


@pytest.mark.parametrize("multi", [False, True], ids=["vector", "multivector"])
def test_uint8_search_without_metric_counts_bits_as_pylance(tmp_path: Path, multi: bool) -> None:
    table = _multi("u8") if multi else _single("u8")
    theirs, ours = _both(tmp_path, table)
    nearest = {"column": "v", "q": _query(table, multi), "k": 10}
    assert _rows(ours, nearest)[1] == _rows(theirs, nearest)[1]
    ids, dist = _rows(ours, nearest)
    assert dist[0] == 0.0 and ids[0] == 3 and all(float(d).is_integer() for d in dist)  # bit counts


def test_uint8_search_beside_a_hamming_index_keeps_hamming_without_the_index(tmp_path: Path) -> None:
    table = _single("u8")
    theirs, ours = _both(tmp_path, table)
    for ds in (theirs, ours):
        ds.create_index("v", "IVF_FLAT", num_partitions=2, metric="hamming")
    nearest = {"column": "v", "q": _query(table, False), "k": 10, "use_index": False}
    assert _rows(ours, nearest)[1] == _rows(theirs, nearest)[1]


@pytest.mark.parametrize(("kind", "metric"), [("u8", "l2"), ("u8", "cosine"), ("u8", "dot"), ("f32", "hamming")])
@pytest.mark.parametrize("multi", [False, True], ids=["vector", "multivector"])
def test_a_metric_the_elements_do_not_support_is_refused_as_pylance(tmp_path: Path, kind: str, metric: str,
                                                                   multi: bool) -> None:
    table = _multi(kind) if multi else _single(kind)
    theirs, ours = _both(tmp_path, table)
    nearest = {"column": "v", "q": _query(table, multi), "k": 5, "metric": metric}
    with pytest.raises(ValueError):
        theirs.to_table(nearest=nearest)
    with pytest.raises(InvalidInputError, match=f"'{metric}'.*'v'|'v'.*'{metric}'"):
        ours.to_table(nearest=nearest)
    with pytest.raises(InvalidInputError):
        ours.scanner(nearest=nearest).explain_plan()


def test_another_metric_than_a_uint8_index_is_refused_not_answered_in_l2(tmp_path: Path) -> None:
    table = _single("u8")
    theirs, ours = _both(tmp_path, table)
    for ds in (theirs, ours):
        ds.create_index("v", "IVF_FLAT", num_partitions=2, metric="hamming")
    nearest = {"column": "v", "q": _query(table, False), "k": 5, "metric": "l2"}
    with pytest.raises(ValueError):
        theirs.to_table(nearest=nearest)
    with pytest.raises(InvalidInputError):
        ours.to_table(nearest=nearest)


@pytest.mark.parametrize("metric", ["l2", "dot", "hamming"])
def test_multivector_index_with_another_metric_than_cosine_is_refused_as_pylance(tmp_path: Path,
                                                                                 metric: str) -> None:
    table = _multi("u8" if metric == "hamming" else "f32")
    theirs, ours = _both(tmp_path, table)
    with pytest.raises(RuntimeError):
        theirs.create_index("v", "IVF_FLAT", num_partitions=2, metric=metric)
    with pytest.raises(RuntimeError) as info:
        ours.create_index("v", "IVF_FLAT", num_partitions=2, metric=metric)
    assert isinstance(info.value, LanceError) and "cosine" in str(info.value)
    assert lance_format.dataset(ours.uri).version == 1 and not ours.list_indices()


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_multivector_distance_range_keeps_pylances_rows(tmp_path: Path, metric: str) -> None:
    table = _multi("f32")
    theirs, ours = _both(tmp_path, table)
    q = _query(table, True)
    everything = _rows(theirs, {"column": "v", "q": q, "k": ROWS, "metric": metric})[1]
    # a band of about 35 rows, bounds half-way between rows so float rounding cannot move a row across
    lo, hi = (everything[5] + everything[6]) / 2, (everything[40] + everything[41]) / 2
    nearest = {"column": "v", "q": q, "k": 20, "metric": metric, "distance_range": (lo, hi)}
    ids, dist = _rows(ours, nearest)
    want_ids, want = _rows(theirs, nearest)
    assert len(ids) == len(want_ids) == 20
    assert all(lo <= d < hi for d in dist)
    np.testing.assert_allclose(dist, want, rtol=1e-5, atol=1e-5)
