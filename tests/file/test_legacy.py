"""The legacy (v1, footer 0.1/0.2) file format: read what pylance writes, write what pylance reads.

pylance 14.0.2 still writes legacy files for ``data_storage_version="legacy"``. The format has no
validity bitmaps, so pylance itself reads a null number back as 0 and an empty string back as null:
every comparison here is against what pylance reads, never against the input table.
"""

from __future__ import annotations

import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.file import LanceFileReader, LanceFileWriter


def _matrix(n: int) -> pa.Table:
    """Every type pylance writes in legacy mode, with nulls and empty values, ``n`` rows."""
    reps = n // 3 + 1

    def rep(values: list[object], typ: pa.DataType) -> pa.Array:
        return pa.array((values * reps)[:n], type=typ)

    return pa.table({
        "i64": rep([1, None, -3], pa.int64()),
        "u8": rep([1, 2, 255], pa.uint8()),
        "f32": rep([1.5, None, -2.0], pa.float32()),
        "f64": rep([0.25, 1e300, None], pa.float64()),
        "flag": rep([True, None, False], pa.bool_()),
        "s": rep(["a", None, ""], pa.string()),
        "ls": rep(["x" * 40, "y", None], pa.large_string()),
        "bin": rep([b"\x00\x01", None, b"z"], pa.binary()),
        "lst": rep([[1, 2], None, []], pa.list_(pa.int32())),
        "llst": rep([["a"], ["b", None], None], pa.large_list(pa.string())),
        "st": rep([{"x": 1, "y": "q"}, None, {"x": 3, "y": None}], pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "fsl": rep([[1.0, 2.0], [3.0, 4.0], None], pa.list_(pa.float32(), 2)),
        "fsb": rep([b"abcd", b"efgh", None], pa.binary(4)),
        "ts": rep([1, None, 3], pa.timestamp("us", tz="UTC")),
        "d32": rep([1, 2, None], pa.date32()),
        "dec": rep([1, None, 3], pa.decimal128(10, 2)),
        "nul": pa.nulls(n),
    })


@pytest.mark.parametrize("rows", [5, 2_500])
def test_pylance_legacy_dataset_reads_identically(tmp_path: Path, rows: int) -> None:
    """Every type, several on-disk batches, appends and a delete: rows at every version as pylance."""
    uri = str(tmp_path / "theirs")
    t = _matrix(rows).append_column("d", pa.array((["u", "v", "u"] * rows)[:rows]).dictionary_encode())
    lance.write_dataset(t, uri, data_storage_version="legacy")
    lance.write_dataset(t.slice(0, 4), uri, mode="append")
    lance.dataset(uri).delete("u8 = 2")
    for v in lance.dataset(uri).versions():
        want = lance.dataset(uri, version=v["version"]).to_table()
        got = lance_format.dataset(uri, version=v["version"]).to_table()
        assert got.equals(want), f"version {v['version']}"
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    assert ours.data_storage_version == "0.1"
    idx = [0, 1, ours.count_rows() - 1]
    assert ours.take(idx).equals(theirs.take(idx))
    cols = ["s", "lst", "st"]
    assert ours.to_table(columns=cols, filter="i64 = 1").equals(theirs.to_table(columns=cols, filter="i64 = 1"))


@pytest.mark.parametrize("rows", [3, 3_000])
def test_our_legacy_dataset_reads_in_pylance(tmp_path: Path, rows: int) -> None:
    """What we write with data_storage_version='legacy' pylance reads exactly as its own legacy files."""
    t = _matrix(rows)
    ours_uri, theirs_uri = str(tmp_path / "ours"), str(tmp_path / "theirs")
    ds = lance_format.write_dataset(t, ours_uri, data_storage_version="legacy")
    assert ds.data_storage_version == "0.1"
    assert {df.file_version for f in ds.manifest.fragments for df in f.files} == {(0, 2)}
    lance.write_dataset(t, theirs_uri, data_storage_version="legacy")
    want = lance.dataset(theirs_uri).to_table()
    got = lance.dataset(ours_uri)
    assert got.data_storage_version == "0.1"
    assert got.to_table().equals(want)
    got.validate()
    assert lance_format.dataset(ours_uri).to_table().equals(want)
    frag = got.get_fragments()[0].metadata.data_files()[0]
    assert (frag.file_major_version, frag.file_minor_version) == (0, 2)


def test_appends_keep_the_legacy_version(tmp_path: Path) -> None:
    """Appends by either library to a legacy dataset stay legacy (the dataset's version wins)."""
    uri = str(tmp_path / "ds")
    t = _matrix(10)
    lance_format.write_dataset(t, uri, data_storage_version="legacy")
    lance.write_dataset(t, uri, mode="append")
    ds = lance_format.write_dataset(t, uri, mode="append")
    assert {df.file_version for f in ds.manifest.fragments for df in f.files} == {(0, 2)}
    theirs = lance.dataset(uri)
    assert theirs.data_storage_version == "0.1"
    assert theirs.to_table().equals(lance_format.dataset(uri).to_table())
    assert theirs.count_rows() == 30


def test_file_reader_ranges_and_take_cross_batches(tmp_path: Path) -> None:
    """read_range / take_rows on a many-batch legacy file agree with a full read."""
    path = str(tmp_path / "f.lance")
    t = pa.table({"id": np.arange(5_000, dtype=np.int64), "s": [str(i) for i in range(5_000)],
                  "l": [[i] * (i % 3) for i in range(5_000)]})
    with LanceFileWriter(path, t.schema, version="legacy") as w:
        for batch in t.to_batches(max_chunksize=1024):
            w.write_batch(batch)
    r = LanceFileReader(path)
    assert r.file_version == (0, 2) and r.num_rows == 5_000
    full = r.read_all().to_table()
    assert full.equals(t)
    assert r.read_range(1000, 1100).to_table().equals(t.slice(1000, 1100))
    idx = [4999, 0, 1023, 1024, 2048, 17, 17]
    assert r.take_rows(idx).to_table().equals(t.take(idx))
    assert LanceFileReader(path, columns=["l"]).read_range(1020, 10).to_table().equals(t.select(["l"]).slice(1020, 10))


def test_dictionary_columns_are_refused_on_write(tmp_path: Path) -> None:
    """We do not write legacy dictionary columns: a clear error, no dataset, no data file left."""
    t = pa.table({"d": pa.array(["a", "b"]).dictionary_encode()})
    uri = tmp_path / "ds"
    with pytest.raises(NotSupportedError, match="'d'"):
        lance_format.write_dataset(t, str(uri), data_storage_version="legacy")
    assert not list(uri.rglob("*.lance")) and not list(uri.rglob("*.manifest"))


def _legacy_file(tmp_path: Path) -> Path:
    path = tmp_path / "f.lance"
    t = pa.table({"id": np.arange(100, dtype=np.int64), "s": ["v"] * 100})
    with LanceFileWriter(str(path), t.schema, version="legacy") as w:
        w.write_batch(t)
    return path


def test_corrupt_legacy_files_raise_corrupt_file_error(tmp_path: Path) -> None:
    """Truncated footer, a page table past the end, an unparsable metadata block: CorruptFileError."""
    good = _legacy_file(tmp_path).read_bytes()
    meta_pos = struct.unpack("<Q", good[-16:-8])[0]
    cases = {
        "truncated": good[:-5],
        "metadata past end": good[:-16] + struct.pack("<QHH4s", len(good) + 10, 0, 2, b"LANC"),
        "metadata garbage": good[:meta_pos] + b"\xff\xff\x00\x00" + b"\xff" * (len(good) - meta_pos - 20)
        + good[-16:],
    }
    # page table pointing past the end: rewrite the metadata block's page_table_position
    from lance_format._pb import file_pb2

    n = struct.unpack("<I", good[meta_pos:meta_pos + 4])[0]
    m = file_pb2.Metadata()
    m.ParseFromString(good[meta_pos + 4:meta_pos + 4 + n])
    m.page_table_position = len(good) * 4
    body = m.SerializeToString()
    cases["page table past end"] = good[:meta_pos] + struct.pack("<I", len(body)) + body + struct.pack(
        "<QHH4s", meta_pos, 0, 2, b"LANC")
    for what, data in cases.items():
        path = tmp_path / f"bad-{what.replace(' ', '_')}.lance"
        path.write_bytes(data)
        with pytest.raises(CorruptFileError, match="bad-"):
            LanceFileReader(str(path)).read_all().to_table()


def test_page_statistics_are_exposed(tmp_path: Path) -> None:
    """pylance's legacy writer stores per-batch min/max/null counts; we expose them per field id."""
    from lance_format.file.legacy.reader import page_statistics

    uri = str(tmp_path / "ds")
    t = pa.table({"id": np.arange(3_000, dtype=np.int64), "s": [f"{i:05d}" for i in range(3_000)]})
    lance.write_dataset(t, uri, data_storage_version="legacy")
    df = lance.dataset(uri).get_fragments()[0].metadata.data_files()[0]
    r = LanceFileReader(f"{uri}/data/{df.path}")
    stats = page_statistics(r)
    ids = stats[0].to_pylist()
    assert [(b["min_value"], b["max_value"], b["null_count"]) for b in ids] == [
        (0, 1023, 0), (1024, 2047, 0), (2048, 2999, 0)]
    assert stats[1].to_pylist()[0]["min_value"] == "00000"
    ours = tmp_path / "ours.lance"
    with LanceFileWriter(str(ours), t.schema, version="legacy") as w:
        w.write_batch(t)
    assert page_statistics(LanceFileReader(str(ours))) == {}


def test_mixed_legacy_and_2x_fragments(tmp_path: Path) -> None:
    """Fragments of legacy and 2.0 files in one dataset read through one path.

    pylance 14.0.2 refuses to commit such a mix ("All data files must have the same version"), but
    older releases that wrote 2.0 on request left them behind, so the reader handles each file
    by its own footer.
    """
    uri = str(tmp_path / "ds")
    t = pa.table({"id": np.arange(10, dtype=np.int64), "s": [str(i) for i in range(10)]})
    lance_format.write_dataset(t, uri, data_storage_version="legacy")
    frags = lance_format.fragment.write_fragments(t, uri, data_storage_version="2.0")
    base = lance_format.dataset(uri)
    ours = lance_format.LanceDataset.commit(uri, lance_format.LanceOperation.Append(frags),
                                            read_version=base.version)
    versions = {df.file_version for f in ours.manifest.fragments for df in f.files}
    assert versions == {(0, 2), (2, 0)}
    assert ours.to_table().equals(pa.concat_tables([t, t]))
    assert ours.take([3, 13]).equals(t.take([3, 3]))
