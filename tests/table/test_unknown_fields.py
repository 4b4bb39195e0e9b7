"""Unknown protobuf fields written by pylance survive our read-modify-write."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

import lance_format as lf

from .helpers import T, latest_manifest, split_manifest, write_manifest

UNKNOWN_MANIFEST = b"\xb8\x3e\x2a"          # field 999, varint 42


UNKNOWN_FRAGMENT = b"\xc2\x3e\x03abc"       # field 1000, bytes "abc"


UNKNOWN_DATAFILE = b"\xc8\x3e\x07"          # field 1001, varint 7


def test_unknown_fields_in_pylance_manifest_survive_our_append(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lance.write_dataset(T, uri, data_storage_version="2.0")
    path = latest_manifest(uri)
    head, msg, _footer = split_manifest(path.read_bytes())
    msg.MergeFromString(UNKNOWN_MANIFEST)
    msg.fragments[0].MergeFromString(UNKNOWN_FRAGMENT)
    msg.fragments[0].files[0].MergeFromString(UNKNOWN_DATAFILE)
    body = msg.SerializeToString()
    assert UNKNOWN_MANIFEST in body
    write_manifest(path, head, body)
    assert lance.dataset(uri).to_table().equals(T)  # pylance accepts the patched file

    lf.write_dataset(T, uri, mode="append")
    new = latest_manifest(uri)
    assert new != path
    _h, out, _f = split_manifest(new.read_bytes())
    assert out.version == 2
    assert UNKNOWN_MANIFEST in out.SerializeToString()
    frag0 = next(f for f in out.fragments if f.id == 0)
    assert UNKNOWN_FRAGMENT in frag0.SerializeToString()
    assert UNKNOWN_DATAFILE in frag0.files[0].SerializeToString()
    assert lance.dataset(uri).to_table().equals(pa.concat_tables([T, T]))

    # and through a delete that rewrites fragment 0's message
    lf.dataset(uri).delete("a = 0")
    _h, out, _f = split_manifest(latest_manifest(uri).read_bytes())
    assert UNKNOWN_MANIFEST in out.SerializeToString()
    frag0 = next(f for f in out.fragments if f.id == 0)
    assert frag0.HasField("deletion_file")
    assert UNKNOWN_FRAGMENT in frag0.SerializeToString()
    assert UNKNOWN_DATAFILE in frag0.files[0].SerializeToString()
