"""Deletion files: our codec against itself, corrupt input, and pylance 14.0.2 both ways."""

from __future__ import annotations

import glob
import os
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyroaring
import pytest

from lance_format.errors import CorruptFileError, InvalidInputError, ObjectNotFoundError
from lance_format.storage import open_store
from lance_format.table.deletion import (
    BITMAP_THRESHOLD,
    ROW_ID_SCHEMA,
    DeletionFile,
    clear_deletion_cache,
    read_deletion_file,
    write_deletion_file,
)


def test_key_format() -> None:
    assert DeletionFile(3, 123, "array", 7).path(5) == "_deletions/5-3-123.arrow"
    assert DeletionFile(1, 2**64 - 1, "bitmap", 7).path(0) == f"_deletions/0-1-{2**64 - 1}.bin"


@pytest.mark.parametrize(("count", "kind"), [(1, "array"), (BITMAP_THRESHOLD - 1, "array"), (BITMAP_THRESHOLD, "bitmap")])
def test_roundtrip_and_threshold(tmp_path: Path, count: int, kind: str) -> None:
    store = open_store(str(tmp_path))
    rng = np.random.default_rng(count)
    deleted = rng.choice(1_000_000, size=count, replace=False).astype(np.uint32)
    df = write_deletion_file(store, 7, 3, deleted)
    assert df.file_type == kind
    assert df.num_deleted_rows == count and df.read_version == 3 and df.base_id is None
    assert 0 <= df.id < 2**64
    assert store.exists(df.path(7))
    got = read_deletion_file(store, 7, df)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.sort(deleted))


def test_duplicates_merged_and_forced_kind(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    df = write_deletion_file(store, 0, 1, np.array([5, 1, 5, 3], dtype=np.int64), kind="bitmap")
    assert df.file_type == "bitmap" and df.num_deleted_rows == 3
    np.testing.assert_array_equal(read_deletion_file(store, 0, df), [1, 3, 5])


@pytest.mark.parametrize("bad", [np.array([], dtype=np.uint32), np.array([-1]), np.array([2**32]), [1.5]])
def test_bad_input(tmp_path: Path, bad: object) -> None:
    with pytest.raises(InvalidInputError):
        write_deletion_file(open_store(str(tmp_path)), 0, 1, bad)  # type: ignore[arg-type]


def test_our_arrow_file_layout(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    df = write_deletion_file(store, 2, 9, np.arange(100, dtype=np.uint32))
    reader = pa.ipc.open_file(store.read(df.path(2)))
    assert reader.schema.equals(ROW_ID_SCHEMA, check_metadata=True)
    assert reader.schema.metadata is None
    assert reader.num_record_batches == 1
    assert reader.get_batch(0).column(0).to_pylist() == list(range(100))


def _write_raw(store: object, name: str, data: bytes) -> DeletionFile:
    kind = "array" if name.endswith("arrow") else "bitmap"
    df = DeletionFile(1, 42, kind, 3)  # type: ignore[arg-type]
    store.write(df.path(0), data)  # type: ignore[attr-defined]
    return df


def _ipc_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        for batch in table.to_batches(max_chunksize=2):
            w.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (_ipc_file(pa.table({"row_id": pa.array([1, 2], pa.uint32())})), "schema"),  # nullable field
        (_ipc_file(pa.table({"x": pa.array([1], pa.uint32())})), "schema"),
        (
            _ipc_file(
                pa.Table.from_arrays(
                    [pa.array([1, 2], pa.int32())],
                    schema=pa.schema([pa.field("row_id", pa.int32(), nullable=False)]),
                )
            ),
            "schema",
        ),
        (
            _ipc_file(pa.Table.from_arrays([pa.array([1, 2, 3], pa.uint32())], schema=ROW_ID_SCHEMA)),
            "one record",
        ),
        (
            _ipc_file(
                pa.Table.from_arrays(
                    [pa.array([1], pa.uint32())], schema=ROW_ID_SCHEMA.with_metadata({"a": "b"})
                )
            ),
            "schema",
        ),
        (b"ARROW1\x00\x00garbage", "unreadable"),
        (b"", "unreadable"),
    ],
)
def test_corrupt_arrow(tmp_path: Path, data: bytes, match: str) -> None:
    store = open_store(str(tmp_path))
    df = _write_raw(store, "x.arrow", data)
    with pytest.raises(CorruptFileError, match=match) as info:
        read_deletion_file(store, 0, df)
    assert "_deletions/0-1-42.arrow" in str(info.value)


def test_arrow_with_nulls_rejected(tmp_path: Path) -> None:
    # A writer that ignores the non-null flag: build the batch with a nullable
    # field, then relabel the schema bytes is awkward; instead check validate()
    # catches the null via a non-null schema with a null present.
    arr = pa.array([1, None, 3], pa.uint32())
    batch = pa.RecordBatch.from_arrays([arr], schema=pa.schema([pa.field("row_id", pa.uint32())]))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, ROW_ID_SCHEMA) as w:
        try:
            w.write_batch(pa.RecordBatch.from_arrays([arr], schema=ROW_ID_SCHEMA))
        except pa.ArrowInvalid:
            pytest.skip("pyarrow refuses to build a non-null field holding nulls")
    del batch
    store = open_store(str(tmp_path))
    df = _write_raw(store, "x.arrow", bytes(sink.getvalue().to_pybytes()))
    with pytest.raises(CorruptFileError, match="null"):
        read_deletion_file(store, 0, df)


