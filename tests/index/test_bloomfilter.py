"""BLOOMFILTER indices in pylance 14.0.2's format: our filters are bit for bit pylance's (XXH64 of each
value's bytes, split-block filters sized as upstream sizes them), and our reader's candidates cover
every matching row."""

from __future__ import annotations

import datetime

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices.builder import IndexConfig

from lance_format.file.reader import LanceFileReader
from lance_format.index import bloomfilter
from lance_format.index.predicates import In, IsNull, Range
from lance_format.index.store import IndexDir
from lance_format.storage import open_store


def _table(n: int = 3000) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({
        "i64": pa.array(rng.integers(-10**12, 10**12, n)),
        "i32": pa.array(rng.integers(-1000, 1000, n).astype(np.int32)),
        "u8": pa.array(rng.integers(0, 255, n).astype(np.uint8)),
        "f64": pa.array(rng.normal(size=n)),
        "f32": pa.array(rng.normal(size=n).astype(np.float32)),
        "s": pa.array([("x" * (i % 70)) + str(i) + "é" if i % 5 else None for i in range(n)]),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(n)]),
        "ts": pa.array(np.arange(n).astype("datetime64[us]")),
        "bin": pa.array([bytes([i % 256]) * (i % 40) for i in range(n)]),
    })


@pytest.fixture(scope="module")
def pylance_blooms(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, lance.LanceDataset]:
    uri = str(tmp_path_factory.mktemp("bf") / "bf.lance")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=1000)
    ds.delete("i32 > 900")
    for col in ds.schema.names:
        ds.create_scalar_index(col, IndexConfig("bloomfilter", {"number_of_items": 300, "probability": 0.05}))
    return uri, lance.dataset(uri)


def test_xxh64_of_the_empty_input_is_upstreams() -> None:
    assert bloomfilter.hashes(pa.array([""])).tolist() == [17241709254077376921]  # sbbf.rs test_hash_bytes


def test_filter_size_follows_the_expected_items_and_probability() -> None:
    assert bloomfilter.filter_bytes(8192, 0.00057) == 32768  # pylance 14.0.2's default filters
    assert bloomfilter.filter_bytes(300, 0.05) == 512


@pytest.mark.parametrize("col", [f.name for f in _table(1).schema])
def test_bloomfilter_file_holds_what_pylance_writes(pylance_blooms: tuple[str, lance.LanceDataset],
                                                     tmp_path: object, col: str) -> None:
    uri, ds = pylance_blooms
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    data = ds.to_table(columns=[col], with_row_address=True)
    out = IndexDir(open_store(str(tmp_path)), "ours", "2.2")
    bloomfilter.write_bloomfilter(out, data.column(col).combine_chunks(), data.column("_rowaddr").to_numpy(),
                                  300, 0.05)
    theirs = LanceFileReader(f"{uri}/_indices/{uuid}/{bloomfilter.FILE}")
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{bloomfilter.FILE}")
    assert theirs.read_all().to_table().equals(ours.read_all().to_table())
    assert theirs.schema.metadata == ours.schema.metadata
    assert theirs.read_global_buffer(1) == ours.read_global_buffer(1)


@pytest.mark.parametrize(("col", "sql"), [("i64", "i64 = {v}"), ("s", "s = '{v}'"), ("f64", "f64 = {v}"),
                                          ("d", "d = date '{v}'")])
def test_bloomfilter_candidates_cover_every_matching_row(pylance_blooms: tuple[str, lance.LanceDataset],
                                                         col: str, sql: str) -> None:
    uri, ds = pylance_blooms
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    index = bloomfilter.BloomFilterIndex(IndexDir(open_store(uri), uuid))
    values = ds.to_table(columns=[col]).column(col).drop_null()
    for v in values.take(pa.array([3, 700, 1999])):
        cand = index.search(Range(v, True, v, True))
        truth = ds.to_table(columns=[], filter=sql.format(v=v.as_py()), with_row_address=True)
        assert truth.num_rows >= 1
        assert np.isin(truth.column("_rowaddr").to_numpy(), cand).all()
        assert cand.size < ds.count_rows()  # other zones were ruled out
    both = index.search(In(tuple(values.take(pa.array([3, 1999])))))
    assert both.size >= index.search(Range(values[3], True, values[3], True)).size


def test_bloomfilter_is_null_picks_zones_with_nulls(pylance_blooms: tuple[str, lance.LanceDataset]) -> None:
    uri, ds = pylance_blooms
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == ["s"])
    index = bloomfilter.BloomFilterIndex(IndexDir(open_store(uri), uuid))
    truth = ds.to_table(columns=[], filter="s IS NULL", with_row_address=True).column("_rowaddr").to_numpy()
    assert np.isin(truth, index.search(IsNull())).all()
    nulls = index.null_rows()
    assert nulls is not None and sorted(nulls.tolist()) == sorted(truth.tolist())


# --- the kind: per-task encode + write --------------------------------------------------------
from lance_format.index.kind import BuildContext, TrainingData  # noqa: E402
from lance_format.index.kinds import bloomfilter as bloom_kind  # noqa: E402


@pytest.mark.parametrize("col", ["s", "i64"])
def test_bloomfilter_kind_built_per_fragment_equals_pylances_file(pylance_blooms: tuple[str, lance.LanceDataset],
                                                                  tmp_path: object, col: str) -> None:
    uri, ds = pylance_blooms
    params = bloom_kind.KIND.params(col, {"number_of_items": 300, "probability": 0.05})
    ctx = BuildContext(col, ds.schema.field(col).type, params, False, {})
    chunks = []
    for frag in ds.get_fragments():
        t = frag.to_table(columns=[col], with_row_address=True)
        chunks.append(bloom_kind.KIND.encode(TrainingData(t.column(col).combine_chunks(),
                                                          t.column("_rowaddr").to_numpy()), None, ctx))
    bloom_kind.KIND.write(IndexDir(open_store(str(tmp_path)), "ours", "2.2"), chunks, None, ctx)
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    theirs = LanceFileReader(f"{uri}/_indices/{uuid}/{bloomfilter.FILE}")
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{bloomfilter.FILE}")
    assert theirs.read_all().to_table().equals(ours.read_all().to_table())
    assert theirs.schema.metadata == ours.schema.metadata
    assert theirs.read_global_buffer(1) == ours.read_global_buffer(1)


def test_bloomfilter_kind_refuses_bad_parameters() -> None:
    from lance_format.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="probability"):
        bloom_kind.KIND.params("s", {"probability": 1.5})
    with pytest.raises(InvalidInputError, match="unknown parameter"):
        bloom_kind.KIND.params("s", {"rows_per_zone": 10})
