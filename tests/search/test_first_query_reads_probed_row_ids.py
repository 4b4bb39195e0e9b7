"""A first ``nearest=`` query reads and maps the row ids of the partitions it reaches, not the whole segment.

Which segment rows a search may return (live, in a covered fragment, kept by a prefilter) is
worked out per partition when a query first probes it (``lance_format/search/segment_rows.py``);
the row ids themselves are read with the probed partitions' codes. Partitions a widening round
only counts (Auto probing, or a prefilter that leaves the first round short) have their row ids
read without their codes; a query probing two thirds of the rows or more reads the whole segment
in the same range reads. Results stay those of pylance on the same index (deleted rows never
appear), tie-aware.
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
from lance_format.index.store import IndexDir
from lance_format.index.vector.layout import read_segment
from lance_format.index.vector.search import rank_partitions
from lance_format.search.segment_rows import open_segment, vector_segments

from .ties import tie_groups

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, FRAG, PARTS = 4000, 16, 1000, 16


def _table() -> pa.Table:
    rng = np.random.default_rng(0)
    centres = np.random.default_rng(5).normal(size=(PARTS, DIM))
    x = (centres[rng.integers(0, PARTS, N)] + rng.normal(scale=0.3, size=(N, DIM))).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(N)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _queries(n: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(9)
    return [rng.standard_normal(DIM).astype(np.float32) for _ in range(n)]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = str(tmp_path_factory.mktemp("probed_ids") / "ds.lance")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=FRAG)
    ds.create_index("vec", "IVF_PQ", num_partitions=PARTS, num_sub_vectors=4)
    lance.dataset(uri).delete("id % 3 = 0")  # after the build: the segment still holds deleted rows
    return uri


def _copy(uri: str, tmp_path: Path) -> str:
    # a path no other test opened: the process-wide segment cache starts cold for it
    dst = str(tmp_path / "copy.lance")
    shutil.copytree(uri, dst)
    return dst


def _same_up_to_ties(theirs: pa.Table, ours: pa.Table) -> None:
    d_t, d_o = theirs["_distance"].to_numpy(), ours["_distance"].to_numpy()
    np.testing.assert_allclose(d_o, d_t, rtol=1e-5, atol=1e-6)
    groups = tie_groups(d_t)
    ids_t, ids_o = np.asarray(theirs["_rowid"].to_pylist()), np.asarray(ours["_rowid"].to_pylist())
    for g in range(int(groups[-1])):
        assert set(ids_t[groups == g].tolist()) == set(ids_o[groups == g].tolist())


def test_a_query_with_deletions_reads_only_the_probed_partitions_row_ids(indexed: str, tmp_path: Path) -> None:
    uri = _copy(indexed, tmp_path)
    ds = lance_format.dataset(uri)
    q = _queries(1)[0]
    near = {"column": "vec", "q": q, "k": 10, "nprobes": 2}
    ours = ds.to_table(nearest=near, columns=["id"], with_row_id=True)
    seg = open_segment(ds._ctx, vector_segments(ds._ctx, "vec")[0])
    assert seg.codes is not None
    probed = set(rank_partitions(seg, q)[:2].tolist())
    assert set(np.flatnonzero(seg.codes.ids_loaded).tolist()) == probed
    assert set(np.flatnonzero(seg.codes.loaded).tolist()) == probed
    assert ours.num_rows == 10 and not any(i % 3 == 0 for i in ours["id"].to_pylist())
    theirs = lance.dataset(uri).to_table(nearest=near, columns=["id", "_distance"], with_row_id=True)
    _same_up_to_ties(theirs, ours)


def test_later_queries_map_the_partitions_they_add_and_match_pylance(indexed: str, tmp_path: Path) -> None:
    uri = _copy(indexed, tmp_path)
    ds, theirs_ds = lance_format.dataset(uri), lance.dataset(uri)
    for nprobes in (1, 3, 5):
        for q in _queries(6):
            near = {"column": "vec", "q": q, "k": 10, "nprobes": nprobes}
            ours = ds.to_table(nearest=near, columns=["id"], with_row_id=True)
            assert not any(i % 3 == 0 for i in ours["id"].to_pylist())
            _same_up_to_ties(theirs_ds.to_table(nearest=near, columns=["id", "_distance"], with_row_id=True), ours)
    seg = open_segment(ds._ctx, vector_segments(ds._ctx, "vec")[0])
    assert seg.codes is not None and not seg.codes.loaded.all()  # 6 queries at 5 of 16 probes leave some unread


def test_a_query_probing_most_partitions_reads_the_whole_segment_at_once(indexed: str, tmp_path: Path) -> None:
    # two thirds of the rows or more: the unread rest comes along in the same range reads
    uri = _copy(indexed, tmp_path)
    ds = lance_format.dataset(uri)
    q = _queries(1)[0]
    near = {"column": "vec", "q": q, "k": 10, "nprobes": PARTS - 1}
    ours = ds.to_table(nearest=near, columns=["id"], with_row_id=True)
    seg = open_segment(ds._ctx, vector_segments(ds._ctx, "vec")[0])
    assert seg.codes is not None and seg.codes.loaded.all() and seg.codes.ids_loaded.all()
    _same_up_to_ties(lance.dataset(uri).to_table(nearest=near, columns=["id", "_distance"], with_row_id=True), ours)


def test_a_short_first_round_reads_row_ids_but_not_codes_of_the_partitions_it_counts(
        indexed: str, tmp_path: Path) -> None:
    uri = _copy(indexed, tmp_path)
    ds = lance_format.dataset(uri)
    q = _queries(1)[0]
    meta = vector_segments(ds._ctx, "vec")[0]
    # an eager read of its own (not the search's cached segment): which rows each partition holds
    eager = read_segment(IndexDir(ds._ctx.store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()}),
                         graph=False)
    ranked = rank_partitions(eager, q)
    target = int(ranked[-4])  # far down the probe order: Auto's first round stops well before it
    addrs = eager.row_ids[eager.partition_rows(target)]
    ids = ((addrs >> np.uint64(32)) * FRAG + (addrs & np.uint64(0xFFFFFFFF))).astype(np.int64)
    kept = sorted(int(i) for i in ids if i % 3)[:12]
    assert len(kept) == 12
    flt = f"id IN ({', '.join(map(str, kept))})"
    # the prefilter keeps 12 rows, all in one partition: the first round finds none of them, so
    # probing widens, counting the kept rows of the rest from their row ids, up to that partition
    near = {"column": "vec", "q": q, "k": 10}
    ours = ds.to_table(nearest=near, columns=["id"], with_row_id=True, filter=flt, prefilter=True)
    seg = open_segment(ds._ctx, meta)
    assert seg.codes is not None
    ids_read, codes_read = seg.codes.ids_loaded, seg.codes.loaded
    assert ids_read.all()  # every partition after the first round was counted
    assert set(np.flatnonzero(codes_read).tolist()) == set(ranked[:ranked.size - 3].tolist())
    assert ours.num_rows == 10 and set(ours["id"].to_pylist()) <= set(kept)
    theirs = lance.dataset(uri).to_table(nearest=near, columns=["id", "_distance"], with_row_id=True,
                                         filter=flt, prefilter=True)
    _same_up_to_ties(theirs, ours)
