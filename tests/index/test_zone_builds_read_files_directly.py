"""ZONEMAP and BLOOMFILTER builds decode each fragment's data file whole (no scanner batches) and
still write what pylance 14.0.2 writes, on 2.0 and 2.2 files with nulls, deleted rows and several
fragments; pylance reads the indices we write and answers as it does with its own."""

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

ZONE = 700


def _table() -> pa.Table:
    rng = np.random.default_rng(26)
    n = 6_500
    valid = rng.random(n) > 0.02
    return pa.table({"v": pa.array(np.cumsum(rng.integers(0, 50, n)), mask=~valid),
                     "key": pa.array(rng.integers(0, 1 << 40, n), mask=~valid),
                     "f": pa.array(rng.normal(size=n), mask=~valid)})


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp(f"zone_direct_{request.param.replace('.', '_')}")
    base = str(root / "base.lance")
    table = _table()
    lance.write_dataset(table.slice(0, 4_000), base, max_rows_per_file=1_500, data_storage_version=request.param)
    lance.write_dataset(table.slice(4_000, 2_000), base, mode="append", max_rows_per_file=900)
    lance.dataset(base).delete("key % 13 = 5")
    lance.write_dataset(table.slice(6_000), base, mode="append")  # a fragment with no deletions
    theirs, ours = str(root / "theirs.lance"), str(root / "ours.lance")
    shutil.copytree(base, theirs)
    shutil.copytree(base, ours)
    pl = lance.dataset(theirs)
    pl.create_scalar_index("v", IndexConfig("zonemap", {"rows_per_zone": ZONE}))
    pl.create_scalar_index("f", IndexConfig("zonemap", {"rows_per_zone": ZONE}))
    pl.create_scalar_index("key", IndexConfig("bloomfilter", {"number_of_items": ZONE, "probability": 0.01}))
    mine = lance_format.dataset(ours)
    mine.create_scalar_index("v", "ZONEMAP", rows_per_zone=ZONE)
    mine.create_scalar_index("f", "ZONEMAP", rows_per_zone=ZONE)
    mine.create_scalar_index("key", "BLOOMFILTER", number_of_items=ZONE, probability=0.01)
    return theirs, ours


def _zone_file(uri: str, col: str, name: str) -> pa.Table:
    uuid = next(i["uuid"] for i in lance.dataset(uri).list_indices() if i["fields"] == [col])
    return LanceFileReader(f"{uri}/_indices/{uuid}/{name}").read_all().to_table()


def test_build_reads_every_fragment_file_whole(built: tuple[str, str]) -> None:
    ds = lance_format.dataset(built[1])
    frags = list(ds._ctx.manifest.fragments)
    direct = zones.file_columns(ds._ctx, frags, "v")
    assert isinstance(direct, zones.WholeFragments)
    got = list(direct.columns())
    want = ds.to_table(columns=["v"], with_row_address=True)
    assert pa.concat_arrays([fc.values for fc in got]).equals(want.column("v").combine_chunks())
    addrs = np.concatenate([fc.addresses() for fc in got])
    assert np.array_equal(addrs, want.column("_rowaddr").to_numpy())
    assert any(fc.live is not None for fc in got) and any(fc.live is None for fc in got)
    tuples = list(zones.file_columns(ds._ctx, frags, "v") or [])  # iterated as a scan's (values, addresses)
    assert np.array_equal(np.concatenate([a for _, a in tuples]), addrs)
    for rows_per_zone in (1, 7, 700, 5000):  # zones cut as from the addresses
        whole = zones.cut_zones(addrs, rows_per_zone)
        parts = [fc.zones(rows_per_zone) for fc in got]
        for field in ("fragment_id", "zone_start", "zone_length"):
            assert np.array_equal(np.concatenate([getattr(p, field) for p in parts]), getattr(whole, field))


@pytest.mark.parametrize(("col", "name"), [("v", zonemap.FILE), ("f", zonemap.FILE), ("key", "bloomfilter.lance")])
def test_direct_build_writes_pylances_zones(built: tuple[str, str], col: str, name: str) -> None:
    theirs, ours = built
    assert _zone_file(ours, col, name).equals(_zone_file(theirs, col, name))


@pytest.mark.parametrize("flt", ["v >= 1000 AND v < 60000", "v IS NULL", "f > 1.5", "key = 12345", "key IS NULL"])
def test_direct_build_answers_as_pylance_in_both_engines(built: tuple[str, str], flt: str) -> None:
    theirs, ours = built
    want = lance.dataset(theirs).to_table(filter=flt, columns=["v", "key"]).sort_by("v")
    assert lance_format.dataset(ours).to_table(filter=flt, columns=["v", "key"]).sort_by("v").equals(want)
    # pylance reads the indices we wrote
    assert lance.dataset(ours).to_table(filter=flt, columns=["v", "key"]).sort_by("v").equals(want)


@pytest.mark.parametrize("picked", [0, 1, 3, 8, 9, 40])
def test_zone_rows_lists_every_row_of_the_picked_zones(picked: int) -> None:
    rng = np.random.default_rng(picked)
    frag = np.repeat(np.arange(5, dtype=np.uint64), 10)
    start = np.tile(np.arange(10, dtype=np.uint64) * 100, 5)
    length = rng.integers(1, 100, 50).astype(np.uint64)
    which = np.zeros(50, bool)
    which[rng.choice(50, picked, replace=False)] = True
    want = [(int(f) << 32) + int(s) + k for f, s, n, w in zip(frag, start, length, which, strict=True) if w
            for k in range(int(n))]
    got = zones.zone_rows(frag, start, length, which)
    assert got.dtype == np.uint64
    assert got.tolist() == want
