"""Vector search drops rows that cannot reach the k-th distance, and returns what full scoring returns.

Once k rows are known, ``search_segment`` passes their k-th distance as a bound to
``score_rows``: PQ rows stop after a few sub-vectors and SQ rows after their first dimensions when
the partial sum (plus the least the rest can add) is already beyond it. These tests check, on
indices pylance 14.0.2 builds over clustered data (where pruning drops most rows), that the
rows kept have bit-identical distances, the rows dropped are truly farther, and searches return
exactly the rows and distances of unpruned scoring (prefilters and distance ranges included).
Also: result rows gathered with numpy from kept columns equal the Arrow take path.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.store import IndexDir
from lance_format.index.vector import scoring, search
from lance_format.index.vector.layout import IvfSegment, PQStorage, SQStorage, read_segment
from lance_format.index.vector.scoring import score_rows
from lance_format.index.vector.search import Probe, search_segment
from lance_format.search import rows as result_rows
from lance_format.storage import open_store
from lance_format.table.versions import load_manifest

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, CENTRES = 3000, 64, 60
CASES = [("IVF_PQ", "l2"), ("IVF_PQ", "cosine"), ("IVF_PQ", "dot"), ("IVF_SQ", "l2"), ("IVF_SQ", "cosine"),
         ("IVF_HNSW_SQ", "l2"), ("IVF_HNSW_PQ", "l2")]


def _clustered(seed: int, n: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(CENTRES, DIM))
    return (centres[rng.integers(0, CENTRES, n)] + rng.normal(scale=0.3, size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], IvfSegment]:
    root = tmp_path_factory.mktemp("pruned")
    x = _clustered(0, N)
    tbl = pa.table({"id": pa.array(np.arange(N)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    out = {}
    for kind, metric in CASES:
        uri = str(root / f"{kind}_{metric}.lance")
        ds = lance.write_dataset(tbl, uri, max_rows_per_file=1000)
        kw = {"num_sub_vectors": 16} if "PQ" in kind else {}
        ds.create_index("vec", kind, metric=metric, num_partitions=8, **kw)
        store = open_store(uri)
        meta = next(m for m in load_manifest(store).indices if m.name == "vec_idx")
        out[(kind, metric)] = read_segment(IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes
                                                                             for f in meta.files or ()}))
    return out


def _queries(n: int = 12) -> np.ndarray[Any, Any]:
    return _clustered(5, n)


@pytest.mark.parametrize(("kind", "metric"), CASES)
def test_rows_kept_score_bit_identically_and_rows_dropped_are_farther(segments: dict[tuple[str, str], IvfSegment],
                                                                      kind: str, metric: str) -> None:
    seg = segments[(kind, metric)]
    assert scoring.prunable(seg)
    dropped = 0
    for q in _queries():
        parts = search.rank_partitions(seg, q)[:6]
        offsets, lengths = seg.offsets.astype(np.int64), seg.lengths.astype(np.int64)
        rows = [np.arange(offsets[p], offsets[p] + lengths[p]) for p in parts.tolist()]
        full = score_rows(seg, q, parts, rows)
        bound = float(np.sort(full)[10])
        pruned = score_rows(seg, q, parts, rows, bound)
        kept = ~np.isnan(pruned)
        assert np.array_equal(pruned[kept], full[kept])  # bit for bit
        assert (full[~kept] > bound).all()
        assert (full <= bound).sum() <= kept.sum()
        dropped += int((~kept).sum())
    assert dropped > 0  # clustered data: the bound does drop rows


@pytest.mark.parametrize(("kind", "metric"), CASES)
def test_search_returns_the_rows_and_distances_of_unpruned_scoring(segments: dict[tuple[str, str], IvfSegment],
                                                                   kind: str, metric: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    seg = segments[(kind, metric)]
    allowed = np.random.default_rng(1).random(seg.row_ids.size) < 0.3
    lo = None if metric == "dot" else 1.0
    variants: list[tuple[Any, tuple[float | None, float | None]]] = [
        (None, (None, None)), (allowed.__getitem__, (None, None)), (None, (lo, None))]
    probes = [Probe(1, 1, exact=True, k=10), Probe(3, 3, exact=True, k=10), Probe(8, 8, exact=True, k=10),
              Probe(k=10)]  # the last: Auto probing, widening while short of k
    results = []
    for prune in (True, False):
        monkeypatch.setattr(search, "prunable", lambda s, p=prune: p and isinstance(s.storage, (PQStorage, SQStorage)))
        results.append([search_segment(seg, q, k, probe, ok, rng)
                        for q in _queries() for probe in probes for ok, rng in variants for k in (1, 10, 40)])
    for (rows_p, dist_p), (rows_f, dist_f) in zip(*results, strict=True):
        assert np.array_equal(rows_p, rows_f)
        assert np.array_equal(dist_p, dist_f)


def test_nearest_results_are_unchanged_by_pruning(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _clustered(2, N)
    tbl = pa.table({"id": pa.array(np.arange(N)), "cat": pa.array(np.arange(N) % 7),
                    "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    uri = str(tmp_path / "d.lance")
    lance.write_dataset(tbl, uri, max_rows_per_file=700).create_index("vec", "IVF_PQ", num_partitions=8,
                                                                      num_sub_vectors=16)
    out = []
    for prune in (True, False):
        monkeypatch.setattr(search, "prunable", lambda s, p=prune: p and isinstance(s.storage, PQStorage))
        ds = lance_format.dataset(uri)
        out.append([ds.to_table(columns=["id"], nearest={"column": "vec", "q": q, "k": 10, "nprobes": n},
                                filter="cat < 3", prefilter=pre, with_row_id=True)
                    for q in _queries(6) for n in (1, 4) for pre in (True, False)])
    for a, b in zip(*out, strict=True):
        assert a.equals(b)


def test_result_rows_gathered_with_numpy_equal_the_arrow_take(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 2500
    rng = np.random.default_rng(4)
    vec = rng.standard_normal((n, 8)).astype(np.float32)
    tbl = pa.table({
        "i": pa.array(np.arange(n, dtype=np.int64)),
        "f": pa.array(rng.standard_normal(n).astype(np.float16)),
        "u": pa.array(rng.integers(0, 200, n).astype(np.uint8)),
        "nullable": pa.array([None if i % 5 == 0 else i for i in range(n)], pa.int32()),
        "b": pa.array(rng.random(n) < 0.5),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(vec.ravel()), 8),
    })
    uri = str(tmp_path / "rows.lance")
    lance.write_dataset(tbl, uri, max_rows_per_file=600)
    ds = lance_format.dataset(uri)
    frags = [(int(f.id), int(f.physical_rows)) for f in ds._ctx.manifest.fragments]
    addrs = np.array([(fid << 32) | int(o) for fid, rows in frags for o in rng.choice(rows, 7, replace=False)],
                     np.uint64)
    addrs = addrs[rng.permutation(addrs.size)]  # any order, kept
    for cols in (["i"], ["i", "f", "u", "vec"], ["nullable", "i"], ["b"], ["vec", "b"]):
        fast = result_rows.take_addresses(ds._ctx, addrs, cols)
        with monkeypatch.context() as m:
            m.setattr(result_rows, "_gathered", lambda *a: None)
            slow = result_rows.take_addresses(ds._ctx, addrs, cols)
        assert fast.equals(slow), cols
        assert fast.column(cols[0]).to_pylist() == tbl.column(cols[0]).take(pa.array(
            [sum(r for _, r in frags[:[f for f, _ in frags].index(int(a >> 32))]) + int(a & 0xFFFFFFFF)
             for a in addrs])).to_pylist()


def test_sq_code_space_limit_is_the_last_whole_distance_within_the_bound() -> None:
    rng = np.random.default_rng(8)
    found = 0
    for _ in range(300):
        span = float(rng.uniform(0.01, 20))

        def scaled(raw: np.ndarray[Any, Any], span: float = span) -> np.ndarray[Any, Any]:  # as _score_sq's
            return (raw.astype(np.float32) * np.float32(span) ** 2 / np.float32(255.0 ** 2)).astype(np.float32)

        bound = float(rng.uniform(0, 2000))
        h = scoring._raw_limit(bound, scaled)
        if h is None:
            continue
        found += 1
        assert h == int(h)
        assert scaled(np.array([h], np.float32))[0] <= bound < scaled(np.array([h + 1], np.float32))[0]
    assert found > 250
    assert scoring._raw_limit(float("inf"), lambda r: r) is None
    assert scoring._raw_limit(-1.0, lambda r: r) is None


def test_sq_norms_are_prepared_for_the_probed_partitions_only(segments: dict[tuple[str, str], IvfSegment]) -> None:
    seg = segments[("IVF_SQ", "l2")]
    st = seg.storage
    assert isinstance(st, SQStorage)
    fresh = IvfSegment(seg.index_type, seg.metric, seg.centroids, seg.lengths, seg.row_ids, st, seg.loss, None)
    q = _queries(1)[0]
    search_segment(fresh, q, 10, Probe(3, 3, exact=True, k=10))
    prep = scoring._prepared(fresh)
    assert prep.sq_ready is not None and prep.sq_norms is not None and prep.sq_head_norms is not None
    assert set(np.flatnonzero(prep.sq_ready).tolist()) == set(search.rank_partitions(fresh, q)[:3].tolist())
    codes = st.codes.astype(np.int64)
    for p in np.flatnonzero(prep.sq_ready).tolist():
        lo, hi = int(fresh.offsets[p]), int(fresh.offsets[p] + fresh.lengths[p])
        assert np.array_equal(prep.sq_norms[lo:hi], (codes[lo:hi] ** 2).sum(axis=1))
        assert np.array_equal(prep.sq_head_norms[lo:hi], (codes[lo:hi, :scoring.SQ_HEAD] ** 2).sum(axis=1))
    # the same search on the whole-segment arrays (a segment searched everywhere first)
    whole = segments[("IVF_SQ", "l2")]
    search_segment(whole, q, 10, Probe(8, 8, exact=True, k=10))
    for probe in (Probe(3, 3, exact=True, k=10), Probe(6, 6, exact=True, k=10)):
        a, b = search_segment(fresh, q, 10, probe), search_segment(whole, q, 10, probe)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
