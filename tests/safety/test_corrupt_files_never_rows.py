"""Corrupted files are refused (as pylance refuses them), never read back as wrong rows."""

from __future__ import annotations

import glob
import struct
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import CorruptFileError, UnsupportedVersionError
from lance_format.storage import open_store
from lance_format.table.deletion import encode_arrow_deletions
from lance_format.table.versions import list_manifests


def _pylance_dataset(tmp_path: Path, **kwargs: object) -> str:
    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"a": pa.array(range(10), pa.int64())}), uri, **kwargs)
    return uri


def _latest_manifest(uri: str) -> Path:
    names, _ = list_manifests(open_store(uri))
    return Path(uri) / names[max(names)]


@pytest.mark.parametrize(("offsets", "match"), [
    ([1, 2, 50], "row offset 50 but the fragment has 10 physical rows"),
    ([0, 1], "holds 2 deleted rows but the manifest records 3"),
    ([0, 1, 2, 3], "holds 4 deleted rows but the manifest records 3"),
])
def test_deletion_file_that_disagrees_with_manifest_is_corrupt(tmp_path: Path, offsets: list[int],
                                                              match: str) -> None:
    uri = _pylance_dataset(tmp_path)
    lance.dataset(uri).delete("a < 3")
    (path,) = glob.glob(f"{uri}/_deletions/*")
    Path(path).write_bytes(encode_arrow_deletions(np.array(offsets, np.uint32)))
    with pytest.raises(CorruptFileError, match=match) as info:
        lf.dataset(uri).to_table()
    assert Path(path).name in str(info.value)


@pytest.mark.parametrize("dsv", ["2.0", "2.1"])
def test_invalid_utf8_in_string_page_is_corrupt(tmp_path: Path, dsv: str) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(pa.table({"s": [f"hello_world_{i}" for i in range(20)]}), uri, data_storage_version=dsv)
    (path,) = glob.glob(f"{uri}/data/*")
    data = bytearray(Path(path).read_bytes())
    at = data.find(b"hello_world_7")
    data[at : at + 2] = b"\xff\xfe"
    Path(path).write_bytes(bytes(data))
    with pytest.raises(Exception, match="utf-8"):  # pylance refuses the page too
        lance.dataset(uri).to_table()
    with pytest.raises(CorruptFileError, match=f"{Path(path).name}.*column 's'.*(?i:utf-?8)"):
        lf.dataset(uri).to_table()
    with pytest.raises(CorruptFileError, match="(?i)utf-?8"):
        lf.dataset(uri).take([7])


def test_valid_non_ascii_strings_still_read(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    values = ["héllo", "", None, "日本語", "x" * 100]
    lf.write_dataset(pa.table({"s": values, "l": [[v] for v in values]}), uri)
    assert lf.dataset(uri).to_table().column("s").to_pylist() == values


def _append_to_manifest_message(path: Path, extra: bytes) -> None:
    # The manifest message is the last section before the 16-byte footer; appending protobuf
    # fields to it keeps every other section's offset valid.
    data = path.read_bytes()
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (size,) = struct.unpack_from("<I", data, pos)
    body = data[pos + 4 : pos + 4 + size] + extra
    path.write_bytes(data[:pos] + struct.pack("<I", len(body)) + body + struct.pack("<q", pos) + data[-8:])


@pytest.mark.parametrize(("extra", "match"), [
    (b"\x1a\x01\x41", "Manifest: field 'version'.*length-delimited"),
    (b"\x12\x03\x0a\x01\x41", "DataFragment: field 'id'.*length-delimited"),
])
def test_wrong_wire_type_in_manifest_is_corrupt(tmp_path: Path, extra: bytes, match: str) -> None:
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    _append_to_manifest_message(path, extra)
    with pytest.raises(ValueError, match="invalid wire type"):
        lance.dataset(uri)
    with pytest.raises(CorruptFileError, match=match) as info:
        lf.dataset(uri)
    assert path.name in str(info.value)


def test_unknown_field_number_is_still_kept(tmp_path: Path) -> None:
    uri = _pylance_dataset(tmp_path)
    _append_to_manifest_message(_latest_manifest(uri), b"\xb8\x3e\x01")  # field 999, varint
    assert lf.dataset(uri).count_rows() == lance.dataset(uri).count_rows() == 10


@pytest.mark.parametrize("version", ["0.3", "2.3", "9.9"])
def test_unknown_storage_version_string_is_refused(tmp_path: Path, version: str) -> None:
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    needle = b"\x0a\x05lance\x12\x032.2"
    data = path.read_bytes()
    assert needle in data
    path.write_bytes(data.replace(needle, b"\x0a\x05lance\x12\x03" + version.encode()))
    with pytest.raises(ValueError):
        lance.dataset(uri).to_table()
    with pytest.raises(UnsupportedVersionError, match=f"{path.name}.*storage version '{version}'"):
        lf.dataset(uri)
