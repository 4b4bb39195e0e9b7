"""``nearest=`` through the public API, compared with pylance 14.0.2 on the same datasets.

Indices are built by pylance once per module (3,000 × 16 float32 in 3 fragments, 4
partitions); each test copies what it changes.
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
from lance_format.errors import InvalidInputError, NotSupportedError

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, FRAG = 3000, 16, 1000
KINDS = ["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ"]
METRICS = ["l2", "cosine", "dot"]


def _table(n: int = N, seed: int = 0, start: int = 0) -> pa.Table:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(start, start + n)), "cat": pa.array(np.arange(n) % 5),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _queries(n: int = 20, seed: int = 11) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(DIM).astype(np.float32) for _ in range(n)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    root = tmp_path_factory.mktemp("nearest")
    out = {}
    for kind in KINDS:
        for metric in METRICS:
            uri = str(root / f"{kind}_{metric}.lance")
            ds = lance.write_dataset(_table(), uri, max_rows_per_file=FRAG)
            kw = {"num_sub_vectors": 4} if "PQ" in kind else {}
            ds.create_index("vec", kind, metric=metric, num_partitions=4, **kw)
            out[(kind, metric)] = uri
    return out


def _copy(src: str, tmp_path: Path) -> str:
    dst = str(tmp_path / Path(src).name)
    shutil.copytree(src, dst)
    return dst


def _both(uri: str, nearest: dict[str, Any], **kw: Any) -> tuple[pa.Table, pa.Table]:
    theirs = lance.dataset(uri).to_table(nearest=nearest, with_row_id=True,
                                         columns=[*kw.pop("columns", ["id"]), "_distance"], **kw)
    ours = lance_format.dataset(uri).to_table(nearest=nearest, with_row_id=True, columns=["id"], **kw)
    return theirs, ours


def _overlap(theirs: pa.Table, ours: pa.Table, k: int = 10) -> float:
    return len(set(theirs["_rowid"].to_pylist()) & set(ours["_rowid"].to_pylist())) / k


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("metric", METRICS)
def test_index_search_returns_pylances_neighbours(built: dict[tuple[str, str], str], kind: str, metric: str) -> None:
    uri = built[(kind, metric)]
    overlaps, refined = [], []
    for i, q in enumerate(_queries()):
        nearest: dict[str, Any] = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        if i % 2:
            nearest["refine_factor"] = 3
        theirs, ours = _both(uri, nearest)
        assert ours.schema.names == ["id", "_distance", "_rowid"]
        assert ours.schema.field("_distance").type == pa.float32()
        assert ours.num_rows == 10
        d = ours["_distance"].to_numpy()
        assert np.all(np.diff(d) >= 0)
        overlaps.append(_overlap(theirs, ours))
        if i % 2 or "FLAT" in kind:  # exact distances: equal for the rows both return
            mine = dict(zip(ours["_rowid"].to_pylist(), d.tolist(), strict=True))
            refined += [abs(mine[r] - t) for r, t in zip(theirs["_rowid"].to_pylist(),
                                                         theirs["_distance"].to_pylist(), strict=True) if r in mine]
    assert np.mean(overlaps) >= 0.95
    assert max(refined) < 1e-4


@pytest.mark.parametrize("metric", METRICS)
def test_flat_search_equals_numpy_exact_search(built: dict[tuple[str, str], str], metric: str) -> None:
    x = np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)
    ds = lance_format.dataset(built[("IVF_PQ", metric)])
    for q in _queries(5):
        t = ds.to_table(nearest={"column": "vec", "q": q, "k": 10, "use_index": False, "metric": metric},
                        columns=["id"])
        if metric == "l2":
            exact = ((x - q) ** 2).sum(1)
        elif metric == "dot":
            exact = 1 - x @ q
        else:
            exact = 1 - (x @ q) / (np.linalg.norm(x, axis=1) * np.linalg.norm(q))
        best = np.argsort(exact, kind="stable")[:10]
        assert t["id"].to_pylist() == best.tolist()
        np.testing.assert_allclose(t["_distance"].to_numpy(), exact[best], rtol=1e-5, atol=1e-5)
        assert "KNNVectorDistance" in ds.scanner(nearest={"column": "vec", "q": q, "use_index": False}).explain_plan()
        assert "ANNSubIndex" not in ds.scanner(nearest={"column": "vec", "q": q, "use_index": False}).explain_plan()


def test_query_may_be_a_list_or_arrow_array_and_k_defaults_to_10(built: dict[tuple[str, str], str]) -> None:
    ds = lance_format.dataset(built[("IVF_FLAT", "l2")])
    q = _queries(1)[0]
    want = ds.to_table(nearest={"column": "vec", "q": q, "nprobes": 4}, columns=["id"])
    assert want.num_rows == 10
    for other in (q.tolist(), pa.array(q), q.astype(np.float64)):
        assert ds.to_table(nearest={"column": "vec", "q": other, "nprobes": 4}, columns=["id"]).equals(want)


def test_explain_plan_says_the_index_was_used(built: dict[tuple[str, str], str]) -> None:
    ds = lance_format.dataset(built[("IVF_PQ", "l2")])
    q = _queries(1)[0]
    plan = ds.scanner(nearest={"column": "vec", "q": q, "k": 5}).explain_plan()
    assert "ANNSubIndex: name=vec_idx, k=5" in plan and "ANNIvfPartition" in plan
    assert "KNNVectorDistance" not in plan
    plan = ds.scanner(nearest={"column": "vec", "q": q, "k": 5, "refine_factor": 2}).explain_plan()
    assert "KNNVectorDistance" in plan and "k=10" in plan
    # another metric than the index's: pylance falls back to a flat search
    plan = ds.scanner(nearest={"column": "vec", "q": q, "k": 5, "metric": "cosine"}).explain_plan()
    assert "ANNSubIndex" not in plan


@pytest.mark.parametrize("prefilter", [False, True])
def test_filters_apply_before_or_after_choosing_k_as_in_pylance(built: dict[tuple[str, str], str],
                                                                prefilter: bool) -> None:
    uri = built[("IVF_FLAT", "l2")]
    overlaps, sizes = [], []
    for q in _queries(10):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 4}
        theirs, ours = _both(uri, nearest, filter="cat = 1", prefilter=prefilter)
        assert set(ours["id"].to_numpy() % 5) <= {1}
        assert ours.num_rows == theirs.num_rows
        sizes.append(ours.num_rows)
        overlaps.append(_overlap(theirs, ours, max(theirs.num_rows, 1)))
    assert np.mean(overlaps) >= 0.95
    if prefilter:
        assert set(sizes) == {10}
    else:
        assert max(sizes) < 10  # postfilter: only the nearest 10 rows are filtered


def test_deleted_rows_never_appear(built: dict[tuple[str, str], str], tmp_path: Path) -> None:
    uri = _copy(built[("IVF_PQ", "l2")], tmp_path)
    lance.dataset(uri).delete("id % 3 = 0")
    for q in _queries(10):
        theirs, ours = _both(uri, {"column": "vec", "q": q, "k": 10, "nprobes": 2})
        assert ours.num_rows == 10 and not any(i % 3 == 0 for i in ours["id"].to_pylist())
        assert _overlap(theirs, ours) >= 0.9


def test_unindexed_fragment_is_searched_flat_and_merged(built: dict[tuple[str, str], str], tmp_path: Path) -> None:
    uri = _copy(built[("IVF_SQ", "l2")], tmp_path)
    lance.write_dataset(_table(500, seed=3, start=N), uri, mode="append")
    ds = lance_format.dataset(uri)
    overlaps, new_rows = [], 0
    for q in _queries(20):
        nearest = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        theirs, ours = _both(uri, nearest)
        overlaps.append(_overlap(theirs, ours))
        new_rows += int(np.sum(ours["id"].to_numpy() >= N))
        # every distance is exact once the flat part is merged
        mine = dict(zip(ours["_rowid"].to_pylist(), ours["_distance"].to_pylist(), strict=True))
        for r, d in zip(theirs["_rowid"].to_pylist(), theirs["_distance"].to_pylist(), strict=True):
            if r in mine:
                assert mine[r] == pytest.approx(d, rel=1e-5, abs=1e-5)
    assert np.mean(overlaps) >= 0.95 and new_rows > 0
    plan = ds.scanner(nearest={"column": "vec", "q": _queries(1)[0]}).explain_plan()
    assert "UnionExec" in plan and "ANNSubIndex" in plan and "KNNVectorDistance" in plan


def test_deferred_remap_index_is_honoured(built: dict[tuple[str, str], str], tmp_path: Path) -> None:
    uri = _copy(built[("IVF_PQ", "l2")], tmp_path)
    ds = lance.dataset(uri)
    ds.delete("id % 10 = 0")
    ds.optimize.compact_files(target_rows_per_fragment=N, defer_index_remap=True)
    ours_ds = lance_format.dataset(uri)
    assert any(m.name == "__lance_frag_reuse" for m in ours_ds.manifest.indices)
    for q in _queries(10):
        theirs, ours = _both(uri, {"column": "vec", "q": q, "k": 10, "nprobes": 2})
        assert not any(i % 10 == 0 for i in ours["id"].to_pylist())
        assert _overlap(theirs, ours) >= 0.9
    assert "ANNSubIndex" in ours_ds.scanner(nearest={"column": "vec", "q": _queries(1)[0]}).explain_plan()


def test_stable_row_ids_map_to_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "stable.lance")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=FRAG, enable_stable_row_ids=True)
    ds.create_index("vec", "IVF_FLAT", num_partitions=4)
    ds.delete("id < 100")
    ds.optimize.compact_files(target_rows_per_fragment=N)
    for q in _queries(10):
        theirs, ours = _both(uri, {"column": "vec", "q": q, "k": 10, "nprobes": 4})
        # pylance 14.0.2 counts the compacted-away deleted rows the segment still holds among the
        # k and drops them afterwards, so it may return fewer rows; ours are the k live nearest.
        assert ours.num_rows == 10 and min(ours["id"].to_pylist()) >= 100
        mine = dict(zip(ours["_rowid"].to_pylist(), ours["id"].to_pylist(), strict=True))
        assert all(mine.get(r) == i for r, i in zip(theirs["_rowid"].to_pylist(), theirs["id"].to_pylist(),
                                                    strict=True))


def test_ivf_rq_is_searched_over_its_probed_partitions(tmp_path: Path) -> None:
    uri = str(tmp_path / "rq.lance")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=FRAG)
    ds.create_index("vec", "IVF_RQ", num_partitions=4)
    overlaps = []
    for i, q in enumerate(_queries()):
        nearest: dict[str, Any] = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
        if i % 2:
            nearest["refine_factor"] = 2
        theirs, ours = _both(uri, nearest)
        overlaps.append(_overlap(theirs, ours))
    assert np.mean(overlaps) >= 0.95
    assert "ANNSubIndex" in lance_format.dataset(uri).scanner(nearest={"column": "vec", "q": q}).explain_plan()


def test_hamming_on_uint8_vectors_equals_pylance(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (1000, 8), dtype=np.uint8)
    uri = str(tmp_path / "bits.lance")
    lance.write_dataset(pa.table({"id": np.arange(1000), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 8)}),
                        uri)
    q = rng.integers(0, 256, 8, dtype=np.uint8)
    nearest = {"column": "vec", "q": q, "k": 10, "metric": "hamming"}
    theirs, ours = _both(uri, nearest)
    assert ours["_distance"].to_pylist() == theirs["_distance"].to_pylist()


def test_bad_queries_raise_lance_errors(built: dict[tuple[str, str], str]) -> None:
    ds = lance_format.dataset(built[("IVF_FLAT", "l2")])
    q = _queries(1)[0]
    with pytest.raises(InvalidInputError, match="size 8 does not match"):
        ds.to_table(nearest={"column": "vec", "q": q[:8]})
    with pytest.raises(InvalidInputError, match="must be a vector"):
        ds.to_table(nearest={"column": "id", "q": q})
    with pytest.raises(InvalidInputError, match="not in the dataset"):
        ds.to_table(nearest={"column": "nope", "q": q})
    with pytest.raises(InvalidInputError, match="'k'"):
        ds.to_table(nearest={"column": "vec", "q": q, "k": 0})
    with pytest.raises(InvalidInputError, match="refine_factor"):
        ds.to_table(nearest={"column": "vec", "q": q, "refine_factor": 0})
    with pytest.raises(NotSupportedError, match="batch"):
        ds.to_table(nearest={"column": "vec", "q": np.stack([q, q])})


def test_distance_range_limit_and_offset_as_in_pylance(built: dict[tuple[str, str], str]) -> None:
    uri = built[("IVF_FLAT", "l2")]
    q = _queries(1)[0]
    base = lance.dataset(uri).to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": 4},
                                       columns=["id", "_distance"])["_distance"].to_numpy()
    mid = (base[:-1] + base[1:]) / 2  # bounds between rows: float rounding cannot move a row across
    cases: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"nprobes": 4, "distance_range": (float(mid[1]), float(mid[6]))}, {}),
        ({"use_index": False, "distance_range": (None, float(mid[4]))}, {}),
        ({"nprobes": 4}, {"limit": 3, "offset": 2}),
        ({"nprobes": 4}, {"filter": "cat = 2", "prefilter": True, "limit": 4}),
    ]
    for extra, kw in cases:
        nearest = {"column": "vec", "q": q, "k": 10, **extra}
        theirs, ours = _both(uri, nearest, **kw)
        assert ours["id"].to_pylist() == theirs["id"].to_pylist()
        assert ours.num_rows > 0
