"""ZONEMAP and BLOOMFILTER builds read the column batch by batch (a fragment's zones may span scan
batches; the rows past its last whole zone wait for the next batch) and still write what pylance
14.0.2 writes: checked on a fragment longer than a build's scan batch whose zone size does not
divide the batch, small fragments, deleted rows and nulls."""

from __future__ import annotations

import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices.builder import IndexConfig

import lance_format
from lance_format.file.reader import LanceFileReader
from lance_format.index import zonemap, zones

ROWS = 150_000  # one fragment past the 131,072-row scan batch of a build task
ZONE = 1000  # does not divide the batch: a zone spans two batches


def _table() -> pa.Table:
    rng = np.random.default_rng(9)
    n = ROWS + 2_500
    v = rng.integers(-10**12, 10**12, n)
    valid = rng.random(n) > 0.01
    return pa.table({"v": pa.array(v, mask=~valid), "key": pa.array(rng.integers(0, 1 << 40, n), mask=~valid)})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("zone_stream")
    base = str(root / "base.lance")
    table = _table()
    lance.write_dataset(table.slice(0, ROWS), base, max_rows_per_file=ROWS)
    lance.write_dataset(table.slice(ROWS), base, mode="append", max_rows_per_file=1_000)
    lance.dataset(base).delete("v % 97 = 3")  # gaps inside zones and fragments
    theirs, ours = str(root / "theirs.lance"), str(root / "ours.lance")
    shutil.copytree(base, theirs)
    shutil.copytree(base, ours)
    pl = lance.dataset(theirs)
    pl.create_scalar_index("v", IndexConfig("zonemap", {"rows_per_zone": ZONE}))
    pl.create_scalar_index("key", IndexConfig("bloomfilter", {"number_of_items": ZONE, "probability": 0.01}))
    mine = lance_format.dataset(ours)
    mine.create_scalar_index("v", "ZONEMAP", rows_per_zone=ZONE)
    mine.create_scalar_index("key", "BLOOMFILTER", number_of_items=ZONE, probability=0.01)
    return theirs, ours


def _zone_file(uri: str, col: str, name: str) -> pa.Table:
    uuid = next(i["uuid"] for i in lance.dataset(uri).list_indices() if i["fields"] == [col])
    return LanceFileReader(f"{uri}/_indices/{uuid}/{name}").read_all().to_table()


@pytest.mark.parametrize(("col", "name"), [("v", zonemap.FILE), ("key", "bloomfilter.lance")])
def test_batch_by_batch_build_writes_pylances_zones(built: tuple[str, str], col: str, name: str) -> None:
    theirs, ours = built
    assert _zone_file(ours, col, name).equals(_zone_file(theirs, col, name))


@pytest.mark.parametrize("flt", ["v >= 0 AND v < 20000000000", "v IS NULL", "key = 12345"])
def test_batch_by_batch_build_answers_as_pylance(built: tuple[str, str], flt: str) -> None:
    theirs, ours = built
    want = lance.dataset(theirs).count_rows(filter=flt)
    assert lance_format.dataset(ours).count_rows(filter=flt) == want
    assert lance_format.dataset(ours).to_table(filter=flt).num_rows == want


def test_whole_zones_regroups_batches_into_the_zones_of_the_whole_column() -> None:
    rng = np.random.default_rng(2)
    addrs = np.concatenate([(np.uint64(f) << np.uint64(32)) + np.sort(rng.choice(4000, n, replace=False))
                            .astype(np.uint64) for f, n in ((0, 2500), (2, 7), (5, 1300))])
    values = pa.array(np.arange(addrs.size))
    cuts = np.sort(rng.choice(np.arange(1, addrs.size), 25, replace=False))
    edges = [0, *cuts.tolist(), addrs.size]
    batches = [(values.slice(a, b - a), addrs[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    runs = list(zones.whole_zones(batches, 97))
    assert np.array_equal(np.concatenate([r[1] for r in runs]), addrs)
    assert pa.concat_arrays([r[0] for r in runs]).equals(values)
    whole = zones.cut_zones(addrs, 97)
    parts = [zones.cut_zones(a, 97) for _, a in runs]
    for field in ("fragment_id", "zone_start", "zone_length"):
        assert np.array_equal(np.concatenate([getattr(p, field) for p in parts]), getattr(whole, field))
