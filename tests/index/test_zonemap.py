"""ZONEMAP indices in pylance 14.0.2's format: our files hold what pylance writes, and our reader's
candidate rows are a superset of the matching rows on pylance's files."""

from __future__ import annotations

from collections.abc import Callable

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.indices.builder import IndexConfig

from lance_format.file.reader import LanceFileReader
from lance_format.index import zonemap
from lance_format.index.predicates import In, IsNull, Range, ValueQuery
from lance_format.index.store import IndexDir
from lance_format.storage import open_store


def _table(n: int = 3000) -> pa.Table:
    f = np.arange(n, dtype=np.float64)
    f[5] = np.nan
    f[1500] = np.nan
    return pa.table({"num": pa.array(np.arange(n), pa.int64()),
                     "f": pa.array(f, mask=np.arange(n) % 7 == 0),
                     "s": pa.array([None if i < 700 else f"x{i:05d}" for i in range(n)])})


@pytest.fixture
def pylance_zonemaps(make_path: Callable[[str], str]) -> tuple[str, lance.LanceDataset]:
    uri = make_path("zm")
    ds = lance.write_dataset(_table(), uri, max_rows_per_file=600)
    # a whole fragment, a run across a zone boundary and single rows deleted before the build
    ds.delete("(num >= 600 AND num < 1200) OR (num >= 1390 AND num < 1420) OR num = 2001 OR num = 0")
    for col in ("num", "f", "s"):
        ds.create_scalar_index(col, IndexConfig("zonemap", {"rows_per_zone": 400}))
    return uri, lance.dataset(uri)


def _file(uri: str, ds: lance.LanceDataset, col: str) -> str:
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    return f"{uri}/_indices/{uuid}/{zonemap.FILE}"


@pytest.mark.parametrize("col", ["num", "f", "s"])
def test_zonemap_file_holds_what_pylance_writes(pylance_zonemaps: tuple[str, lance.LanceDataset],
                                                 tmp_path: object, col: str) -> None:
    uri, ds = pylance_zonemaps
    data = ds.to_table(columns=[col], with_row_address=True)
    out = IndexDir(open_store(str(tmp_path)), "ours", "2.2")
    zonemap.write_zonemap(out, data.column(col).combine_chunks(), data.column("_rowaddr").to_numpy(), 400)
    theirs = LanceFileReader(_file(uri, ds, col))
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{zonemap.FILE}")
    a, b = theirs.read_all().to_table(), ours.read_all().to_table()
    assert a.schema.equals(b.schema)
    for name in a.column_names:  # NaN != NaN, so compare through their text
        assert [str(v) for v in a.column(name).to_pylist()] == [str(v) for v in b.column(name).to_pylist()], name
    assert theirs.schema.metadata == ours.schema.metadata
    assert theirs.read_global_buffer(1) == ours.read_global_buffer(1)  # the null rows


QUERIES: list[tuple[str, ValueQuery, str]] = [
    ("num", Range(pa.scalar(1500, pa.int64()), True, pa.scalar(1500, pa.int64()), True), "num = 1500"),
    ("num", Range(pa.scalar(2500, pa.int64()), False, None, True), "num > 2500"),
    ("num", In((pa.scalar(5, pa.int64()), pa.scalar(2999, pa.int64()))), "num IN (5, 2999)"),
    ("f", Range(None, True, pa.scalar(3.0), True), "f <= 3"),
    ("f", IsNull(), "f IS NULL"),
    ("s", Range(pa.scalar("x02000"), True, pa.scalar("x02100"), False), "s >= 'x02000' AND s < 'x02100'"),
    ("s", IsNull(), "s IS NULL"),
]


@pytest.mark.parametrize(("col", "query", "sql"), QUERIES)
def test_zonemap_candidates_cover_every_matching_row(pylance_zonemaps: tuple[str, lance.LanceDataset],
                                                      col: str, query: ValueQuery, sql: str) -> None:
    uri, ds = pylance_zonemaps
    uuid = next(i["uuid"] for i in ds.list_indices() if i["fields"] == [col])
    index = zonemap.ZoneMapIndex(IndexDir(open_store(uri), uuid))
    cand = index.search(query)
    truth = ds.to_table(columns=[], filter=sql, with_row_address=True).column("_rowaddr").to_numpy()
    assert np.isin(truth, cand).all()
    assert cand.size < ds.count_rows() or sql.endswith("IS NULL")  # zones were pruned


