"""MAP columns (2.2) and pylance's blob-v2 columns, checked against pylance 14.0.2."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyFileReader
from lance.file import LanceFileWriter as PyFileWriter

import lance_format as lf
from lance_format.errors import UnsupportedTypeError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.schema import BLOB_DESCRIPTION_TYPE, LanceSchema

MAP = pa.map_(pa.string(), pa.int64())


def map_table(n: int = 300) -> pa.Table:
    """Maps with nulls, empty maps, null values; also maps nested in structs and lists."""
    rows: list[list[tuple[str, int | None]] | None] = []
    for i in range(n):
        if i % 7 == 3:
            rows.append(None)
        else:
            rows.append([(f"k{j}", None if (i + j) % 5 == 0 else i * 10 + j) for j in range(i % 4)])
    inner = pa.array(rows, MAP)
    struct_vals = pa.array([{"x": i, "m": r} for i, r in enumerate(rows)],
                           pa.struct([("x", pa.int32()), ("m", MAP)]))
    list_of_maps = pa.array([None if i % 11 == 0 else [r, []] if r is not None else [] for i, r in
                             enumerate(rows)], pa.list_(MAP))
    map_struct_vals = pa.array([[(f"s{i}", {"a": i, "b": str(i)})] if i % 3 else [] for i in range(n)],
                               pa.map_(pa.string(), pa.struct([("a", pa.int64()), ("b", pa.string())])))
    return pa.table({"id": np.arange(n, dtype=np.int64), "m": inner, "st": struct_vals, "lm": list_of_maps,
                     "ms": map_struct_vals})


def manifest_fields(uri: str) -> list[tuple[str, int, int, str, bool, int]]:
    schema = lf.dataset(uri).lance_schema
    return [(f.name, f.id, f.parent_id, f.logical_type, f.nullable, f.encoding) for f in schema.flat()]


# --- maps: schema ---------------------------------------------------------------------------


def test_map_schema_matches_pylance(tmp_path: Path) -> None:
    tab = pa.table({"id": np.arange(3), "m": pa.array([[("a", 1)], None, []], MAP)})
    lance.write_dataset(tab, str(tmp_path / "p"))
    lf.write_dataset(tab, str(tmp_path / "o"))
    assert manifest_fields(str(tmp_path / "o")) == manifest_fields(str(tmp_path / "p")) == [
        ("id", 0, -1, "int64", True, 1),
        ("m", 1, -1, "map", True, 1),
        ("entries", 2, 1, "struct", False, 0),
        ("key", 3, 2, "string", False, 2),
        ("value", 4, 2, "int64", True, 1),
    ]
    assert LanceSchema.from_arrow(tab.schema).to_arrow() == tab.schema
    assert LanceSchema.from_arrow(tab.schema).column_fields("2.2") == [
        f for f in LanceSchema.from_arrow(tab.schema).flat() if f.name in ("id", "key", "value")]


def test_map_keys_sorted_refused() -> None:
    schema = pa.schema([pa.field("m", pa.map_(pa.string(), pa.int64(), keys_sorted=True))])
    with pytest.raises(UnsupportedTypeError, match="keys_sorted"):
        LanceSchema.from_arrow(schema)


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_map_refused_before_22(tmp_path: Path, version: str) -> None:
    tab = pa.table({"m": pa.array([[("a", 1)]], MAP)})
    with pytest.raises(OSError):
        lance.write_dataset(tab, str(tmp_path / "p"), data_storage_version=version)
    with pytest.raises(UnsupportedTypeError, match=rf"'m'.*2\.2.*{version}"):
        lf.write_dataset(tab, str(tmp_path / "o"), data_storage_version=version)
    with pytest.raises(UnsupportedTypeError, match=version):
        LanceFileWriter(str(tmp_path / "f.lance"), tab.schema, version=version).close()


# --- maps: datasets -------------------------------------------------------------------------


def test_pylance_map_dataset_read(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    tab = map_table()
    lance.write_dataset(tab, uri, max_rows_per_file=120)
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    assert ours.schema == theirs.schema
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table().equals(tab)
    for cols in (["m"], ["ms", "id"], ["lm"], ["st"]):
        assert ours.to_table(columns=cols).equals(theirs.to_table(columns=cols)), cols
    idx = [299, 0, 3, 150, 121, 7]
    assert ours.take(idx).equals(theirs.take(idx))
    assert ours.take(idx, columns=["m"]).equals(tab.select(["m"]).take(idx))
    assert ours.to_table(filter="id >= 250").equals(theirs.to_table(filter="id >= 250"))


def test_our_map_dataset_read_by_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    tab = map_table()
    lf.write_dataset(tab, uri, max_rows_per_file=100)
    lf.write_dataset(tab.slice(10, 50), uri, mode="append")
    want = pa.concat_tables([tab, tab.slice(10, 50)])
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "2.2"
    assert theirs.to_table().equals(want)
    assert lf.dataset(uri).to_table().equals(want)
    idx = [0, 3, 99, 100, 349]
    assert theirs.take(idx, columns=["m", "ms"]).equals(want.select(["m", "ms"]).take(idx))
    # pylance appends to our dataset, we read the result
    lance.write_dataset(tab.slice(0, 20), uri, mode="append")
    assert lf.dataset(uri).to_table().equals(lance.dataset(uri).to_table())


def test_map_multi_page(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    tab = map_table(3000)
    lf.write_dataset(tab, uri, max_page_bytes=4096)
    assert lance.dataset(uri).to_table().equals(tab)
    ours = lf.dataset(uri)
    assert ours.to_table(batch_size=333).equals(tab)
    idx = np.array([2999, 5, 1500, 1501, 0, 2000])
    assert ours.take(idx).equals(tab.take(idx))


# --- maps: files ----------------------------------------------------------------------------


def test_map_file_roundtrip(tmp_path: Path) -> None:
    tab = map_table()
    ours = str(tmp_path / "ours.lance")
    theirs = str(tmp_path / "theirs.lance")
    with LanceFileWriter(ours, tab.schema, version="2.2") as w:
        w.write_batch(tab)
    pw = PyFileWriter(theirs, tab.schema, version="2.2")
    pw.write_batch(tab)
    pw.close()
    assert PyFileReader(ours).read_all().to_table().equals(tab)
    for path in (ours, theirs):
        reader = LanceFileReader(path)
        assert reader.read_all(batch_size=64).to_table().equals(tab)
        assert reader.read_range(17, 100).to_table().equals(tab.slice(17, 100))
        assert reader.take_rows([5, 3, 299, 3]).to_table().equals(tab.take([5, 3, 299, 3]))
        assert LanceFileReader(path, columns=["ms", "m"]).read_all().to_table().equals(tab.select(["ms", "m"]))


# --- blob v2 --------------------------------------------------------------------------------


def blob_table(n: int) -> pa.Table:
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("blob", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    blobs = [None if i % 9 == 4 else bytes([i % 256]) * (i * 700) for i in range(n)]
    return pa.table({"id": np.arange(n), "blob": blobs}, schema=schema)


def test_pylance_blob_v2_dataset_read(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(blob_table(40), uri, max_rows_per_file=25)
    big = pa.table({"id": [40, 41], "blob": [b"z" * 300_000, b""]}, schema=blob_table(1).schema)
    lance.write_dataset(big, uri, mode="append")
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    assert ours.count_rows() == 42
    got, want = ours.to_table(), theirs.to_table()
    assert got.equals(want)
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.schema.field("blob").type == BLOB_DESCRIPTION_TYPE
    assert ours.to_table(columns=["blob"]).equals(theirs.to_table(columns=["blob"]))
    idx = [41, 0, 13, 4, 30]
    assert ours.take(idx).equals(theirs.take(idx))
    assert ours.take(idx, columns=["blob"]).equals(theirs.take(idx, columns=["blob"]))
    assert ours.to_table(filter="id > 20").equals(theirs.to_table(filter="id > 20"))


def test_blob_v2_file_read(tmp_path: Path) -> None:
    """pylance's own file reader cannot open these files (descriptor fields carry id -1); ours can."""
    uri = str(tmp_path / "ds")
    lance.write_dataset(blob_table(12), uri)
    frag = lance.dataset(uri).get_fragments()[0]
    path = f"{uri}/data/{frag.data_files()[0].path}"
    reader = LanceFileReader(path)
    assert reader.schema.field("blob").type == BLOB_DESCRIPTION_TYPE
    assert [f.name for f in reader.lance_schema.fields] == ["id", "blob"]
    got = reader.read_all().to_table()
    assert got.equals(lance.dataset(uri).to_table())
    assert reader.take_rows([11, 4, 0]).to_table().equals(got.take([11, 4, 0]))
    assert got.column("blob").chunk(0).field("size").to_pylist() == [
        0 if i % 9 == 4 else i * 700 for i in range(12)]


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_blob_v2_write_refused(tmp_path: Path, version: str) -> None:
    """Descriptors point into their own data file; copying them would leave dangling references."""
    uri = str(tmp_path / "ds")
    lance.write_dataset(blob_table(5), uri)
    descriptors = lf.dataset(uri).to_table()
    with pytest.raises(UnsupportedTypeError, match="'blob'.*blob v2"):
        lf.write_dataset(descriptors, uri, mode="append")
    with pytest.raises(UnsupportedTypeError, match="'blob'.*blob v2"):
        lf.write_dataset(descriptors, str(tmp_path / "other"), data_storage_version=version)
    assert lance.dataset(uri).count_rows() == 5


