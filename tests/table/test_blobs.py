"""Blob columns written by pylance 14.0.2 read as pylance reads them (descriptors; bytes via take_blobs)."""

from __future__ import annotations

import io
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format

VALUES = [b"hello", b"", None, b"x" * 3000, b"world" * 10] * 40


def _blob_table() -> pa.Table:
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("b", pa.large_binary(), metadata={"lance-encoding:blob": "true"})])
    return pa.table({"id": list(range(len(VALUES))), "b": VALUES}, schema=schema)


@pytest.fixture(params=["2.0", "2.1", "2.2", "blob_v2"])
def blob_dataset(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    uri = str(tmp_path / "blobs.lance")
    if request.param == "blob_v2":
        table = pa.table({"id": pa.array(range(len(VALUES)), pa.int64()), "b": lance.blob_array(VALUES)})
        lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=70)
    else:
        lance.write_dataset(_blob_table(), uri, data_storage_version=request.param, max_rows_per_file=70)
    return uri


def test_scan_returns_pylance_descriptors(blob_dataset: str) -> None:
    ours, theirs = lance_format.dataset(blob_dataset), lance.dataset(blob_dataset)
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table().schema.equals(theirs.to_table().schema, check_metadata=True)
    assert ours.to_table(columns=["id"]).equals(theirs.to_table(columns=["id"]))
    assert ours.take([150, 2, 71]).equals(theirs.take([150, 2, 71]))
    assert ours.to_table(filter="id > 100").equals(theirs.to_table(filter="id > 100"))


@pytest.mark.parametrize("selector", ["indices", "ids", "addresses"])
def test_take_blobs_returns_the_bytes(blob_dataset: str, selector: str) -> None:
    ours, theirs = lance_format.dataset(blob_dataset), lance.dataset(blob_dataset)
    rows = [199, 2, 0, 73, 73, 141]
    if selector in ("ids", "addresses"):  # no stable row ids: a row id is its address
        rows = [(r // 70) << 32 | (r % 70) for r in rows]
    got = ours.take_blobs("b", **{selector: rows})
    want = theirs.take_blobs("b", **{selector: rows})
    assert [None if f is None else f.read() for f in got] == [None if f is None else f.read() for f in want]


def test_blob_file_reads_and_seeks(blob_dataset: str) -> None:
    (f,) = lance_format.dataset(blob_dataset).take_blobs("b", indices=[3])
    assert f.size() == 3000 and f.seekable() and f.readable()
    assert f.read(10) == b"x" * 10 and f.tell() == 10
    f.seek(-5, io.SEEK_END)
    assert f.read() == b"x" * 5 and f.read() == b""
    f.seek(0)
    assert len(f.readall()) == 3000


def test_take_blobs_refuses_a_non_blob_column(blob_dataset: str) -> None:
    with pytest.raises(lance_format.errors.LanceError):
        lance_format.dataset(blob_dataset).take_blobs("id", indices=[0])
    with pytest.raises(lance_format.errors.LanceError):
        lance_format.dataset(blob_dataset).take_blobs("b")


def test_file_reader_returns_blob_bytes(blob_dataset: str) -> None:
    # pylance's LanceFileReader (unlike its dataset scans) returns the bytes of a v1 blob column
    if "blob_v2" in blob_dataset or lance.dataset(blob_dataset).data_storage_version == "2.2":
        pytest.skip("2.2 stores blob-v2 descriptors")
    path = next(Path(blob_dataset, "data").glob("*.lance"))
    ours = lance_format.file.LanceFileReader(str(path)).read_all().to_table()
    theirs = lance.file.LanceFileReader(str(path)).read_all().to_table()
    assert ours.column("b").to_pylist() == theirs.column("b").to_pylist()


@pytest.mark.parametrize("version", ["2.0", "2.1"])
def test_written_blob_columns_read_back_in_pylance(tmp_path: Path, version: str) -> None:
    ours, theirs = str(tmp_path / "ours.lance"), str(tmp_path / "theirs.lance")
    lance_format.write_dataset(_blob_table(), ours, data_storage_version=version, max_rows_per_file=70)
    lance.write_dataset(_blob_table(), theirs, data_storage_version=version, max_rows_per_file=70)
    ds = lance.dataset(ours)
    assert ds.schema.equals(lance.dataset(theirs).schema, check_metadata=True)
    rows = list(range(0, len(VALUES), 7))
    got = [None if f is None else f.read() for f in ds.take_blobs("b", indices=rows)]
    assert got == [VALUES[r] for r in rows]
    # and our own reader agrees with pylance on what we wrote
    assert lance_format.dataset(ours).to_table().equals(ds.to_table())


def test_written_2_0_blob_files_are_pylance_s_bytes(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.lance", tmp_path / "theirs.lance"
    lance_format.write_dataset(_blob_table(), str(ours), data_storage_version="2.0")
    lance.write_dataset(_blob_table(), str(theirs), data_storage_version="2.0")
    (a,), (b,) = list((ours / "data").glob("*.lance")), list((theirs / "data").glob("*.lance"))
    assert a.read_bytes() == b.read_bytes()


def test_blob_v2_sidecar_blobs_are_read(tmp_path: Path) -> None:
    """pylance 14.0.2 keeps mid-size blobs in a shared .blob sidecar (kind 1) and large ones in
    one .blob file each (kind 2); take_blobs and byte scans (Spark) read them there."""
    uri = str(tmp_path / "kinds.lance")
    values = [b"a" * 100, bytes(range(256)) * 400, b"q" * 300_000, None, b"z" * 5_000_000]
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "b": lance.blob_array(values)})
    lance.write_dataset(table, uri, data_storage_version="2.2")
    ours = lance_format.dataset(uri)
    assert sorted({d["kind"] for d in ours.to_table().column("b").to_pylist() if d}) == [0, 1, 2]
    rows = [4, 2, 1, 0, 3]
    assert [None if f is None else f.read() for f in ours.take_blobs("b", indices=rows)] == [values[r] for r in rows]
    from lance_format.table.scan import Scan, ScanOptions

    batches = list(Scan(ours._ctx, ScanOptions(["id", "b"])).to_batches())
    assert pa.Table.from_batches(batches).column("b").to_pylist() == values
