"""A BLOOMFILTER point query hashes its value and finds its bits on Python ints (no vectorised
steps for one value): the same hashes as the vectorised XXH64 and the same candidate zones as the
vectorised probe of many values, on a filter pylance 14.0.2 wrote."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices.builder import IndexConfig

from lance_format.index import bloomfilter, xxh64
from lance_format.index.predicates import In, Range
from lance_format.index.store import IndexDir
from lance_format.storage import open_store


@pytest.mark.parametrize("width", [1, 2, 4, 8])
def test_few_values_hash_as_the_vectorised_xxh64(width: int) -> None:
    rng = np.random.default_rng(width)
    raw = rng.integers(np.iinfo(f"<i{width}").min, np.iinfo(f"<i{width}").max, 500, dtype=f"<i{width}")
    raw[:3] = [0, -1, np.iinfo(f"<i{width}").max]
    want = xxh64._xxh64_fixed(raw, width)
    assert xxh64.xxh64_few(raw.view(f"<u{width}").tolist(), width) == want.tolist()
    # hashes() takes the Python path for a handful of values and gives the same
    assert np.array_equal(xxh64.hashes(pa.array(raw[:5])), want[:5])


def test_point_probe_picks_the_zones_of_the_vectorised_probe(tmp_path: pytest.TempPathFactory) -> None:
    rng = np.random.default_rng(5)
    uri = str(tmp_path / "bf.lance")
    keys = rng.integers(0, 1 << 40, 4000)
    ds = lance.write_dataset(pa.table({"k": keys}), uri, max_rows_per_file=1500)
    ds.create_scalar_index("k", IndexConfig("bloomfilter", {"number_of_items": 250, "probability": 0.01}))
    uuid = ds.list_indices()[0]["uuid"]
    index = bloomfilter.BloomFilterIndex(IndexDir(open_store(uri), uuid))
    probes = [int(keys[i]) for i in (0, 17, 1499, 1500, 3999)] + [-5, 1 << 41]
    singles = [index.candidate_zones(Range(lo=pa.scalar(v), hi=pa.scalar(v))) for v in probes]
    many = index.candidate_zones(In(tuple(pa.scalar(v) for v in probes)))  # > 4 hashes: vectorised
    assert np.array_equal(np.logical_or.reduce(singles), many)
    for v, hit in zip(probes[:5], singles[:5], strict=True):
        assert hit.sum() >= 1
        truth = lance.dataset(uri).to_table(columns=[], filter=f"k = {v}", with_row_address=True)
        assert np.isin(truth.column("_rowaddr").to_numpy(), index.search(Range(lo=pa.scalar(v), hi=pa.scalar(v)))).all()
