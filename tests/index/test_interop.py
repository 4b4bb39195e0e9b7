"""Indices we build are read by pylance, and we use the ones pylance builds (2.0 and 2.2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lance
import pytest

import lance_format
from lance_format.file import LanceFileReader
from lance_format.index._compat import manifest_indices

from .conftest import FILTERS, rowids, sample_table

VERSIONS = ["2.0", "2.2"]


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_pylance_uses_indices_we_build(make_path: Callable[[str], str], version: str, stable: bool) -> None:
    path = make_path("ours")
    lance.write_dataset(sample_table(), path, data_storage_version=version, max_rows_per_file=200,
                        enable_stable_row_ids=stable)
    lance.dataset(path).delete("id % 17 = 0")
    ds = lance_format.dataset(path)
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    ds.create_scalar_index("f", "BTREE", name="f_tree")
    theirs = lance.dataset(path)
    assert {i["name"]: i["type"] for i in theirs.list_indices()} == {"a_idx": "BTree", "s_idx": "Bitmap",
                                                                     "f_tree": "BTree"}
    for flt in FILTERS:
        plan = theirs.scanner(filter=flt).explain_plan()
        if "<>" not in flt:
            assert "ScalarIndexQuery" in plan, (flt, plan)
        got = theirs.scanner(filter=flt, with_row_id=True).to_table()
        full = theirs.scanner(filter=flt, with_row_id=True, use_scalar_index=False).to_table()
        assert rowids(got) == rowids(full), flt
    stats = theirs.stats.index_stats("a_idx")
    assert stats["num_indexed_rows"] == theirs.count_rows() and stats["num_unindexed_rows"] == 0
    theirs.validate()


@pytest.mark.parametrize("version", [*VERSIONS, "2.1"])
def test_index_files_follow_the_storage_version_and_manifest_records_them(
        make_path: Callable[[str], str], version: str) -> None:
    path = make_path("files")
    ds = lance_format.write_dataset(sample_table(100), path, mode="create", data_storage_version=version)
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    metas = {m.name: m for m in manifest_indices(ds.manifest)}
    a, s = metas["a_idx"], metas["s_idx"]
    assert a.index_details is not None and a.index_details.type_url == "/lance.table.BTreeIndexDetails"
    assert s.index_details is not None and s.index_details.type_url == "/lance.table.BitmapIndexDetails"
    assert (a.dataset_version, s.dataset_version) == (1, 2)  # the version each was built on
    assert a.fragment_bitmap == frozenset({0}) and a.fields == (1,)
    assert a.files is not None and {f.path for f in a.files} == {"page_data.lance", "page_lookup.lance"}
    for meta in (a, s):
        assert meta.files is not None
        for f in meta.files:
            file = Path(path) / "_indices" / meta.uuid / f.path
            assert file.stat().st_size == f.size_bytes
            assert LanceFileReader(str(file)).file_version == tuple(int(x) for x in version.split("."))
    lookup = LanceFileReader(str(Path(path) / "_indices" / a.uuid / "page_lookup.lance"))
    assert lookup.schema.metadata[b"batch_size"] == b"4096"
    assert lookup.schema.names == ["min", "max", "null_count", "page_idx"]


@pytest.mark.parametrize("stable", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_we_use_indices_pylance_builds(make_path: Callable[[str], str], version: str, stable: bool) -> None:
    path = make_path("theirs")
    theirs = lance.write_dataset(sample_table(), path, data_storage_version=version, max_rows_per_file=200,
                                 enable_stable_row_ids=stable)
    theirs.delete("id % 13 = 0")
    theirs.create_scalar_index("a", "BTREE")
    theirs.create_scalar_index("s", "BITMAP")
    theirs.create_scalar_index("f", "BTREE")
    lance.write_dataset(sample_table(50, seed=3), path, mode="append")  # an unindexed fragment
    ds = lance_format.dataset(path)
    theirs = lance.dataset(path)
    for flt in FILTERS:
        plan = ds.scanner(filter=flt).explain_plan()
        assert "ScalarIndexQuery" in plan, (flt, plan)
        assert "unindexed_fragments_scanned=1" in plan
        ours = ds.scanner(filter=flt, with_row_id=True).to_table()
        assert rowids(ours) == rowids(theirs.scanner(filter=flt, with_row_id=True).to_table()), flt
        assert ds.count_rows(flt) == ours.num_rows


def test_list_describe_stats_match_pylance(make_path: Callable[[str], str]) -> None:
    path = make_path("listing")
    ds = lance_format.write_dataset(sample_table(300), path, mode="create", max_rows_per_file=100)
    ds.create_scalar_index("a", "BTREE")
    ds.create_scalar_index("s", "BITMAP")
    theirs = lance.dataset(path)
    ours = {i.name: i for i in ds.list_indices()}
    for info in theirs.list_indices():
        mine = ours[info["name"]]
        assert (mine.type, mine.uuid, list(mine.fields), mine.version) == \
            (info["type"], info["uuid"], info["fields"], info["version"])
        assert mine.fragment_ids == frozenset(info["fragment_ids"])
    for desc in theirs.describe_indices():
        mine_d = next(d for d in ds.describe_indices() if d.name == desc.name)
        assert (mine_d.type_url, mine_d.num_rows_indexed, mine_d.num_segments, mine_d.total_size_bytes) == \
            (desc.type_url, desc.num_rows_indexed, len(desc.segments), desc.total_size_bytes)
    for name in ("a_idx", "s_idx"):
        want = theirs.stats.index_stats(name)
        got = ds.stats.index_stats(name)
        assert (got.index_type, got.num_segments, got.num_indexed_rows, got.num_unindexed_rows) == \
            (want["index_type"], want["num_segments"], want["num_indexed_rows"], want["num_unindexed_rows"])
        seg = got.segments[0]
        if name == "a_idx":
            assert (seg.min, seg.max, seg.num_pages) == tuple(want["segments"][0][k] for k in ("min", "max",
                                                                                                 "num_pages"))
        else:
            assert seg.num_bitmaps == want["segments"][0]["num_bitmaps"]


def test_drop_index_and_replace(make_path: Callable[[str], str]) -> None:
    path = make_path("drop")
    ds = lance_format.write_dataset(sample_table(100), path, mode="create")
    ds.create_scalar_index("a", "BTREE")
    first = ds.list_indices()[0].uuid
    ds.create_scalar_index("a", "BITMAP", name="a_idx")  # replace=True by default
    assert [(i.name, i.type) for i in ds.list_indices()] == [("a_idx", "Bitmap")]
    assert ds.list_indices()[0].uuid != first
    ds.drop_index("a_idx")
    assert ds.list_indices() == [] and lance.dataset(path).list_indices() == []
    assert "ScalarIndexQuery" not in ds.scanner(filter="a = 3").explain_plan()
