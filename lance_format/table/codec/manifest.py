"""Codec of manifest files.

File layout written (``rust/lance-table/src/io/manifest.rs`` in lance 14.0.2):
``[LP IndexSection]? [LP Transaction] [LP Manifest] [i64 pos][i16 0][i16 2]["LANC"]``
where LP = ``u32`` little-endian length + protobuf bytes. The inline transaction
offset goes in field 23; field 21 (older writers) is still read.

The ``Manifest`` message is written in three pieces: the schema fields (field 1), the
fragments (field 2, each the fragment's cached wire bytes) and everything else. Protobuf
serializes fields in number order, so the concatenation is exactly the bytes a single
``SerializeToString`` would give, without building thousands of fragment messages.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Any

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, UnsupportedVersionError
from lance_format.pbwire import check_wire_types
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_from_pb, schema_to_pb
from lance_format.session import CacheKind, Session, default_session
from lance_format.table.codec.fragments import (
    base_path_from_pb,
    base_path_to_pb,
    decoded_from,
    fragment_bytes,
    fragment_field_bytes,
    fragments_from_pb,
    fragments_from_wire,
)
from lance_format.table.codec.indices import decode_index_section, encode_index_section
from lance_format.table.codec.wire import merge_unknown, parse, unknown_bytes
from lance_format.table.manifest import FLAG_V2_FORMAT_DEPRECATED, Manifest, WriterVersion

MAGIC = b"LANC"
FOOTER_SIZE = 16
FOOTER_VERSION = (0, 2)

#: ``Manifest`` fields the model holds (or the file layout decides); any other field is
#: carried through ``Manifest.unknown_fields``.
_MODELED = frozenset({
    "fields", "fragments", "version", "schema_metadata", "index_section", "timestamp", "tag",
    "reader_feature_flags", "writer_feature_flags", "max_fragment_id", "transaction_file",
    "writer_version", "next_row_id", "data_format", "config", "base_paths", "table_metadata",
    "transaction_section_deprecated", "transaction_section", "branch", "max_allocated_field_id",
})
def _lp(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def _schema_wire(schema: LanceSchema) -> tuple[bytes, dict[str, bytes]]:
    # Memoized on the (immutable) schema object itself, as ``manifest.arrow_schema`` is: it
    # lives exactly as long as the schema, so every commit of a table encodes it once.
    hit: tuple[bytes, dict[str, bytes]] | None = schema.__dict__.get("_manifest_wire")
    if hit is None:
        fields, metadata = schema_to_pb(schema)
        head = table_pb2.Manifest()
        head.fields.extend(fields)
        meta = {k: v if isinstance(v, bytes) else str(v).encode() for k, v in metadata.items()}
        hit = (bytes(head.SerializeToString()), meta)
        object.__setattr__(schema, "_manifest_wire", hit)
    return hit


def _tail_pb(m: Manifest, schema_metadata: dict[str, bytes]) -> Any:
    # Every field but the schema fields and the fragments.
    pb = table_pb2.Manifest(
        version=m.version,
        tag=m.tag,
        reader_feature_flags=m.reader_feature_flags,
        writer_feature_flags=m.writer_feature_flags,
        transaction_file=m.transaction_file,
        next_row_id=m.next_row_id,
    )
    pb.schema_metadata.update(schema_metadata)
    if m.timestamp_ns:
        pb.timestamp.seconds = m.timestamp_ns // 1_000_000_000
        pb.timestamp.nanos = m.timestamp_ns % 1_000_000_000
    if m.writer_version is not None:
        wv = m.writer_version
        pb.writer_version.library = wv.library
        pb.writer_version.version = wv.version
        if wv.prerelease is not None:
            pb.writer_version.prerelease = wv.prerelease
        if wv.build_metadata is not None:
            pb.writer_version.build_metadata = wv.build_metadata
    if m.max_fragment_id is not None:
        pb.max_fragment_id = m.max_fragment_id
    pb.data_format.file_format = m.data_format[0]
    pb.data_format.version = m.data_format[1]
    pb.config.update(dict(m.config))
    pb.table_metadata.update(dict(m.table_metadata))
    pb.base_paths.extend(base_path_to_pb(bp) for bp in m.base_paths)
    if m.branch is not None:
        pb.branch = m.branch
    if m.max_allocated_field_id is not None:
        pb.max_allocated_field_id = m.max_allocated_field_id
    merge_unknown(pb, m.unknown_fields)
    return pb


def _sorted_fragments(m: Manifest) -> list[Any]:
    frags = list(m.fragments)
    ids = [f.id for f in frags]
    if ids != sorted(ids):  # manifests keep them sorted; only hand-built ones may not be
        frags.sort(key=lambda f: f.id)
    return frags


def encode_manifest(m: Manifest, transaction_bytes: bytes) -> bytes:
    """Serialize a manifest file with its inline transaction (and index section)."""
    return encode_manifest_decoded(m, transaction_bytes)[0]


def encode_manifest_decoded(m: Manifest, transaction_bytes: bytes, *, session: Session | None = None
                            ) -> tuple[bytes, Manifest]:
    """Like :func:`encode_manifest`, also returning what decoding the file gives back.

    The second value equals ``decode_manifest(data, ...)`` (fragments carried over from a
    decoded manifest are the very same objects), built without parsing the fragments.
    ``session`` caches decoded schemas and fragments (default: the process's).
    """
    head, schema_metadata = _schema_wire(m.schema)
    tail = _tail_pb(m, schema_metadata)
    out = bytearray()
    section = b""
    if m.indices:
        section = encode_index_section(m.indices)
        tail.index_section = 0
        out += _lp(section)
    tail.transaction_section = len(out)
    out += _lp(transaction_bytes)
    pos = len(out)
    frags = _sorted_fragments(m)
    tail_bytes = bytes(tail.SerializeToString())
    body = b"".join([head, *[fragment_field_bytes(f) for f in frags], tail_bytes])
    out += _lp(body)
    out += struct.pack("<qhh", pos, *FOOTER_VERSION) + MAGIC
    data = bytes(out)
    where = "manifest being written"
    pb = parse(table_pb2.Manifest, head + tail_bytes, where, "manifest")
    indices = decode_index_section(section, where) if section else ()
    # Fragments decoded from their bytes decode to themselves; only the others are decoded.
    todo = [i for i, f in enumerate(frags) if not decoded_from(f)]
    fresh = fragments_from_wire([fragment_bytes(frags[i]) for i in todo], where, session=session) if todo else ()
    models = list(frags)
    for i, f in zip(todo, fresh, strict=True):
        models[i] = f
    decoded = _from_pb(pb, tuple(models), where, indices, transaction_bytes, session)
    return data, decoded


def read_length_prefixed(data: bytes, offset: int, end: int, what: str, where: str) -> bytes:
    """``data[offset + 4 : offset + 4 + n]`` where ``n`` is the u32 at ``offset``, checked against ``end``."""
    if offset < 0 or offset + 4 > end:
        raise CorruptFileError(f"{where}: {what} offset {offset} is outside the file ({end} bytes)")
    (length,) = struct.unpack_from("<I", data, offset)
    if offset + 4 + length > end:
        raise CorruptFileError(f"{where}: {what} of {length} bytes at {offset} runs past the end of the file")
    return data[offset + 4 : offset + 4 + length]


def _decode_pb(data: bytes, where: str) -> tuple[Any, bytes | None, int]:
    size = len(data)
    if size < FOOTER_SIZE or data[-4:] != MAGIC:
        raise CorruptFileError(f"{where}: not a Lance manifest (missing LANC footer, {size} bytes)")
    (pos,) = struct.unpack_from("<q", data, size - FOOTER_SIZE)
    body = read_length_prefixed(data, pos, size - FOOTER_SIZE, "manifest", where)
    if pos + 4 + len(body) != size - FOOTER_SIZE:
        raise CorruptFileError(f"{where}: manifest does not end at the footer (truncated or corrupt)")
    pb = parse(table_pb2.Manifest, body, where, "manifest protobuf")
    txn: bytes | None = None
    if pb.HasField("transaction_section"):
        txn = read_length_prefixed(data, pb.transaction_section, pos, "inline transaction", where)
    elif pb.HasField("transaction_section_deprecated"):
        txn = read_length_prefixed(data, pb.transaction_section_deprecated, pos, "inline transaction", where)
    return pb, txn, pos


def decode_manifest(data: bytes, where: str, *, session: Session | None = None) -> Manifest:
    """Parse a manifest file's bytes (``session`` caches schemas and fragments; default: the process's).

    Raises:
        CorruptFileError: if the file is truncated or malformed.
    """
    pb, txn, pos = _decode_pb(data, where)
    indices: tuple[Any, ...] = ()
    if pb.HasField("index_section"):
        indices = decode_index_section(read_length_prefixed(data, pb.index_section, pos, "index section", where), where)
    return _from_pb(pb, fragments_from_pb(pb.fragments[:], where, session=session), where, indices, txn,
                    session)


def manifest_message(data: bytes, where: str) -> tuple[Any, bytes | None]:
    """The raw ``lance.table.Manifest`` message of a manifest file and its inline transaction.

    For tools and tests that inspect the stored bytes; the library itself uses models.
    """
    pb, txn, _pos = _decode_pb(data, where)
    return pb, txn


def manifest_from_message(pb: Any, where: str, *, transaction_bytes: bytes | None = None) -> Manifest:
    """Convert a ``lance.table.Manifest`` message (as :func:`manifest_message` gives) into a model.

    The index section lives outside the message, so the model has no indices.
    """
    return _from_pb(pb, fragments_from_pb(pb.fragments[:], where), where, (), transaction_bytes, None)


#: Decoded schemas by their protobuf bytes, in a session's metadata cache (LanceSchema is
#: immutable; versions share it). A schema holds about 8x its encoded size plus 4 KiB.
MANIFEST_SCHEMA: CacheKind[LanceSchema] = CacheKind("manifest_schema")


def _schema(pb: Any, where: str, session: Session | None) -> LanceSchema:
    cache = (default_session() if session is None else session).metadata_cache
    fields = pb.fields[:]
    metadata = dict(pb.schema_metadata)
    key = (tuple([f.SerializeToString() for f in fields]), tuple(sorted(metadata.items())))
    schema = cache.get(MANIFEST_SCHEMA, key)
    if schema is None:
        try:
            schema = schema_from_pb(fields, metadata, where=where)
        except CorruptFileError:
            raise
        except Exception as exc:  # schema codec errors carry no file name; add it
            raise CorruptFileError(f"{where}: invalid schema: {exc}") from exc
        encoded = sum(len(b) for b in key[0]) + sum(len(k) + len(v) for k, v in key[1])
        cache.put(MANIFEST_SCHEMA, key, schema, 4096 + 9 * encoded)
    return schema


#: ``data_format.version`` strings a manifest may carry (what lance's ``LanceFileVersion``
#: parses and this implementation reads; lance also knows its unreleased "2.3").
KNOWN_STORAGE_VERSIONS = ("0.1", "2.0", "2.1", "2.2")


def _from_pb(pb: Any, fragments: tuple[Any, ...], where: str, indices: tuple[Any, ...],
             transaction_bytes: bytes | None, session: Session | None) -> Manifest:
    wv = None
    if pb.HasField("writer_version"):
        w = pb.writer_version
        wv = WriterVersion(
            w.library,
            w.version,
            w.prerelease if w.HasField("prerelease") else None,
            w.build_metadata if w.HasField("build_metadata") else None,
        )
    if pb.HasField("data_format"):
        data_format = (pb.data_format.file_format or "lance", pb.data_format.version)
        if data_format[1] not in KNOWN_STORAGE_VERSIONS:
            # pylance refuses these too ("Unknown Lance storage version", lance-file version.rs):
            # guessing a layout would read the data files wrongly.
            raise UnsupportedVersionError(f"{where}: unknown Lance storage version "
                                          f"{data_format[1]!r} (known: {', '.join(KNOWN_STORAGE_VERSIONS)})")
    else:
        data_format = ("lance", _infer_format(fragments, pb.writer_feature_flags))
    ts = pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos if pb.HasField("timestamp") else 0
    return Manifest(
        schema=_schema(pb, where, session),
        fragments=fragments,
        version=pb.version,
        timestamp_ns=ts,
        writer_version=wv,
        reader_feature_flags=pb.reader_feature_flags,
        writer_feature_flags=pb.writer_feature_flags,
        max_fragment_id=pb.max_fragment_id if pb.HasField("max_fragment_id") else None,
        transaction_file=pb.transaction_file,
        next_row_id=pb.next_row_id,
        data_format=data_format,
        config=dict(pb.config),
        table_metadata=dict(pb.table_metadata),
        tag=pb.tag,
        indices=indices,
        base_paths=tuple(base_path_from_pb(bp) for bp in pb.base_paths),
        branch=pb.branch if pb.HasField("branch") else None,
        max_allocated_field_id=pb.max_allocated_field_id if pb.HasField("max_allocated_field_id") else None,
        unknown_fields=_unknown(pb, where),
        transaction_bytes=transaction_bytes,
    )


def _unknown(pb: Any, where: str) -> bytes:
    # The manifest's own small sub-messages (data format, writer version, maps, base paths) are
    # checked here; fragments, the schema and the index section are checked as they decode.
    check_wire_types(pb, where, skip=frozenset({"fragments", "fields"}))
    return unknown_bytes(pb, _MODELED, where)


def _infer_format(fragments: tuple[Any, ...], writer_flags: int) -> str:
    # Old manifests lack data_format: infer it from the first data file
    # (``TryFrom<pb::Manifest>`` in rust/lance-table/src/format/manifest.rs).
    for frag in fragments:
        for f in frag.files:
            if (f.file_major_version, f.file_minor_version) in ((0, 3), (2, 0)):
                return "2.0"
            if f.file_major_version >= 2:
                return f"{f.file_major_version}.{f.file_minor_version}"
            return "0.1"
    return "2.0" if writer_flags & FLAG_V2_FORMAT_DEPRECATED else "0.1"


@dataclass(frozen=True)
class VersionInfo:
    """What ``LanceDataset.versions()`` reports about one manifest file, read without models.

    Attributes:
        version: Version number.
        timestamp_ns: Commit time in nanoseconds since the epoch.
        transaction_file: Name of the ``.txn`` file, if recorded.
        transaction_bytes: Inline transaction bytes, if present.
        summary: Statistics keyed like :meth:`Manifest.summary`.
    """

    version: int
    timestamp_ns: int
    transaction_file: str
    transaction_bytes: bytes | None
    summary: dict[str, str] = dataclasses.field(default_factory=dict)


#: Per-fragment statistics by serialized fragment, in a session's metadata cache: versions share
#: most fragments, so ``versions()`` over N versions computes each distinct fragment's numbers once.
FRAGMENT_STATS: CacheKind[tuple[int, int, int, int, int]] = CacheKind("fragment_stats")
_FRAGMENT_STATS_BYTES = 240  # the 5-tuple of small ints (the key is counted separately)


def _fragment_stats(frag: Any) -> tuple[int, int, int, int, int]:
    size = 0
    for f in frag.files:
        size += f.file_size_bytes
    if frag.HasField("deletion_file"):
        return frag.physical_rows, len(frag.files), size, 1, frag.deletion_file.num_deleted_rows
    return frag.physical_rows, len(frag.files), size, 0, 0


def version_info(data: bytes, where: str, *, session: Session | None = None) -> VersionInfo:
    """Version number, time, transaction and statistics of a manifest file (no models built).

    ``session`` caches per-fragment statistics (default: the process-wide session).

    Raises:
        CorruptFileError: if the file is truncated or malformed.
    """
    pb, txn, _pos = _decode_pb(data, where)
    cache = (default_session() if session is None else session).metadata_cache
    frags = pb.fragments[:]
    keys = [f.SerializeToString() for f in frags]
    stats = cache.get_many(FRAGMENT_STATS, keys)
    if None in stats:  # only fragments new since the versions seen so far
        new = []
        for i, st in enumerate(stats):
            if st is None:
                stats[i] = st = _fragment_stats(frags[i])
                new.append((keys[i], st, _FRAGMENT_STATS_BYTES + len(keys[i])))
        cache.put_many(FRAGMENT_STATS, new)
    # Column sums in C (zip/sum) rather than five additions per fragment in bytecode.
    totals = [sum(col) for col in zip(*stats, strict=True)] if stats else [0] * 5
    physical, files, size, with_deletions, deleted = totals
    summary = {
        "total_data_file_rows": str(physical),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(with_deletions),
        "total_files_size": str(size),
        "total_fragments": str(len(frags)),
        "total_rows": str(physical - deleted),
    }
    ts = pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos
    return VersionInfo(pb.version, ts, pb.transaction_file, txn, summary)


__all__ = [
    "VersionInfo",
    "decode_manifest",
    "encode_manifest",
    "encode_manifest_decoded",
    "manifest_from_message",
    "manifest_message",
    "version_info",
]
