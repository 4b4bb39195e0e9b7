"""Many probed PQ / SQ partitions are scored from slices of their codes, with only the rows kept back.

Once the nearest partition gave k rows, ``search_segment`` scores the rest of a probing round
with :func:`lance_format.index.vector.scoring.score_pq_spans` (``score_sq_spans`` for SQ):
whole partitions, no row lists, and only the rows that may lie within the bound come back. These
tests check, on indices pylance 14.0.2 builds, that they return exactly the rows
:func:`score_rows` keeps under the same bound (bit-identical distances), and that searches
probing most partitions (with a prefilter, a distance range and deleted rows too) return
pylance's rows and distances, tie-aware.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.store import IndexDir
from lance_format.index.vector.layout import IvfSegment, read_segment
from lance_format.index.vector.scoring import pq_tables, score_pq_spans, score_rows, score_sq_spans
from lance_format.storage import open_store
from lance_format.table.versions import load_manifest

from .ties import tie_groups

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, CENTRES, PARTS = 4000, 64, 40, 12
#: (index kind, metric) built
CASES = [("IVF_PQ", "l2"), ("IVF_PQ", "cosine"), ("IVF_SQ", "l2"), ("IVF_HNSW_SQ", "l2")]


def _clustered(seed: int, n: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(7).normal(size=(CENTRES, DIM))
    return (centres[rng.integers(0, CENTRES, n)] + rng.normal(scale=0.4, size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    root = tmp_path_factory.mktemp("many_probes")
    x = _clustered(0, N)
    tbl = pa.table({"id": pa.array(np.arange(N)), "cat": pa.array(np.arange(N) % 3),
                    "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    out = {}
    for kind, metric in CASES:
        uri = str(root / f"{kind}_{metric}.lance")
        ds = lance.write_dataset(tbl, uri, max_rows_per_file=1500)
        kw = {"num_sub_vectors": 8} if "PQ" in kind else {}
        ds.create_index("vec", kind, metric=metric, num_partitions=PARTS, **kw)
        out[(kind, metric)] = uri
    return out


def _segment(uri: str) -> IvfSegment:
    store = open_store(uri)
    meta = next(m for m in load_manifest(store).indices if m.name == "vec_idx")
    return read_segment(IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()}))


@pytest.mark.parametrize(("kind", "metric"), CASES)
def test_spans_keep_the_rows_score_rows_keeps_with_identical_distances(built: dict[tuple[str, str], str], kind: str,
                                                                       metric: str) -> None:
    seg = _segment(built[(kind, metric)])
    pq = "PQ" in kind
    offsets, lengths = seg.offsets.astype(np.int64), seg.lengths.astype(np.int64)
    for q in _clustered(3, 6):
        parts = np.arange(1, seg.num_partitions, dtype=np.int64)  # a round of many partitions
        rows = [np.arange(offsets[p], offsets[p] + lengths[p], dtype=np.int64) for p in parts]
        tables = pq_tables(seg, q, parts) if pq else None
        full = score_rows(seg, q, parts, rows, None, tables)
        bound = float(np.sort(full)[10])
        got = score_pq_spans(seg, q, parts, bound, tables) if pq else score_sq_spans(seg, q, parts, bound)
        assert got is not None
        kept, dist = got
        pruned = score_rows(seg, q, parts, rows, bound, tables)
        live = ~np.isnan(pruned)
        np.testing.assert_array_equal(kept, np.concatenate(rows)[live])
        assert dist.tobytes() == pruned[live].tobytes() == full[live].tobytes()
        assert np.all(full[~live] > bound)  # what is dropped is truly beyond the bound
        assert kept.size < full.size  # some rows are pruned: the pruned path ran
        # no finite bound: every row, in partition order (SQ: left to score_rows)
        if pq:
            kept, dist = score_pq_spans(seg, q, parts, float("inf"), tables)
            np.testing.assert_array_equal(kept, np.concatenate(rows))
            assert dist.tobytes() == full.tobytes()
        else:
            assert score_sq_spans(seg, q, parts, float("inf")) is None


def _same_up_to_ties(ours: pa.Table, theirs: pa.Table) -> None:
    """The same distances rank by rank, and the same rows in every tie group but the last (which k cuts)."""
    d_a, d_b = ours["_distance"].to_numpy(), theirs["_distance"].to_numpy()
    assert d_a.size == d_b.size
    np.testing.assert_allclose(d_a, d_b, rtol=1e-5, atol=1e-6)
    ids_a, ids_b = ours["id"].to_numpy(), theirs["id"].to_numpy()
    groups = tie_groups(d_b)
    for g in range(int(groups[-1]) if groups.size else 0):
        assert set(ids_a[groups == g].tolist()) == set(ids_b[groups == g].tolist())


@pytest.mark.parametrize(("kind", "metric"), CASES)
@pytest.mark.parametrize("nprobes", [6, PARTS])
def test_searches_probing_many_partitions_return_pylances_rows(built: dict[tuple[str, str], str], kind: str,
                                                               metric: str, nprobes: int) -> None:
    uri = built[(kind, metric)]
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for i, q in enumerate(_clustered(5, 8)):
        near: dict[str, Any] = {"column": "vec", "q": q, "k": 10, "nprobes": nprobes}
        extra: dict[str, Any] = {}
        if i % 3 == 1:
            extra = {"filter": "cat = 1", "prefilter": True}
        if i % 3 == 2:
            near["distance_range"] = (0.0, float(np.quantile(((_clustered(0, N) - q) ** 2).sum(1), 0.02)))
            if metric == "cosine":
                near["distance_range"] = (0.0, 0.05)
        a = ours.to_table(nearest=near, columns=["id"], **extra)
        b = theirs.to_table(nearest=near, columns=["id", "_distance"], **extra)
        _same_up_to_ties(a, b)


def test_deleted_rows_are_not_returned(built: dict[tuple[str, str], str], tmp_path: Any) -> None:
    uri = str(tmp_path / "deleted.lance")
    src = lance.dataset(built[("IVF_PQ", "l2")])
    ds = lance.write_dataset(src.to_table(), uri, max_rows_per_file=1500)
    ds.create_index("vec", "IVF_PQ", metric="l2", num_partitions=PARTS, num_sub_vectors=8)
    ds.delete("id % 4 = 0")
    theirs, ours = lance.dataset(uri), lance_format.dataset(uri)
    for q in _clustered(9, 5):
        near = {"column": "vec", "q": q, "k": 10, "nprobes": PARTS}
        a = ours.to_table(nearest=near, columns=["id"])
        assert not np.any(a["id"].to_numpy() % 4 == 0)
        _same_up_to_ties(a, theirs.to_table(nearest=near, columns=["id", "_distance"]))
