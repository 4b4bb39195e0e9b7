"""A searched vector segment reads its code rows per partition, as queries first probe them.

``read_segment(lazy=True)`` (what ``nearest=`` searches open) leaves the row ids and the
storage's code rows in ``auxiliary.idx`` until a query probes their partition. These tests check,
on indices pylance 14.0.2 and we build, that a first query reads only the probed partitions'
bytes, that the rows read equal an eager read's, and that searches on a lazily read segment
return exactly what the eagerly read segment returns (the same files, so no ties to allow for).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format import io_stats
from lance_format.index.store import IndexDir
from lance_format.index.vector import search
from lance_format.index.vector.layout import (
    FlatStorage,
    IvfSegment,
    PQStorage,
    SQStorage,
    read_segment,
    write_ivf_files,
)
from lance_format.index.vector.search import Probe, search_segment
from lance_format.storage import open_store
from lance_format.table.versions import load_manifest

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM, PARTS = 20000, 32, 32
#: (who builds, index type, metric, extra build arguments)
CASES = [("pylance", "IVF_PQ", "l2", {"num_sub_vectors": 8}),
         ("pylance", "IVF_PQ", "cosine", {"num_sub_vectors": 8, "num_bits": 4}),
         ("pylance", "IVF_SQ", "l2", {}),
         ("pylance", "IVF_HNSW_SQ", "l2", {}),
         ("pylance", "IVF_FLAT", "l2", {}),
         ("ours", "IVF_PQ", "l2", {"num_sub_vectors": 8}),
         ("ours", "IVF_SQ", "dot", {}),
         ("ours", "IVF_HNSW_SQ", "l2", {})]
IDS = [f"{who}-{kind}-{metric}" + ("-4bit" if kw.get("num_bits") == 4 else "") for who, kind, metric, kw in CASES]


def _vectors(seed: int, n: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(7).normal(size=(40, DIM))
    return (centres[rng.integers(0, 40, n)] + rng.normal(scale=0.4, size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module", params=range(len(CASES)), ids=IDS)
def index_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> IndexDir:
    who, kind, metric, kw = CASES[request.param]
    uri = str(tmp_path_factory.mktemp("lazy") / "ds.lance")
    x = _vectors(0, N)
    tbl = pa.table({"id": pa.array(np.arange(N)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    lance.write_dataset(tbl, uri, max_rows_per_file=1500)
    ds = lance.dataset(uri) if who == "pylance" else lance_format.dataset(uri)
    ds.create_index("vec", kind, metric=metric, num_partitions=PARTS, **kw)
    store = open_store(uri)
    meta = next(m for m in load_manifest(store).indices if m.name == "vec_idx")
    return IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()})


def _codes(seg: IvfSegment) -> np.ndarray[Any, Any]:
    st = seg.storage
    if isinstance(st, FlatStorage):
        return st.vectors
    assert isinstance(st, (PQStorage, SQStorage))
    return st.codes


def _read_bytes(src: IndexDir) -> int:
    return io_stats.totals(src.store.uri(""))[1]


def test_a_first_query_reads_only_the_probed_partitions(index_dir: IndexDir) -> None:
    before = _read_bytes(index_dir)
    eager = read_segment(index_dir, graph=False)
    eager_bytes = _read_bytes(index_dir) - before
    q = _vectors(3, 1)[0]
    before = _read_bytes(index_dir)
    seg = read_segment(index_dir, graph=False, lazy=True)
    assert seg.codes is not None and not seg.codes.loaded.any()
    search_segment(seg, q, 10, Probe(2, 2, exact=True, k=10))
    lazy_bytes = _read_bytes(index_dir) - before
    probed = search.rank_partitions(seg, q)[:2]
    assert set(np.flatnonzero(seg.codes.loaded).tolist()) == set(probed.tolist())
    # the row ids and the chunks holding the probed rows' codes: fewer bytes than the eager read.
    # How many fewer depends on how many rows the build put in the probed partitions (pylance's
    # clustering is random: its IVF_PQ here read 0.84 of the eager bytes once, 0.2-0.56 in others)
    assert lazy_bytes < eager_bytes, (lazy_bytes, eager_bytes)
    assert set(np.flatnonzero(seg.codes.ids_loaded).tolist()) == set(probed.tolist())
    for p in probed.tolist():
        rows = seg.partition_rows(p)
        assert np.array_equal(_codes(seg)[rows], _codes(eager)[rows])
        assert np.array_equal(seg.row_ids[rows], eager.row_ids[rows])


def test_searches_equal_the_eager_segment(index_dir: IndexDir) -> None:
    eager = read_segment(index_dir, graph=False)
    seg = read_segment(index_dir, graph=False, lazy=True)
    ok = np.random.default_rng(1).random(N) < 0.9
    for i, q in enumerate(_vectors(4, 8)):
        for probe in (Probe(1, 1, exact=True, k=10), Probe(3, 3, exact=True, k=10), Probe(1, None, k=10)):
            allowed = ok.__getitem__ if i % 2 else None
            a = search_segment(seg, q, 10, probe, allowed)
            b = search_segment(eager, q, 10, probe, allowed)
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    seg.load_all()
    assert seg.codes is not None and seg.codes.loaded.all()
    assert np.array_equal(_codes(seg), _codes(eager))
    assert np.array_equal(seg.row_ids, eager.row_ids)


def test_writing_a_lazy_segment_back_reads_every_partition(index_dir: IndexDir, tmp_path: Any) -> None:
    seg = read_segment(index_dir, graph=False, lazy=True)
    out = IndexDir(open_store(str(tmp_path)), index_dir.uuid, index_dir.version)
    write_ivf_files(out, seg)
    again = read_segment(out, graph=False)
    assert np.array_equal(_codes(again), _codes(read_segment(index_dir, graph=False)))
    assert np.array_equal(again.row_ids, seg.row_ids)