def test_zonemap_zones_hold_rows_per_zone_live_rows() -> None:
    addrs = np.concatenate([np.arange(3, 1000), (np.uint64(2) << np.uint64(32)) + np.arange(10)]).astype(np.uint64)
    z = zonemap.cut_zones(addrs, 400)
    assert z.fragment_id.tolist() == [0, 0, 0, 2]
    assert z.zone_start.tolist() == [3, 403, 803, 0]
    assert z.zone_length.tolist() == [400, 400, 197, 10]
    rows = zonemap.zone_rows(z.fragment_id, z.zone_start, z.zone_length, np.array([False, True, False, True]))
    assert rows.size == 410 and int(rows[0]) == 403


def test_zonemap_float_zone_with_nan_is_a_candidate_for_any_range() -> None:
    v = pa.array([1.0, float("nan"), 3.0])
    addrs = np.arange(3, dtype=np.uint64)
    table = zonemap.zone_stats(v, zonemap.cut_zones(addrs, 10))
    assert table.column("nan_count").to_pylist() == [1]
    assert table.column("min").to_pylist() == [1.0]
    assert np.isnan(table.column("max").to_pylist()[0])
    assert pc.is_nan(table.column("max")).to_pylist() == [True]


# --- the kind: per-task encode + write, remap -------------------------------------------------
from lance_format.index.kind import BuildContext, TrainingData  # noqa: E402
from lance_format.index.kinds import zonemap as zonemap_kind  # noqa: E402
from lance_format.index.remap import RowAddressMap  # noqa: E402


def _ctx(col: str, typ: pa.DataType, **params: object) -> BuildContext:
    return BuildContext(col, typ, zonemap_kind.KIND.params(col, params), False, {})


@pytest.mark.parametrize("col", ["num", "f", "s"])
def test_zonemap_kind_built_per_fragment_equals_pylances_file(pylance_zonemaps: tuple[str, lance.LanceDataset],
                                                               tmp_path: object, col: str) -> None:
    uri, ds = pylance_zonemaps
    ctx = _ctx(col, ds.schema.field(col).type, rows_per_zone=400)
    chunks = []
    for frag in reversed(ds.get_fragments()):  # tasks may finish in any order
        t = frag.to_table(columns=[col], with_row_address=True)
        chunks.append(zonemap_kind.KIND.encode(
            TrainingData(t.column(col).combine_chunks(), t.column("_rowaddr").to_numpy()), None, ctx))
    zonemap_kind.KIND.write(IndexDir(open_store(str(tmp_path)), "ours", "2.2"), chunks, None, ctx)
    theirs = LanceFileReader(_file(uri, ds, col))
    ours = LanceFileReader(f"{tmp_path}/_indices/ours/{zonemap.FILE}")
    a, b = theirs.read_all().to_table(), ours.read_all().to_table()
    for name in a.column_names:
        assert [str(v) for v in a.column(name).to_pylist()] == [str(v) for v in b.column(name).to_pylist()], name
    assert theirs.read_global_buffer(1) == ours.read_global_buffer(1)


def test_zonemap_remap_moves_each_zone_onto_its_rows_new_span() -> None:
    # fragment 0: 10 rows, zones of 4 rows (rows 2 and 3 deleted); compacted with fragment 1 into fragment 5
    table = pa.table({"min": [0, 4, 8, 100], "max": [3, 7, 9, 101], "null_count": pa.array([0, 0, 0, 0], pa.uint32()),
                      "nan_count": pa.array([0, 0, 0, 0], pa.uint32()),
                      "fragment_id": pa.array([0, 0, 0, 1], pa.uint64()),
                      "zone_start": pa.array([0, 4, 8, 0], pa.uint64()),
                      "zone_length": pa.array([4, 4, 2, 2], pa.uint64())})
    old = np.array([0, 1, 4, 5, 6, 7, 8, 9, 1 << 32, (1 << 32) + 1], np.uint64)
    new = (np.uint64(5) << np.uint64(32)) + np.arange(old.size, dtype=np.uint64)
    amap = RowAddressMap.from_arrays(np.append(old, [2, 3]).astype(np.uint64),
                                     np.append(new, [2**64 - 1, 2**64 - 1]).astype(np.uint64))
    out = zonemap.remap_zones(table, amap.translate)
    assert out.column("fragment_id").to_pylist() == [5, 5, 5, 5]
    assert out.column("zone_start").to_pylist() == [0, 2, 6, 8]
    assert out.column("zone_length").to_pylist() == [2, 4, 2, 2]
    assert out.column("min").to_pylist() == [0, 4, 8, 100]
