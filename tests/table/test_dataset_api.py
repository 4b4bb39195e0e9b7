"""The public API: inputs, scanner options, take, fragments, versions, tags, distributed commit."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format as lf
from lance_format.schema import LanceSchema


def data(n: int = 100) -> pa.Table:
    i = np.arange(n, dtype=np.int64)
    return pa.table({
        "id": i,
        "s": pa.array([None if x % 10 == 0 else f"item{x}" for x in i]),
        "f": pa.array(i / 4.0),
    })


@pytest.fixture
def both(tmp_path: Path) -> tuple[lf.LanceDataset, lance.LanceDataset]:
    uri = str(tmp_path / "ds")
    lf.write_dataset(data(100), uri, max_rows_per_file=30)
    lf.dataset(uri).delete("id IN (3, 4, 35, 99)")
    return lf.dataset(uri), lance.dataset(uri)


FILTERS = [
    "id > 50",
    "id >= 10 AND id < 20 OR id = 77",
    "NOT (id < 90)",
    "s IS NULL",
    "s IS NOT NULL AND id < 15",
    "s LIKE 'item1%'",
    "id BETWEEN 30 AND 40",
    "id IN (1, 2, 3, 36, 200)",
    "f > 10.5",
]


@pytest.mark.parametrize("flt", FILTERS)
def test_sql_filters_match_pylance(both: tuple[lf.LanceDataset, lance.LanceDataset], flt: str) -> None:
    ours, theirs = both
    assert ours.to_table(filter=flt).equals(theirs.to_table(filter=flt))
    assert ours.count_rows(flt) == theirs.count_rows(flt)


def test_expression_filter_projection_limit_offset(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = both
    expr = (pc.field("id") > 20) & (pc.field("f") < 20.0)
    for kw in ({"limit": 7}, {"offset": 40}, {"limit": 5, "offset": 28}, {"limit": 0}):
        assert ours.to_table(**kw).equals(theirs.to_table(**kw)), kw
    got = ours.to_table(columns=["f"], filter=expr, limit=10, offset=3)
    assert got.equals(theirs.to_table(columns=["f"], filter=expr, limit=10, offset=3))
    assert got.column_names == ["f"]
    assert ours.head(12).equals(theirs.head(12))


def test_row_ids_and_addresses(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = both
    a = ours.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    b = theirs.to_table(columns=["id"], with_row_id=True, with_row_address=True)
    assert a.equals(b)
    assert ours.to_table(filter="_rowid > 4294967296", columns=["id"]).column("id").to_pylist()[0] == 31


def test_take(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = both
    idx = [0, 95, 3, 3, 50, 29, 30]
    assert ours.take(idx).equals(theirs.take(idx))
    assert ours.take(pa.array(idx), columns=["s"]).equals(theirs.take(idx, columns=["s"]))


def test_streaming_batches_bounded(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")

    def gen():  # type: ignore[no-untyped-def]
        for k in range(20):
            yield pa.record_batch({"x": pa.array(np.arange(k * 1000, (k + 1) * 1000, dtype=np.int64))})

    ds = lf.write_dataset(gen(), uri, max_rows_per_file=7000)
    assert [f.physical_rows for f in ds.get_fragments()] == [7000, 7000, 6000]
    batches = list(ds.to_batches(batch_size=1024))
    assert max(b.num_rows for b in batches) <= 1024
    assert pa.Table.from_batches(batches).column("x").to_pylist() == list(range(20000))


def test_inputs(tmp_path: Path) -> None:
    t = data(10)
    df = t.to_pandas()
    a = lf.write_dataset(df, str(tmp_path / "pd"))
    assert a.to_table().to_pandas().equals(df)
    b = lf.write_dataset(t.to_reader(), str(tmp_path / "rdr"))
    assert b.to_table().equals(t)
    c = lf.write_dataset(iter([]), str(tmp_path / "empty"), schema=t.schema)
    assert c.count_rows() == 0 and c.schema.equals(t.schema) and c.to_table().num_rows == 0
    assert lance.dataset(str(tmp_path / "empty")).schema.equals(t.schema)
    d = lf.write_dataset(pd.DataFrame({"x": [1, 2]}), str(tmp_path / "pd2"),
                         schema=pa.schema([("x", pa.int32())]))
    assert d.schema.field("x").type == pa.int32()


def test_versions_checkout_restore_tags(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lf.write_dataset(data(10), uri, commit_message="first")
    lf.write_dataset(data(5), uri, mode="append")
    ds = lf.write_dataset(data(3), uri, mode="overwrite")
    vs = ds.versions()
    assert [v["version"] for v in vs] == [1, 2, 3]
    assert [v["operation"] for v in vs] == ["overwrite", "append", "overwrite"]
    assert vs[1]["metadata"]["total_rows"] == "15"
    assert ds.read_transaction(1).transaction_properties["__lance_commit_message"] == "first"  # type: ignore[union-attr]
    assert lance.dataset(uri).read_transaction(1).transaction_properties["__lance_commit_message"] == "first"
    old = ds.checkout_version(2)
    assert old.count_rows() == 15 and old.latest_version == 3
    old.restore()
    assert old.version == 4 and lf.dataset(uri).count_rows() == 15
    assert lance.dataset(uri).to_table().equals(lf.dataset(uri).to_table())
    ds.tags.create("v2", 2)
    assert lance.dataset(uri).tags.get_version("v2") == 2
    assert lf.dataset(uri, version="v2").version == 2
    assert ds.checkout_version("v2").version == 2


def test_fragments_api(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = both
    of, tf = ours.get_fragments(), theirs.get_fragments()
    assert [f.fragment_id for f in of] == [f.fragment_id for f in tf]
    for a, b in zip(of, tf, strict=True):
        assert a.count_rows() == b.count_rows() and a.physical_rows == b.physical_rows
        assert a.to_table().equals(b.to_table())
        assert a.metadata.files[0].path == b.metadata.files[0].path
        assert a.metadata.files[0].file_size_bytes == b.metadata.files[0].file_size_bytes
    assert ours.get_fragment(1) is not None and ours.get_fragment(77) is None


def test_distributed_delete_and_merge_nulls(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lf.write_dataset(data(20), uri, max_rows_per_file=10)
    updated, gone = [], []
    for frag in ds.get_fragments():
        meta = frag.delete("id < 12")
        if meta is None:
            gone.append(frag.fragment_id)
        elif meta is not frag.metadata:
            updated.append(meta)
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Delete(updated, gone, "id < 12"), read_version=ds.version)
    assert ds.to_table().column("id").to_pylist() == list(range(12, 20))
    assert lance.dataset(uri).to_table().equals(ds.to_table())
    # A new nullable column that no data file holds reads as nulls (here and in pylance).
    arrow = ds.schema.append(pa.field("extra", pa.int32()))
    schema = LanceSchema.from_arrow(arrow).with_ids_like(ds.lance_schema)
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Merge(ds.get_fragments()[0:0] or
                                                             [f.metadata for f in ds.get_fragments()], schema),
                                read_version=ds.version)
    assert ds.to_table().column("extra").null_count == 8
    assert lance.dataset(uri).to_table().equals(ds.to_table())


def test_memory_store() -> None:
    uri = "memory://table_api_mem"
    ds = lf.write_dataset(data(10), uri, max_rows_per_file=4)
    lf.write_dataset(data(5), ds, mode="append")  # a memory:// dataset lives in its handle's store
    assert ds.checkout_version(ds.latest_version).count_rows() == 15 and ds.version == 1


def test_project_rename_swap(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    ds = lf.write_dataset(pa.table({"a": [1, 2], "b": ["a", "b"], "b1": ["c", "d"]}), uri)
    fields = ds.lance_schema.fields
    import dataclasses

    swapped = LanceSchema((fields[0], dataclasses.replace(fields[1], name="b0"),
                           dataclasses.replace(fields[2], name="b")))
    ds = lf.LanceDataset.commit(uri, lf.LanceOperation.Project(swapped), read_version=1)
    expected = pa.table({"a": [1, 2], "b0": ["a", "b"], "b": ["c", "d"]})
    assert ds.to_table().equals(expected)
    assert ds.to_table(columns=["b"]).equals(expected.select(["b"]))
    assert lance.dataset(uri).to_table().equals(expected)


def test_empty_projection_and_rowid_filters(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    ours, theirs = both
    assert ours.to_table(columns=[]).num_rows == theirs.to_table(columns=[]).num_rows == 96
    for flt in ("_rowid > 4294967296", "_rowaddr < 10"):
        assert ours.count_rows(flt) == theirs.count_rows(flt)
    assert ours.to_table(columns=[], with_row_id=True).equals(theirs.to_table(columns=[], with_row_id=True))
    assert ours.count_rows(pc.field("id") > 50) == theirs.count_rows(pc.field("id") > 50)


def test_pickling(both: tuple[lf.LanceDataset, lance.LanceDataset]) -> None:
    import pickle

    ours, _ = both
    meta = ours.get_fragments()[0].metadata
    assert pickle.loads(pickle.dumps(meta)) == meta
    assert lf.FragmentMetadata.from_json(meta.to_json()) == meta
    txn = ours.read_transaction()
    assert txn is not None and pickle.loads(pickle.dumps(txn)).operation == txn.operation
    again = pickle.loads(pickle.dumps(ours))
    assert again.version == ours.version and again.to_table().equals(ours.to_table())
