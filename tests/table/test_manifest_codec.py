"""Manifest files: layout, unknown fields, corrupt and escaping input."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, PathEscapeError
from lance_format.schema import LanceSchema
from lance_format.table.codec.fragments import fragment_from_pb, fragment_to_pb
from lance_format.table.codec.manifest import (
    decode_manifest,
    encode_manifest,
    manifest_from_message,
    manifest_message,
)
from lance_format.table.codec.transaction import decode_transaction, encode_transaction
from lance_format.table.commit import build_manifest
from lance_format.table.manifest import Manifest
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def frag(fid: int, rows: int = 10, deleted: int = 0) -> FragmentMetadata:
    df = DataFile(f"f{fid}.lance", (0, 1), (0, 1), 2, 0, 100)
    d = DeletionFile(1, 7, "array", deleted) if deleted else None
    return FragmentMetadata(fid, (df,), rows, d)


def manifest(version: int = 1, frags: tuple[FragmentMetadata, ...] = (), **kw: object) -> Manifest:
    return Manifest(SCHEMA, frags, version, max_fragment_id=max((f.id for f in frags), default=None), **kw)  # type: ignore[arg-type]


def test_manifest_layout_roundtrip() -> None:
    m = manifest(3, (frag(0), frag(1, deleted=2)), config={"k": "v"}, table_metadata={"t": "x"})
    txn = Transaction(2, LanceOperation.Append([frag(0)]))
    txn_bytes = encode_transaction(txn)
    data = encode_manifest(m, txn_bytes)
    assert data[-4:] == b"LANC"
    pos, major, minor = struct.unpack_from("<qhh", data, len(data) - 16)
    assert (major, minor) == (0, 2)
    (length,) = struct.unpack_from("<I", data, pos)
    assert pos + 4 + length == len(data) - 16  # the manifest ends at the footer
    assert data[4 : 4 + len(txn_bytes)] == txn_bytes  # inline transaction first
    back = decode_manifest(data, "mem")
    raw_back = manifest_message(data, "mem")[0]
    assert raw_back.transaction_section == 0 and not raw_back.HasField("transaction_section_deprecated")
    assert back.fragments == m.fragments and back.config == {"k": "v"} and back.table_metadata == {"t": "x"}
    assert back.transaction_bytes == txn_bytes
    assert decode_transaction(back.transaction_bytes, "x").operation == txn.operation


def test_unknown_fields_survive_read_modify_write() -> None:
    m = manifest(1, (frag(0),))
    pb_bytes = encode_manifest(m, b"")
    raw = table_pb2.Manifest()
    raw.CopyFrom(manifest_message(pb_bytes, "mem")[0])
    # Field 99 (varint) on the manifest and field 77 on a fragment: unknown to every proto.
    raw.MergeFromString(b"\x98\x06\x2a")
    fpb = raw.fragments[0]
    fpb.MergeFromString(b"\xe8\x04\x05")
    patched = manifest_from_message(raw, "mem")
    txn = Transaction(1, LanceOperation.Append([frag(0)]))
    nxt = build_manifest(patched, txn, version=2)
    out = encode_manifest(nxt, encode_transaction(txn))
    decoded = decode_manifest(out, "mem")
    serialized = manifest_message(out, "mem")[0].SerializeToString()
    assert b"\x98\x06\x2a" in serialized
    assert b"\xe8\x04\x05" in fragment_to_pb(decoded.fragments[0]).SerializeToString()


@pytest.mark.parametrize("bad", [b"", b"LANC", b"x" * 40, b"\x00" * 12 + struct.pack("<q", 5) + b"\0\0\2\0LANC"])
def test_corrupt_manifest_is_named(bad: bytes) -> None:
    with pytest.raises(CorruptFileError, match="mem"):
        decode_manifest(bad, "mem")


def test_truncated_manifest() -> None:
    data = encode_manifest(manifest(1, (frag(0),)), b"")
    for cut in (1, 10, 20, len(data) - 17):
        with pytest.raises(CorruptFileError):
            decode_manifest(data[cut:], "m")
        with pytest.raises(CorruptFileError):
            decode_manifest(data[:-cut], "m")


def test_path_escape_in_manifest() -> None:
    pb = fragment_to_pb(frag(0))
    pb.files[0].path = "../../etc/passwd"
    with pytest.raises(PathEscapeError):
        fragment_from_pb(pb)
