"""Helpers shared by the commit tests: a small table, a store snapshot and raw manifest surgery."""

from __future__ import annotations

import struct
from pathlib import Path

import lance
import pyarrow as pa

from lance_format._pb import table_pb2

T = pa.table({"a": pa.array(range(10), pa.int64()), "s": [f"r{i}" for i in range(10)]})


def state(uri: str) -> dict[str, object]:
    """Everything a commit may touch: manifests, hint bytes, transactions, data + deletion files."""
    root = Path(uri)

    def files(sub: str) -> set[str]:
        d = root / sub
        return {p.name for p in d.rglob("*") if p.is_file()} if d.exists() else set()

    hint = root / "_versions" / "latest_version_hint.json"
    return {
        "versions": files("_versions") - {"latest_version_hint.json"},
        "hint": hint.read_bytes() if hint.exists() else None,
        "txns": files("_transactions"),
        "data": files("data"),
        "deletions": files("_deletions"),
    }


def split_manifest(data: bytes) -> tuple[bytes, table_pb2.Manifest, bytes]:
    """Split a manifest file into the bytes before the message, the message and the 16-byte footer."""
    pos, = struct.unpack_from("<q", data, len(data) - 16)
    (n,) = struct.unpack_from("<I", data, pos)
    msg = table_pb2.Manifest()
    msg.ParseFromString(data[pos + 4: pos + 4 + n])
    return data[:pos], msg, data[-16:]


def latest_manifest(uri: str) -> Path:
    """The manifest file of the version pylance opens by default."""
    ds = lance.dataset(uri)
    paths = [p for p in (Path(uri) / "_versions").iterdir() if p.suffix == ".manifest"]
    want = [p for p in paths if split_manifest(p.read_bytes())[1].version == ds.version]
    assert len(want) == 1
    return want[0]


def write_manifest(path: Path, head: bytes, body: bytes) -> None:
    """Write a manifest file from ``head`` (what precedes the message) and a serialized message."""
    path.write_bytes(head + struct.pack("<I", len(body)) + body + struct.pack("<qhh", len(head), 0, 2) + b"LANC")
