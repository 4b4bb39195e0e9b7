"""Interop with pylance 14.0.2 (the test-only oracle): rows, schema and version list at every version."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lance_format as lf

OLD_PYLANCE = Path(__file__).parent.parent / "data"


def table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "name": pa.array([f"row{i}" for i in ids]),
        "score": pa.array(ids * 0.5, pa.float64()),
        "tags": pa.array([[int(i), int(i) + 1] for i in ids], pa.list_(pa.int32())),
        "maybe": pa.array([None if i % 3 == 0 else int(i) for i in ids], pa.int32()),
    })


def assert_same_everywhere(uri: str) -> None:
    """Our reader and pylance agree on versions, schema and rows at every version."""
    theirs = lance.dataset(uri)
    ours = lf.dataset(uri)
    strip = [{k: v[k] for k in ("version", "timestamp", "metadata")} for v in ours.versions()]
    assert strip == theirs.versions()  # numbers, timestamps and per-version statistics
    assert ours.latest_version == theirs.latest_version
    for v in theirs.versions():
        t = lance.dataset(uri, version=v["version"])
        o = lf.dataset(uri, version=v["version"])
        assert o.schema.equals(t.schema), v
        assert o.to_table().equals(t.to_table()), f"rows differ at version {v['version']}"
        assert o.count_rows() == t.count_rows()
        assert o.to_table(with_row_id=True).column("_rowid").equals(t.to_table(with_row_id=True).column("_rowid"))


def test_ours_then_pylance_every_mode(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 300), uri, max_rows_per_file=100)
    lf.write_dataset(table(300, 50), uri, mode="append")
    ds = lf.dataset(uri)
    assert ds.delete("id % 7 = 0")["num_deleted_rows"] == 50  # small: .arrow deletion files
    ds.delete("id >= 100 AND id < 200")  # a whole fragment disappears
    lf.write_dataset(table(1000, 6000), uri, mode="append", max_rows_per_file=6000)
    lf.dataset(uri).delete("id >= 1000 AND id < 6500")  # 5500 rows: .bin roaring bitmap
    lf.write_dataset(table(9000, 10), uri, mode="overwrite")
    lf.write_dataset(table(9100, 5), uri, mode="append")
    names = [p.name for p in (Path(uri) / "_deletions").iterdir()]
    assert any(n.endswith(".arrow") for n in names) and any(n.endswith(".bin") for n in names)
    assert len(list((Path(uri) / "_versions").glob("*.manifest"))) == 8
    assert (Path(uri) / "_versions" / "latest_version_hint.json").read_bytes() == b'{"version":8}'
    assert lance.dataset(uri).version == 8
    assert_same_everywhere(uri)
    # pylance sees our fragments exactly (physical rows, deletions) at an intermediate version.
    v5 = lance.dataset(uri, version=6)
    ours = lf.dataset(uri, version=6)
    assert [(f.fragment_id, f.physical_rows, f.num_deletions) for f in v5.get_fragments()] == [
        (f.fragment_id, f.physical_rows, f.num_deletions) for f in ours.get_fragments()]


def test_pylance_continues_our_dataset(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 100), uri, max_rows_per_file=30)
    lf.dataset(uri).delete("id < 10")
    p = lance.dataset(uri)
    lance.write_dataset(table(100, 40), uri, mode="append", data_storage_version="2.0")
    p = lance.dataset(uri)
    p.delete("id = 50")
    p.optimize.compact_files(target_rows_per_fragment=1000)
    p = lance.dataset(uri)
    p.cleanup_old_versions(older_than=dt.timedelta(seconds=0), delete_unverified=True)
    assert_same_everywhere(uri)
    # ... and we continue after pylance's compaction
    lf.write_dataset(table(500, 7), uri, mode="append")
    lf.dataset(uri).delete("id = 501")
    assert_same_everywhere(uri)


@pytest.mark.parametrize("v2_paths", [True, False])
def test_pylance_written_every_version(tmp_path: Path, v2_paths: bool) -> None:
    uri = str(tmp_path / "ds")
    kw = {"data_storage_version": "2.0"}
    lance.write_dataset(table(0, 200), uri, max_rows_per_file=80, enable_v2_manifest_paths=v2_paths, **kw)
    lance.write_dataset(table(200, 7000), uri, mode="append", **kw)
    p = lance.dataset(uri)
    p.delete("id % 5 = 1")  # small and large (>5000 per fragment) deletions
    p.delete("id < 80")  # drops fragment 0
    lance.write_dataset(table(9000, 20), uri, mode="overwrite", **kw)
    lance.write_dataset(table(9100, 20), uri, mode="append", **kw)
    p = lance.dataset(uri)
    p.tags.create("before_restore", 3)
    lance.dataset(uri, version=3).restore()
    names = [q.name for q in (Path(uri) / "_versions").glob("*.manifest")]
    assert ("18446744073709551614.manifest" in names) == v2_paths
    assert_same_everywhere(uri)
    assert lf.dataset(uri, version="before_restore").to_table().equals(lance.dataset(uri, version=3).to_table())


def test_we_append_to_pylance_dataset(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(table(0, 50), uri, data_storage_version="2.0")
    lance.dataset(uri).delete("id = 3")
    lf.write_dataset(table(50, 25), uri, mode="append")
    ours = lf.dataset(uri)
    ours.delete("id = 60")
    theirs = lance.dataset(uri)
    assert theirs.to_table().equals(pa.concat_tables([table(0, 75)]).filter(
        pa.compute.invert(pa.compute.is_in(pa.compute.field("id"), pa.array([3, 60])))))
    assert_same_everywhere(uri)


def test_stable_row_ids_both_ways(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(table(0, 40), uri, enable_stable_row_ids=True, data_storage_version="2.0")
    lf.write_dataset(table(40, 10), uri, mode="append")
    lf.dataset(uri).delete("id = 5")
    lance.dataset(uri).delete("id = 45")
    assert lf.dataset(uri).has_stable_row_ids
    assert_same_everywhere(uri)


def test_old_pylance_latest_manifest(tmp_path: Path) -> None:
    # Written by pylance 0.16.1 (tests/fixtures_tool/make_old_pylance.py): V1 names, a root
    # _latest.manifest, manifests without inline transactions.
    uri = tmp_path / "old"
    shutil.copytree(OLD_PYLANCE / "pylance_0_16_1_v2_0" / "dataset.lance", uri)
    assert (uri / "_latest.manifest").exists()
    ours, theirs = lf.dataset(str(uri)), lance.dataset(str(uri))
    assert ours.version == theirs.version and ours.to_table().equals(theirs.to_table())
    lf.write_dataset(ours.to_table().slice(0, 3), str(uri), mode="append")
    assert_same_everywhere(str(uri))


def test_manifest_with_index_section(tmp_path: Path) -> None:
    uri = str(tmp_path / "idx")
    lance.write_dataset(table(0, 50), uri, data_storage_version="2.0")
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    assert_same_everywhere(uri)
    # An append keeps the index section; pylance still sees the index afterwards.
    lf.write_dataset(table(50, 5), uri, mode="append")
    assert len(lance.dataset(uri).list_indices()) == 1
    assert_same_everywhere(uri)


def test_pylance_reads_our_commit_of_write_fragments(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    frags = lf.write_fragments(table(0, 30), uri, mode="create", max_rows_per_file=10)
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Overwrite(table(0, 1).schema, frags))
    more = lf.write_fragments(table(30, 10), uri)
    lf.LanceDataset.commit(uri, lf.LanceOperation.Append(more), read_version=ds.version)
    assert lance.dataset(uri).to_table().equals(table(0, 40))
    assert_same_everywhere(uri)


_STEP = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40), st.integers(1, 30)),
    st.tuples(st.just("delete"), st.integers(0, 9), st.integers(2, 7)),
    st.tuples(st.just("overwrite"), st.integers(1, 25), st.integers(1, 30)),
)


@settings(max_examples=10)
@given(steps=st.lists(_STEP, min_size=1, max_size=5))
def test_random_histories_match_pylance(tmp_path_factory: pytest.TempPathFactory,
                                        steps: list[tuple[str, int, int]]) -> None:
    uri = str(tmp_path_factory.mktemp("h") / "ds")
    lf.write_dataset(table(0, 30), uri, max_rows_per_file=12)
    start = 1000
    for kind, a, b in steps:
        if kind == "append":
            lf.write_dataset(table(start, a), uri, mode="append", max_rows_per_file=b)
        elif kind == "overwrite":
            lf.write_dataset(table(start, a), uri, mode="overwrite", max_rows_per_file=b)
        else:
            lf.dataset(uri).delete(f"id % {b} = {a % b}")
        start += 100
    assert_same_everywhere(uri)


def test_append_missing_nullable_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 10), uri)
    partial = table(10, 5).select(["score", "id", "name", "tags"])  # no "maybe", other order
    lf.write_dataset(partial, uri, mode="append")
    got = lf.dataset(uri).to_table()
    assert got.column("maybe").to_pylist()[10:] == [None] * 5
    assert got.slice(10).select(["id", "score"]).equals(partial.select(["id", "score"]))
    assert_same_everywhere(uri)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_pylance_newer_storage_versions(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(table(0, 300), uri, data_storage_version=version, max_rows_per_file=120)
    lance.dataset(uri).delete("id % 4 = 0")
    assert lf.dataset(uri).data_storage_version == version
    assert_same_everywhere(uri)



def test_pylance_schema_evolution_then_ours(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 50), uri, max_rows_per_file=20)
    p = lance.dataset(uri)
    p.add_columns({"double": "id * 2"})  # Merge: new data files per fragment
    lance.dataset(uri).drop_columns(["tags"])  # Project
    lance.dataset(uri).alter_columns({"path": "name", "name": "label"})  # rename keeps the field id
    lance.dataset(uri).update_config({"k": "v"})  # UpdateConfig: an operation we only carry along
    assert_same_everywhere(uri)
    assert lf.dataset(uri).config() == {"k": "v"}
    # We keep appending with the evolved schema and pylance agrees.
    cur = lf.dataset(uri).schema
    more = lance.dataset(uri).to_table().slice(0, 3).cast(cur)
    lf.write_dataset(more, uri, mode="append")
    lf.dataset(uri).delete("id = 1")
    assert_same_everywhere(uri)
    assert lf.dataset(uri).schema.names == ["id", "label", "score", "maybe", "double"]
    assert lance.dataset(uri).config()["k"] == "v"


def test_our_v1_names(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 20), uri, enable_v2_manifest_paths=False)
    lf.write_dataset(table(20, 5), uri, mode="append", enable_v2_manifest_paths=True)  # keeps V1
    lf.dataset(uri).delete("id = 3")
    lance.write_dataset(table(30, 5), uri, mode="append", data_storage_version="2.0")
    names = sorted(p.name for p in (Path(uri) / "_versions").glob("*.manifest"))
    assert names == ["1.manifest", "2.manifest", "3.manifest", "4.manifest"]
    assert_same_everywhere(uri)


def test_unknown_counts_are_recomputed(tmp_path: Path) -> None:
    from lance_format.storage import open_store
    from lance_format.table.codec.manifest import decode_manifest, encode_manifest
    from lance_format.table.versions import find_latest

    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 30), uri, max_rows_per_file=10)
    lf.dataset(uri).delete("id % 4 = 0")
    found = find_latest(open_store(uri))
    assert found is not None
    path = Path(uri) / found[1]
    m = decode_manifest(path.read_bytes(), "x")
    import dataclasses

    frags = tuple(dataclasses.replace(f, physical_rows=0, deletion_file=dataclasses.replace(
        f.deletion_file, num_deleted_rows=0) if f.deletion_file else None) for f in m.fragments)
    path.write_bytes(encode_manifest(m.replace(fragments=frags, writer_version=None), m.transaction_bytes or b""))
    ours = lf.dataset(uri)
    assert ours.count_rows() == 22 and [f.physical_rows for f in ours.get_fragments()] == [10, 10, 10]
    assert ours.to_table().equals(lance.dataset(uri).to_table())
    assert ours.take([0, 21]).equals(lance.dataset(uri).take([0, 21]))


def test_pylance_update_merge_insert_index_then_ours(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(table(0, 60), uri, max_rows_per_file=25)
    p = lance.dataset(uri)
    p.create_scalar_index("id", "BTREE")
    lance.dataset(uri).update({"score": "score + 100"}, where="id < 5")
    new = table(50, 20)
    lance.dataset(uri).merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(new)
    assert_same_everywhere(uri)
    lf.write_dataset(table(200, 5), uri, mode="append")  # keeps the index section
    lf.dataset(uri).delete("id = 201")
    assert [i["name"] for i in lance.dataset(uri).list_indices()] == ["id_idx"]
    assert lance.dataset(uri).to_table(filter="id = 202").num_rows == 1
    assert_same_everywhere(uri)