def test_truncated_files(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    for count in (10, 6000):
        df = write_deletion_file(store, 0, 1, np.arange(0, count * 3, 3, dtype=np.uint32))
        full = store.read(df.path(0))
        for cut in (len(full) // 2, len(full) - 1, 3):
            store.write(df.path(0), full[:cut])
            clear_deletion_cache()  # a reader in another process: the writer's decoded copy is not there
            with pytest.raises(CorruptFileError, match=df.path(0)):
                read_deletion_file(store, 0, df)


def test_bad_roaring(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    df = _write_raw(store, "x.bin", b"\xff" * 64)
    with pytest.raises(CorruptFileError, match="Roaring"):
        read_deletion_file(store, 0, df)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ObjectNotFoundError):
        read_deletion_file(open_store(str(tmp_path)), 0, DeletionFile(1, 5, "array", 1))


# -- interop with pylance 14.0.2 ------------------------------------------------

lance = pytest.importorskip("lance")


def _make(uri: str, n: int = 20_000) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lance.write_dataset(pa.table({"a": pa.array(np.arange(n), pa.int64())}), uri)


@pytest.mark.parametrize(
    ("predicate", "ext", "expected"),
    [
        ("a < 10 or a = 15000", "arrow", [*range(10), 15000]),
        ("a >= 100 and a < 6100", "bin", list(range(100, 6100))),
    ],
)
def test_read_pylance_files(tmp_path: Path, predicate: str, ext: str, expected: list[int]) -> None:
    uri = str(tmp_path / "ds")
    _make(uri)
    lance.dataset(uri).delete(predicate)
    (path,) = glob.glob(f"{uri}/_deletions/*")
    name = os.path.basename(path)
    assert name.endswith("." + ext)
    frag, read_version, file_id = name.split(".")[0].split("-")
    df = DeletionFile(int(read_version), int(file_id), "array" if ext == "arrow" else "bitmap", len(expected))
    got = read_deletion_file(open_store(uri), int(frag), df)
    np.testing.assert_array_equal(got, expected)
    # Cross-check against pylance's own metadata of the fragment.
    meta = lance.dataset(uri).get_fragments()[0].metadata.deletion_file
    assert meta.id == int(file_id) and meta.read_version == int(read_version)
    assert meta.num_deleted_rows == len(expected)


def test_pylance_arrow_schema_matches_ours(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _make(uri, 100)
    lance.dataset(uri).delete("a < 3")
    (path,) = glob.glob(f"{uri}/_deletions/*.arrow")
    theirs = pa.ipc.open_file(path)
    store = open_store(str(tmp_path / "ours"))
    df = write_deletion_file(store, 0, 1, np.array([0, 1, 2], np.uint32))
    ours = pa.ipc.open_file(store.read(df.path(0)))
    assert theirs.schema.equals(ours.schema, check_metadata=True)
    assert theirs.schema.serialize().to_pybytes() == ours.schema.serialize().to_pybytes()
    assert theirs.schema.metadata is None and ours.schema.metadata is None
    # pylance writes the offsets in hash-set order; we write them sorted.
    assert sorted(theirs.get_batch(0).column(0).to_pylist()) == ours.get_batch(0).column(0).to_pylist()


def test_pylance_bitmap_bytes_match_ours(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    _make(uri)
    lance.dataset(uri).delete("a >= 100 and a < 6100")
    (path,) = glob.glob(f"{uri}/_deletions/*.bin")
    store = open_store(str(tmp_path / "ours"))
    df = write_deletion_file(store, 0, 1, np.arange(100, 6100, dtype=np.uint32))
    ours = store.read(df.path(0))
    theirs = Path(path).read_bytes()
    assert pyroaring.BitMap.deserialize(ours) == pyroaring.BitMap.deserialize(theirs)
    assert ours == theirs  # both emit the same portable serialization


@pytest.mark.parametrize("kind", ["array", "bitmap"])
def test_pylance_reads_our_files(tmp_path: Path, kind: str) -> None:
    """Swap pylance's deletion file for ours (same name, same rows) and scan."""
    uri = str(tmp_path / "ds")
    _make(uri)
    predicate = "a < 10 or a = 15000" if kind == "array" else "a >= 100 and a < 6100"
    lance.dataset(uri).delete(predicate)
    frag = lance.dataset(uri).get_fragments()[0].metadata
    meta = frag.deletion_file
    df = DeletionFile(meta.read_version, meta.id, kind, meta.num_deleted_rows)  # type: ignore[arg-type]
    store = open_store(uri)
    before = store.read(df.path(frag.id))
    expected_rows = lance.dataset(uri).to_table()
    # Different rows than pylance deleted, same count, to prove pylance reads our bytes.
    ours = np.arange(1, 2 * meta.num_deleted_rows, 2, dtype=np.uint32)
    other = write_deletion_file(open_store(str(tmp_path / "scratch")), 0, 1, ours, kind=kind)  # type: ignore[arg-type]
    store.write(df.path(frag.id), open_store(str(tmp_path / "scratch")).read(other.path(0)))
    assert store.read(df.path(frag.id)) != before
    got = lance.dataset(uri).to_table().column("a").to_numpy()
    expected = np.setdiff1d(np.arange(20_000), ours)
    np.testing.assert_array_equal(np.sort(got), expected)
    assert expected_rows.num_rows == len(expected)