@pytest.mark.parametrize("arr", [
    pa.array([[("a", [("x", 1)])], None, [("b", None), ("c", [])]],
             pa.map_(pa.string(), pa.map_(pa.string(), pa.int64()))),
    pa.array([[(1, [1.0, 2.0]), (2, None)], [], None], pa.map_(pa.int32(), pa.list_(pa.float32()))),
    pa.array([[("a", [1.0, 2.0])], [("b", None)], None], pa.map_(pa.string(), pa.list_(pa.float32(), 2))),
    pa.array([None] * 4, MAP),
    pa.array([[]] * 4, MAP),
    pa.array([[("k" * 10, "v" * 5000)]] * 40, pa.map_(pa.string(), pa.large_string())),
], ids=["map_of_map", "int_key_list_value", "fsl_value", "all_null", "all_empty", "wide_values"])
def test_map_shapes_both_ways(tmp_path: Path, arr: pa.Array) -> None:
    tab = pa.table({"m": arr})
    lance.write_dataset(tab, str(tmp_path / "p"))
    lf.write_dataset(tab, str(tmp_path / "o"))
    assert manifest_fields(str(tmp_path / "o")) == manifest_fields(str(tmp_path / "p"))
    for name in ("p", "o"):
        uri = str(tmp_path / name)
        assert lance.dataset(uri).to_table().equals(tab), name
        assert lf.dataset(uri).to_table().equals(tab), name
        assert lf.dataset(uri).schema == lance.dataset(uri).schema, name


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_refused_map_write_leaves_no_files(tmp_path: Path, version: str) -> None:
    t = pa.table({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))})
    with pytest.raises(UnsupportedTypeError):
        lf.write_dataset(t, str(tmp_path / "ds"), data_storage_version=version)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
