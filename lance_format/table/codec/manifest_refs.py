"""What version cleanup needs from a manifest file, read straight from its protobuf message.

Cleanup looks at every version's manifest, but only at a few of its parts: the version number,
the commit time, the files it references (data files, deletion files, the transaction file) and
its index segments. Building the table models (fragments, data files, schema) for that is most of
a cleanup's CPU: 10,000 fragments take over a second to model and 20 ms to walk as parsed
protobuf messages. lance's own cleanup (``rust/lance/src/dataset/cleanup.rs``) gathers the same
parts: fragment files, deletion files, the transaction file and the index uuids.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from lance_format._pb import table_pb2
from lance_format.errors import IncompatibleFeatureError
from lance_format.table.codec.indices import uuid_from_pb
from lance_format.table.codec.manifest import FOOTER_SIZE, manifest_message, read_length_prefixed
from lance_format.table.codec.wire import parse
from lance_format.table.manifest import SUPPORTED_FLAGS
from lance_format.table.naming import DATA_DIR, deletion_file_key, index_dir, transaction_key

_BITMAP = table_pb2.DeletionFile.BITMAP


@dataclass(frozen=True)
class ManifestRefs:
    """One version as cleanup sees it.

    Attributes:
        version: Version number.
        timestamp: Commit time (UTC), as ``Manifest.timestamp`` gives it.
        transaction: Key of the version's ``.txn`` file, if it records one.
        refs: Keys the version references in the dataset root (data, deletion and transaction
            files) and ``_indices/{uuid}/`` prefixes of its index segments.
    """

    version: int
    timestamp: dt.datetime
    transaction: str | None
    refs: frozenset[str]


def _index_section(data: bytes, offset: int, where: str) -> bytes:
    # The section is length-prefixed (u32 little-endian) at ``offset`` and ends before the manifest.
    return read_length_prefixed(data, offset, len(data) - FOOTER_SIZE, "index section", where)


def _fragment_refs(fragments: Any, out: set[str]) -> None:
    # Files with a base_id live under another base path, never in this dataset's root.
    prefix = f"{DATA_DIR}/"
    out.update([prefix + df.path for frag in fragments for df in frag.files if not df.HasField("base_id")])
    for frag in fragments:
        if frag.HasField("deletion_file"):
            d = frag.deletion_file
            if not d.HasField("base_id"):
                kind = "bitmap" if d.file_type == _BITMAP else "array"
                out.add(deletion_file_key(frag.id, d.read_version, d.id, kind))


def decode_refs(data: bytes, where: str) -> ManifestRefs:
    """The parts of a manifest file's bytes that cleanup needs.

    Raises:
        CorruptFileError: if the file is truncated or malformed.
        IncompatibleFeatureError: if the manifest sets a reader feature flag we do not know
            (as reading it as a dataset would refuse it).
    """
    pb, _txn = manifest_message(data, where)
    unknown = pb.reader_feature_flags & ~SUPPORTED_FLAGS
    if unknown:
        bits = ", ".join(str(1 << i) for i in range(64) if unknown >> i & 1)
        raise IncompatibleFeatureError(f"{where}: reader feature flag(s) {bits} are not supported")
    refs: set[str] = set()
    _fragment_refs(pb.fragments, refs)
    txn = transaction_key(pb.transaction_file) if pb.transaction_file else None
    if txn is not None:
        refs.add(txn)
    if pb.HasField("index_section"):
        section = parse(table_pb2.IndexSection, _index_section(data, pb.index_section, where), where,
                        "index section")
        refs.update(f"{index_dir(uuid_from_pb(entry.uuid.uuid))}/" for entry in section.indices)
    ns = pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos if pb.HasField("timestamp") else 0
    return ManifestRefs(pb.version, dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC), txn, frozenset(refs))


__all__ = ["ManifestRefs", "decode_refs"]
