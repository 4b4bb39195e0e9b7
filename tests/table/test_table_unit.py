"""Unit tests of the table layer: naming, manifest/transaction codecs, flags, conflicts, build_manifest."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, IncompatibleFeatureError, PathEscapeError
from lance_format.schema import LanceSchema
from lance_format.table import conflicts
from lance_format.table.commit import build_manifest
from lance_format.table.fragment import (
    DataFile,
    DeletionFile,
    FragmentMetadata,
    fragment_from_pb,
    fragment_to_pb,
)
from lance_format.table.manifest import (
    Manifest,
    check_feature_flags,
    decode_manifest,
    encode_manifest,
)
from lance_format.table.naming import (
    NamingScheme,
    detect_scheme,
    manifest_key,
    new_data_file_name,
    parse_manifest_name,
)
from lance_format.table.transaction import (
    LanceOperation,
    Transaction,
    decode_transaction,
    encode_transaction,
)

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def frag(fid: int, rows: int = 10, deleted: int = 0) -> FragmentMetadata:
    df = DataFile(f"f{fid}.lance", (0, 1), (0, 1), 2, 0, 100)
    d = DeletionFile(1, 7, "array", deleted) if deleted else None
    return FragmentMetadata(fid, (df,), rows, d)


def manifest(version: int = 1, frags: tuple[FragmentMetadata, ...] = (), **kw: object) -> Manifest:
    return Manifest(SCHEMA, frags, version, max_fragment_id=max((f.id for f in frags), default=None), **kw)  # type: ignore[arg-type]


def test_naming_v1_v2() -> None:
    assert manifest_key(1, NamingScheme.V2) == "_versions/18446744073709551614.manifest"
    assert manifest_key(12, NamingScheme.V1) == "_versions/12.manifest"
    assert parse_manifest_name("18446744073709551614.manifest") == (1, NamingScheme.V2)
    assert parse_manifest_name("3.manifest") == (3, NamingScheme.V1)
    for junk in ("latest_version_hint.json", "d123.manifest", ".tmp_x.manifest", "3.manifest#1"):
        assert parse_manifest_name(junk) is None
    assert detect_scheme(["1.manifest", "2.manifest"]) is NamingScheme.V1
    with pytest.raises(CorruptFileError):
        detect_scheme(["1.manifest", "18446744073709551614.manifest"])
    name = new_data_file_name()
    assert len(name) == 50 + len(".lance") and set(name[:24]) <= {"0", "1"}
    int(name[24:50], 16)


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
    assert back.raw.transaction_section == 0 and not back.raw.HasField("transaction_section_deprecated")
    assert back.fragments == m.fragments and back.config == {"k": "v"} and back.table_metadata == {"t": "x"}
    assert back.transaction_bytes == txn_bytes
    assert decode_transaction(back.transaction_bytes, "x").operation == txn.operation


def test_unknown_fields_survive_read_modify_write() -> None:
    m = manifest(1, (frag(0),))
    pb_bytes = encode_manifest(m, b"")
    back = decode_manifest(pb_bytes, "mem")
    raw = table_pb2.Manifest()
    raw.CopyFrom(back.raw)
    # Field 99 (varint) on the manifest and field 77 on a fragment: unknown to every proto.
    raw.MergeFromString(b"\x98\x06\x2a")
    fpb = raw.fragments[0]
    fpb.MergeFromString(b"\xe8\x04\x05")
    patched = back.replace(raw=raw, fragments=(fragment_from_pb(fpb),))
    txn = Transaction(1, LanceOperation.Append([frag(0)]))
    nxt = build_manifest(patched, txn, version=2)
    out = encode_manifest(nxt, encode_transaction(txn))
    decoded = decode_manifest(out, "mem")
    serialized = decoded.raw.SerializeToString()
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


@pytest.mark.parametrize("flag", [64, 512, 1024, 4096, 8192, 16384, 32768])
def test_unknown_reader_flag_refused(flag: int) -> None:
    m = manifest(1, reader_feature_flags=flag, writer_feature_flags=flag)
    with pytest.raises(IncompatibleFeatureError, match=str(flag)):
        check_feature_flags(m, "path/x.manifest")


@pytest.mark.parametrize("flag", [1, 4, 8, 16, 32, 128, 2048])
def test_known_flags_accepted(flag: int) -> None:
    check_feature_flags(manifest(1, reader_feature_flags=flag, writer_feature_flags=flag), "m", for_write=True)


def test_writer_flag_refused_for_write_only() -> None:
    m = manifest(1, writer_feature_flags=64)
    check_feature_flags(m, "m")
    with pytest.raises(IncompatibleFeatureError):
        check_feature_flags(m, "m", for_write=True)


def test_path_escape_in_manifest() -> None:
    pb = fragment_to_pb(frag(0))
    pb.files[0].path = "../../etc/passwd"
    with pytest.raises(PathEscapeError):
        fragment_from_pb(pb)


def test_all_operations_roundtrip() -> None:
    L = LanceOperation
    ops = [
        L.Append([frag(0)]),
        L.Overwrite(SCHEMA, [frag(0)], {"c": "1"}),
        L.Delete([frag(1, deleted=3)], [2], "a > 1"),
        L.Update([1], [frag(2, deleted=1)], [frag(0)], [0], [], "rewrite_rows"),
        L.Project(SCHEMA),
        L.Restore(4),
        L.ReserveFragments(3),
        L.Rewrite([L.RewriteGroup([frag(1)], [frag(5)])], []),
        L.Merge([frag(1)], SCHEMA),
    ]
    for op in ops:
        txn = Transaction(5, op, transaction_properties={"x": "y"})
        back = decode_transaction(encode_transaction(txn), "t")
        assert back.operation == op and back.read_version == 5 and back.uuid == txn.uuid
        assert dict(back.transaction_properties) == {"x": "y"}


def test_build_manifest_ids_and_flags() -> None:
    L = LanceOperation
    v1 = build_manifest(None, Transaction(0, L.Overwrite(SCHEMA, [frag(0), frag(0)])), version=1)
    assert [f.id for f in v1.fragments] == [0, 1] and v1.max_fragment_id == 1
    v2 = build_manifest(v1, Transaction(1, L.Append([frag(0)])), version=2)
    assert [f.id for f in v2.fragments] == [0, 1, 2]
    v3 = build_manifest(v2, Transaction(2, L.Delete([frag(1, deleted=2)], [0], "x")), version=3)
    assert [f.id for f in v3.fragments] == [1, 2] and v3.reader_feature_flags & 1
    assert v3.max_fragment_id == 2
    v4 = build_manifest(v3, Transaction(3, L.Overwrite(SCHEMA, [frag(0)])), version=4)
    assert [f.id for f in v4.fragments] == [3]  # 14.0.2: ids continue after max_fragment_id
    v5 = build_manifest(v4, Transaction(4, L.ReserveFragments(2)), version=5)
    assert v5.max_fragment_id == 5
    v6 = build_manifest(v5, Transaction(5, L.Restore(3)), version=6, load_version=lambda v: v3)
    assert [f.id for f in v6.fragments] == [1, 2] and v6.max_fragment_id == 5
    assert v6.writer_version is not None and v6.writer_version.library == "lance-dagster"


def test_conflict_matrix() -> None:
    L = LanceOperation
    base = {0: frag(0).files, 1: frag(1).files}

    def t(op: LanceOperation.BaseOperation) -> Transaction:
        return Transaction(1, op)

    ok, retry, bad = conflicts.Outcome.COMPATIBLE, conflicts.Outcome.RETRYABLE, conflicts.Outcome.INCOMPATIBLE
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Append([frag(0)])), base) is ok
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Overwrite(SCHEMA, [])), base) is bad
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Restore(1)), base) is bad
    d0 = L.Delete([frag(0, deleted=1)], [], "a")
    d1 = L.Delete([frag(1, deleted=1)], [], "b")
    assert conflicts.check(t(d0), t(d1), base) is ok
    assert conflicts.check(t(d0), t(d0), base) is conflicts.Outcome.REBASE_DELETIONS
    assert conflicts.check(t(d0), t(L.Delete([], [0], "c")), base) is retry
    rw = L.Rewrite([L.RewriteGroup([frag(0)], [frag(9)])])
    assert conflicts.check(t(d0), t(rw), base) is retry
    assert conflicts.check(t(d1), t(rw), base) is ok
    assert conflicts.check(t(L.Overwrite(SCHEMA, [])), t(L.Overwrite(SCHEMA, [])), base) is ok
    assert conflicts.check(t(L.Project(SCHEMA)), t(L.Project(SCHEMA)), base) is retry
    assert conflicts.check(t(L.Restore(1)), t(L.Append([])), base) is ok
