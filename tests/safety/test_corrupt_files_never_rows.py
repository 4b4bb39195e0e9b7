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
from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, NotSupportedError, UnsupportedVersionError
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
    # a schema Field whose ``id`` (#3, an int32) comes length-delimited
    (b"\x0a\x06\x12\x01\x62\x1a\x01\x00", "Field: field 'id'.*length-delimited"),
    # the data format (#15, a DataStorageFormat) whose ``file_format`` (#1, a string) is a varint
    (b"\x7a\x02\x08\x01", "DataStorageFormat: field 'file_format'.*varint"),
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


def _fragment_with(extra: bytes) -> bytes:
    # A whole DataFragment field (#2 of the manifest) holding id 0 plus ``extra``: prost merges
    # repeated-field entries by appending, so this adds a fragment carrying the extra field.
    inner = b"\x08\x00" + extra
    return b"\x12" + bytes([len(inner)]) + inner


@pytest.mark.parametrize(("extra", "refused"), [
    (_fragment_with(b"\x5a\x02\x08\x01"), "overlays"),  # DataFragment.overlays (#11)
    (_fragment_with(b"\x62\x00"), "row_id_sequence"),  # DataFragment #12
    (b"\xb2\x01\x00", "fragment_tree"),  # Manifest.fragment_tree (#22)
])
def test_newer_fields_that_change_rows_are_refused(tmp_path: Path, extra: bytes, refused: str) -> None:
    # pylance 14.0.2 reads these fields (data overlays replace values, a fragment tree replaces
    # the fragment list); ignoring them as unknown would return other rows than pylance.
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    _append_to_manifest_message(path, extra)
    with pytest.raises(NotSupportedError, match=f"{path.name}.*{refused}"):
        lf.dataset(uri).to_table()


def _add_to_first_fragment(path: Path, extra: bytes) -> None:
    data = path.read_bytes()
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (size,) = struct.unpack_from("<I", data, pos)
    manifest = table_pb2.Manifest.FromString(data[pos + 4 : pos + 4 + size])
    manifest.fragments[0].MergeFromString(extra)
    body = manifest.SerializeToString()
    path.write_bytes(data[:pos] + struct.pack("<I", len(body)) + body + struct.pack("<q", pos) + data[-8:])


@pytest.mark.parametrize(("extra", "in_fragment"), [
    (b"\x78\x05", True),  # DataFragment.clustering_id (#15), varint
    (b"\x82\x01\x00", True),  # DataFragment.metadata (#16), an empty message
    (b"\xd0\x01\x07", False),  # Manifest.max_clustering_id (#26), varint
])
def test_newer_informational_fields_are_kept(tmp_path: Path, extra: bytes, in_fragment: bool) -> None:
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    if in_fragment:
        _add_to_first_fragment(path, extra)
    else:
        _append_to_manifest_message(path, extra)
    assert lf.dataset(uri).to_table() == lance.dataset(uri).to_table()
    lf.write_dataset(pa.table({"a": pa.array([99], pa.int64())}), uri, mode="append")
    assert lance.dataset(uri).count_rows() == 11  # the field survives our rewrite of the fragment


@pytest.mark.parametrize("extra", [
    b"\xd2\x01\x00",  # Manifest.max_clustering_id (#26) is a varint: wire type 2 is wrong
    b"\xca\x01\x02\x07\x00",  # Manifest.clustering (#25) with a payload that is no message
])
def test_newer_fields_with_wrong_shape_are_corrupt(tmp_path: Path, extra: bytes) -> None:
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    _append_to_manifest_message(path, extra)
    with pytest.raises(ValueError):
        lance.dataset(uri).to_table()
    with pytest.raises(CorruptFileError, match=path.name):
        lf.dataset(uri)


@pytest.mark.parametrize("last", [0x02, 0x7F])
def test_varint_wider_than_64_bits_is_corrupt(tmp_path: Path, last: int) -> None:
    # Manifest.max_fragment_id (#13) as a 10-byte varint whose last byte carries more than the
    # 64th bit: prost refuses it, the Python parser would silently drop the extra bits.
    uri = _pylance_dataset(tmp_path)
    path = _latest_manifest(uri)
    _append_to_manifest_message(path, b"\x68" + b"\xff" * 9 + bytes([last]))
    with pytest.raises(ValueError, match="(?i)varint"):
        lance.dataset(uri).to_table()
    with pytest.raises(CorruptFileError, match=f"{path.name}.*varint"):
        lf.dataset(uri)


def test_non_ascii_text_in_manifest_is_not_mistaken_for_a_varint(tmp_path: Path) -> None:
    # Nine or more bytes with the high bit set are common in UTF-8 text; only real varints count.
    uri = str(tmp_path / "ds")
    table = pa.table({"日本語の列名です": [1, 2]})
    lf.write_dataset(table, uri, schema=table.schema.with_metadata({"説明": "日本語の説明文です"}))
    assert lf.dataset(uri).to_table() == lance.dataset(uri).to_table()


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


@pytest.mark.parametrize("where", ["data", "_versions"])
def test_overlong_varint_in_a_schema_is_corrupt(tmp_path: Path, where: str) -> None:
    # A top-level field's parent_id (-1) is a ten-byte varint ending in 0x01; a larger last byte
    # is more than 64 bits, which prost refuses in the data file's and the manifest's schema.
    uri = _pylance_dataset(tmp_path, data_storage_version="2.1")
    path = next((Path(uri) / where).iterdir()) if where == "data" else _latest_manifest(uri)
    data = path.read_bytes()
    needle = b"\x20" + b"\xff" * 9 + b"\x01"
    at = data.rfind(needle)  # the last: a manifest's schema follows its inline transaction's
    assert at >= 0
    path.write_bytes(data[: at + 10] + b"\x03" + data[at + 11 :])
    with pytest.raises(ValueError, match="(?i)varint"):
        lance.dataset(uri).to_table()
    with pytest.raises(CorruptFileError, match=f"{path.name}.*varint"):
        lf.dataset(uri).to_table()
