"""Reading pylance 14.0.2's vector index files: codecs, layout and per-segment search.

One module-scoped set of pylance-built indices (2,000 × 16 float32 in 2 fragments, 4
partitions) for every kind and metric; our segment search is compared with pylance's
``nearest=`` on the same index and ``nprobes``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lance_format.index.codec import (
    Tensor,
    decode_ivf,
    decode_vector_details,
    encode_ivf,
    encode_vector_details,
)
from lance_format.index.store import IndexDir
from lance_format.index.vector.distance import distances
from lance_format.index.vector.layout import (
    AUX_FILE,
    INDEX_FILE,
    FlatStorage,
    PQStorage,
    RQStorage,
    SQStorage,
    read_segment,
    write_ivf_files,
)
from lance_format.index.vector.search import Probe, search_segment
from lance_format.storage import open_store
from lance_format.table.versions import load_manifest

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

N, DIM = 2000, 16
KINDS = ["IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_RQ"]
METRICS = ["l2", "cosine", "dot"]


def vectors(seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal((N, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """Dataset path per (kind, metric), each with one pylance-built index."""
    root = tmp_path_factory.mktemp("vector_read")
    x = vectors()
    tbl = pa.table({"id": pa.array(np.arange(N)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})
    out = {}
    for kind in KINDS:
        for metric in METRICS:
            if kind == "IVF_RQ" and metric != "l2":
                continue
            uri = str(root / f"{kind}_{metric}.lance")
            ds = lance.write_dataset(tbl, uri, max_rows_per_file=1000)
            kw = {"num_sub_vectors": 4} if "PQ" in kind else {}
            ds.create_index("vec", kind, metric=metric, num_partitions=4, **kw)
            out[(kind, metric)] = uri
    return out


def _segment_files(uri: str) -> tuple[Any, IndexDir]:
    store = open_store(uri)
    meta = next(m for m in load_manifest(store).indices if m.name == "vec_idx")
    return meta, IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()})


@pytest.mark.parametrize("kind", KINDS)
def test_details_and_ivf_messages_decode_and_encode_to_pylances_bytes(built: dict[tuple[str, str], str],
                                                                      kind: str) -> None:
    for (k, metric), uri in built.items():
        if k != kind:
            continue
        meta, src = _segment_files(uri)
        raw = meta.index_details.value
        details = decode_vector_details(raw)
        assert encode_vector_details(details) == raw
        assert details.index_type == kind
        assert details.metric == metric
        assert ("lance.ivf.max_iters", "50") in details.runtime_hints
        if "PQ" in kind:
            assert (details.compression, details.num_bits, details.num_sub_vectors) == ("pq", 8, 4)
        if "HNSW" in kind:
            assert details.hnsw is not None and details.hnsw.max_connections == 20
        for name in (INDEX_FILE, AUX_FILE):
            reader = src.reader(name)
            buf = reader.read_global_buffer(int(reader.schema.metadata[b"lance:ivf"]))
            ivf = decode_ivf(buf)
            assert encode_ivf(ivf) == buf
            if name == INDEX_FILE:
                assert ivf.centroids is not None and ivf.centroids.shape == (4, DIM)
                assert ivf.loss is not None
            else:
                assert int(ivf.lengths.sum()) == N


def test_tensor_round_trips_numpy() -> None:
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor.from_numpy(arr)
    assert (t.data_type, t.shape) == (2, (3, 4))
    np.testing.assert_array_equal(t.to_numpy(), arr)


@pytest.mark.parametrize("kind", KINDS)
def test_segment_holds_every_row_with_pylances_partitions(built: dict[tuple[str, str], str], kind: str) -> None:
    x = vectors()
    for (k, metric), uri in built.items():
        if k != kind:
            continue
        _, src = _segment_files(uri)
        seg = read_segment(src)
        assert seg.index_type == kind and seg.metric == metric
        addrs = seg.row_ids
        assert sorted(addrs.tolist()) == sorted(((i // 1000) << 32) | (i % 1000) for i in range(N))
        rows = (addrs >> 32) * 1000 + (addrs & 0xFFFFFFFF)
        for p in range(seg.num_partitions):  # sorted by row id inside each partition
            part = addrs[seg.partition_rows(p)]
            assert np.all(np.diff(part.astype(np.int64)) > 0)
        st = seg.storage
        if isinstance(st, FlatStorage):
            want = x[rows]
            if metric == "cosine":
                want = want / np.linalg.norm(want, axis=1, keepdims=True)
            np.testing.assert_allclose(st.vectors, want, rtol=1e-5, atol=1e-6)
        elif isinstance(st, PQStorage) and metric == "l2":
            # the untransposed code of each vector is the nearest codeword of its residual
            part_of = np.repeat(np.arange(seg.num_partitions), seg.lengths)
            resid = (x[rows] - seg.centroids[part_of]).reshape(N, 4, DIM // 4)
            d = ((resid[:, :, None, :] - st.codebook[None]) ** 2).sum(-1)
            assert np.mean(d.argmin(-1) == st.codes) > 0.999
        elif isinstance(st, SQStorage):
            assert st.codes.shape == (N, DIM) and st.end > st.start
        elif kind == "IVF_RQ":
            assert isinstance(st, RQStorage) and "_rabit_codes" in st.columns.schema.names
        if "HNSW" in kind:
            assert seg.hnsw is not None and len(seg.hnsw.partitions) == 4


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "IVF_RQ"])
@pytest.mark.parametrize("metric", METRICS)
def test_segment_search_finds_pylances_neighbours(built: dict[tuple[str, str], str], kind: str,
                                                  metric: str) -> None:
    uri = built[(kind, metric)]
    _, src = _segment_files(uri)
    seg = read_segment(src)
    ds = lance.dataset(uri)
    rng = np.random.default_rng(7)
    overlap, err = [], []
    for _ in range(20):
        q = rng.standard_normal(DIM).astype(np.float32)
        rows, dist = search_segment(seg, q, 10, Probe(2, 2, exact=True))
        theirs = ds.to_table(nearest={"column": "vec", "q": q, "k": 10, "nprobes": 2}, columns=["id", "_distance"],
                             with_row_id=True)
        overlap.append(len(set(seg.row_ids[rows].tolist()) & set(theirs["_rowid"].to_pylist())) / 10)
        if "HNSW" not in kind:  # the same rows scored the same way: equal distances
            err.append(float(np.abs(dist - theirs["_distance"].to_numpy()).max()))
    assert np.mean(overlap) >= 0.95
    if err:
        assert max(err) < 1e-3


def test_flat_distances_match_pylances_exact_search(built: dict[tuple[str, str], str]) -> None:
    x = vectors()
    q = np.random.default_rng(3).standard_normal(DIM).astype(np.float32)
    for metric in METRICS:
        ds = lance.dataset(built[("IVF_FLAT", metric)])
        t = ds.to_table(nearest={"column": "vec", "q": q, "k": 10, "use_index": False, "metric": metric},
                        columns=["id", "_distance"])
        ours = distances(metric, x[t["id"].to_numpy()], q)  # type: ignore[arg-type]
        np.testing.assert_allclose(ours, t["_distance"].to_numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_written_segment_reads_back_with_pylances_metadata(built: dict[tuple[str, str], str], kind: str,
                                                           tmp_path: Path) -> None:
    _, src = _segment_files(built[(kind, "l2")])
    seg = read_segment(src)
    store = open_store(str(tmp_path))
    out = IndexDir(store, "00000000-0000-0000-0000-000000000000")
    files = write_ivf_files(out, seg)
    assert [f.path for f in files] == [AUX_FILE, INDEX_FILE]
    again = read_segment(out)
    np.testing.assert_array_equal(again.row_ids, seg.row_ids)
    np.testing.assert_array_equal(again.lengths, seg.lengths)
    np.testing.assert_array_equal(again.centroids, seg.centroids)
    assert again.loss == seg.loss
    for name in (INDEX_FILE, AUX_FILE):
        ours, theirs = out.reader(name), src.reader(name)
        assert ours.file_version == (2, 2)
        assert dict(ours.schema.metadata) == dict(theirs.schema.metadata)
        assert ours.schema == theirs.schema
        assert ours.read_all().to_table().equals(theirs.read_all().to_table())
        gi = int(theirs.schema.metadata[b"lance:ivf"])
        assert ours.read_global_buffer(gi) == theirs.read_global_buffer(gi)
    if isinstance(seg.storage, PQStorage):
        assert out.reader(AUX_FILE).read_global_buffer(2) == src.reader(AUX_FILE).read_global_buffer(2)
    shutil.rmtree(tmp_path / "_indices")
