"""ZONEMAP candidate zones of numbers, dates, times and timestamps are picked by numpy comparisons on
the zones' min / max (not Arrow kernels per query): the same zones as the Arrow kernels pick, for
every bound kind (open, inclusive, exclusive, ``=`` and ``IN``), zones without a value, NaN zones
and bounds outside every zone; and queries still count what pylance 14.0.2 counts."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.indices.builder import IndexConfig

import lance_format
from lance_format.index import zonemap
from lance_format.index.predicates import In, Range
from lance_format.index.store import IndexDir
from lance_format.storage import open_store

N = 3000


def _columns() -> dict[str, pa.Array]:
    rng = np.random.default_rng(11)
    ints = rng.integers(-5000, 5000, N)
    nulls = np.zeros(N, bool)
    nulls[400:800] = True  # two zones with no value at all
    nulls[rng.integers(0, N, 100)] = True
    floats = rng.uniform(-10, 10, N)
    floats[rng.integers(0, N, 20)] = np.nan
    return {
        "i": pa.array(ints, mask=nulls),
        "u": pa.array(rng.integers(0, 60000, N).astype(np.uint16)),
        "f": pa.array(floats, mask=nulls),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=int(x)) for x in rng.integers(0, 900, N)]),
        "ts": pa.array(rng.integers(0, 10**12, N).astype("datetime64[us]")).cast(pa.timestamp("us", "UTC")),
        "t": pa.array(rng.integers(0, 86_400, N).astype(np.int32), pa.int32()).cast(pa.time32("s")),
    }


def _queries(values: pa.Array) -> list[Range | In]:
    present = values.drop_null()
    lo, hi = present[len(present) // 5], present[len(present) // 2]
    small, big = (lo, hi) if lo.as_py() <= hi.as_py() else (hi, lo)
    return [Range(small, True, None, True), Range(None, True, big, False), Range(small, False, big, True),
            Range(small, True, small, True), In((small, big)), Range(big, False, None, True)]


@pytest.mark.parametrize("col", ["i", "u", "f", "d", "ts", "t"])
def test_numpy_bounds_pick_the_zones_arrow_kernels_pick(tmp_path: object, col: str) -> None:
    values = _columns()[col]
    addrs = np.arange(N, dtype=np.uint64) + (np.uint64(3) << np.uint64(32))
    out = IndexDir(open_store(str(tmp_path)), "z", "2.2")
    zonemap.write_zonemap(out, values, addrs, 200)
    index = zonemap.ZoneMapIndex(out)
    assert index._numbers[0] is not None
    arrow = zonemap.ZoneMapIndex(out)
    arrow._numbers = (None, None)  # the Arrow-kernel path
    for q in _queries(values):
        assert np.array_equal(index.candidate_zones(q), arrow.candidate_zones(q)), q


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[str, str]]:
    root = tmp_path_factory.mktemp("zone_numpy")
    table = pa.table(_columns())
    made: dict[str, tuple[str, str]] = {}

    def make(col: str) -> tuple[str, str]:
        if col not in made:
            theirs, ours = str(root / f"{col}_theirs.lance"), str(root / f"{col}_ours.lance")
            for uri in (theirs, ours):
                lance.write_dataset(table, uri, max_rows_per_file=1000)
            lance.dataset(theirs).create_scalar_index(col, IndexConfig("zonemap", {"rows_per_zone": 200}))
            lance_format.dataset(ours).create_scalar_index(col, "ZONEMAP", rows_per_zone=200)
            made[col] = theirs, ours
        return made[col]

    return make


@pytest.mark.parametrize(("col", "flt"), [
    ("i", "i >= -100 AND i < 250"), ("i", "i = 17"), ("i", "i IN (5, -3000)"), ("i", "i > 99999"),
    ("f", "f > 2.5"), ("f", "f <= -9.0"),
    ("d", "d BETWEEN date '2020-06-01' AND date '2020-06-30'"),
    ("ts", "ts >= timestamp '2001-09-09 01:46:40'"),
])
def test_numpy_bounds_count_as_pylance(datasets: Callable[[str], tuple[str, str]], col: str, flt: str) -> None:
    theirs, ours = datasets(col)
    want = lance.dataset(theirs).count_rows(filter=flt)
    assert lance_format.dataset(ours).count_rows(filter=flt) == want
    assert lance_format.dataset(ours).to_table(filter=flt).num_rows == want
