"""ZONEMAP and BLOOMFILTER builds computed for all zones at once (one numpy pass for every zone's
min / max, zones cut per fragment, bloom filters set in cache-sized passes) write what pylance 14.0.2
writes: checked on columns the one-pass min / max takes (dates, timestamps, times, floats without NaN
or zero, unsigned and narrow integers) and on filters built in many small passes."""

from __future__ import annotations

import datetime

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.indices.builder import IndexConfig

from lance_format.file.reader import LanceFileReader
from lance_format.index import bloomfilter, zonemap
from lance_format.index.store import IndexDir
from lance_format.storage import open_store


def _table(n: int = 2500) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({
        "d": pa.array([datetime.date(2021, 1, 1) + datetime.timedelta(days=int(i)) for i in rng.integers(0, 900, n)]),
        "ts": pa.array(rng.integers(0, 10**12, n).astype("datetime64[us]")),
        "t": pa.array(rng.integers(0, 86_400 * 10**6, n), pa.int64()).cast(pa.time64("us")),
        "f": pa.array(rng.uniform(0.5, 9.5, n)),
        "u16": pa.array(rng.integers(0, 60_000, n).astype(np.uint16)),
        "i8": pa.array(rng.integers(-100, 100, n).astype(np.int8)),
        "key": pa.array(rng.integers(0, 1 << 40, n)),
    })


@pytest.fixture(scope="module")
def pylance_built(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, lance.LanceDataset]:
    uri = str(tmp_path_factory.mktemp("zones") / "z.lance")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=700)
    ds.delete("u16 < 3000")  # gaps inside zones and fragments
    for col in ("d", "ts", "t", "f", "u16", "i8"):
        ds.create_scalar_index(col, IndexConfig("zonemap", {"rows_per_zone": 150}))
    ds.create_scalar_index("key", IndexConfig("bloomfilter", {"number_of_items": 100, "probability": 0.01}))
    return uri, lance.dataset(uri)


def _file(uri: str, ds: lance.LanceDataset, col: str, name: str) -> LanceFileReader:
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    return LanceFileReader(f"{uri}/_indices/{uuid}/{name}")


@pytest.mark.parametrize("col", ["d", "ts", "t", "f", "u16", "i8"])
def test_zonemap_one_pass_min_max_writes_pylances_zones(pylance_built: tuple[str, lance.LanceDataset],
                                                        tmp_path: object, col: str) -> None:
    uri, ds = pylance_built
    data = ds.to_table(columns=[col], with_row_address=True)
    out = IndexDir(open_store(str(tmp_path)), "ours", "2.2")
    zonemap.write_zonemap(out, data.column(col).combine_chunks(), data.column("_rowaddr").to_numpy(), 150)
    theirs = _file(uri, ds, col, zonemap.FILE).read_all().to_table()
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{zonemap.FILE}").read_all().to_table()
    assert ours.equals(theirs)


def test_zone_min_max_in_one_pass_equals_each_zones_kernel() -> None:
    rng = np.random.default_rng(3)
    addrs = np.sort(np.concatenate([(np.uint64(f) << np.uint64(32)) + np.sort(rng.choice(5000, 1200, replace=False))
                                    .astype(np.uint64) for f in (0, 3, 7)]))
    zones = zonemap.cut_zones(addrs, 97)
    for values in (pa.array(rng.integers(-10**15, 10**15, addrs.size)),
                   pa.array(rng.uniform(1, 2, addrs.size).astype(np.float32)),
                   pa.array(rng.integers(0, 10**9, addrs.size), pa.int64()).cast(pa.timestamp("ns"))):
        table = zonemap.zone_stats(values, zones)
        for k, (a, b) in enumerate(zip(zones.first.tolist(), zones.stop.tolist(), strict=True)):
            mm = pc.min_max(values.slice(a, b - a))
            assert table.column("min")[k] == mm["min"].cast(values.type)
            assert table.column("max")[k] == mm["max"].cast(values.type)


def test_zones_are_cut_per_fragment_every_rows_per_zone_live_rows() -> None:
    rng = np.random.default_rng(4)
    frags = (0, 1, 5, 70_000)  # far-apart fragment ids take the per-row path
    for chosen in (frags[:3], frags):
        parts = [(np.uint64(f) << np.uint64(32)) + np.sort(rng.choice(900, int(rng.integers(1, 600)), replace=False))
                 .astype(np.uint64) for f in chosen]
        addrs = np.concatenate(parts)
        zones = zonemap.cut_zones(addrs, 50)
        want_first = np.concatenate([np.arange(0, p.size, 50) + sum(q.size for q in parts[:i])
                                     for i, p in enumerate(parts)])
        assert zones.first.tolist() == want_first.tolist()
        assert zones.stop.tolist() == np.append(want_first[1:], addrs.size).tolist()
        assert zones.fragment_id.tolist() == (addrs[want_first] >> np.uint64(32)).tolist()
        assert zones.zone_start.tolist() == (addrs[want_first] & np.uint64(0xFFFFFFFF)).tolist()
        last = np.append(want_first[1:], addrs.size) - 1
        assert zones.zone_length.tolist() == (addrs[last] - addrs[want_first] + np.uint64(1)).tolist()


def test_bloomfilters_set_in_many_passes_are_pylances(pylance_built: tuple[str, lance.LanceDataset],
                                                      tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    uri, ds = pylance_built
    monkeypatch.setattr(bloomfilter, "_BITS_PER_PASS", 3 * 128 * 8)  # three zones' filters a pass
    data = ds.to_table(columns=["key"], with_row_address=True)
    out = IndexDir(open_store(str(tmp_path)), "ours", "2.2")
    bloomfilter.write_bloomfilter(out, data.column("key").combine_chunks(), data.column("_rowaddr").to_numpy(),
                                  100, 0.01)
    theirs = _file(uri, ds, "key", bloomfilter.FILE)
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{bloomfilter.FILE}")
    assert ours.read_all().to_table().equals(theirs.read_all().to_table())


def test_bloomfilter_zones_with_nulls_hold_only_their_values() -> None:
    values = pa.array([None if i % 3 == 0 else i for i in range(600)], pa.int64())
    addrs = np.arange(600, dtype=np.uint64)
    table = bloomfilter.bloom_table(values, addrs, 100, 0.01)
    assert table.column("has_null").to_pylist() == [True] * 6
    for k, blob in enumerate(table.column("bloom_filter_data").to_pylist()):
        zone = values.slice(k * 100, 100).drop_null()
        assert blob == bloomfilter.build_filter(bloomfilter.hashes(zone), len(blob))
