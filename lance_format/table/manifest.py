"""The manifest: one immutable snapshot of a table version, and its on-disk codec.

File layout written (FACTS a, 14.0.2):
``[LP IndexSection]? [LP Transaction] [LP Manifest] [i64 pos][i16 0][i16 2]["LANC"]``
where LP = ``u32`` little-endian length + protobuf bytes. The inline transaction
offset goes in field 23; field 21 (older writers) is still read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import operator
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, IncompatibleFeatureError
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_from_pb, schema_to_pb
from lance_format.table.fragment import FragmentMetadata, PicklableModel, encoded_fragment, fragments_from_pb

MAGIC = b"LANC"
FOOTER_SIZE = 16
FOOTER_VERSION = (0, 2)

LIBRARY_NAME = "lance-dagster"
LIBRARY_VERSION = "0.1.0"

FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
FLAG_BASE_PATHS = 16
FLAG_NO_TRANSACTION_FILES = 32
FLAG_MIXED_FILE_VERSIONS = 256
#: Bits this implementation reads and writes (FACTS a, 14.0.2 table); the rest is refused.
SUPPORTED_FLAGS = 1 | 2 | 4 | 8 | 16 | 32 | 128 | 256 | 2048
#: Bits carried forward unchanged on commit (meaning unknown but harmless to 14.0.2).
PASSTHROUGH_FLAGS = 4 | 128 | 2048


@dataclass(frozen=True)
class WriterVersion:
    """Library that wrote a manifest."""

    library: str
    version: str
    prerelease: str | None = None
    build_metadata: str | None = None


OUR_WRITER_VERSION = WriterVersion(LIBRARY_NAME, LIBRARY_VERSION)


@dataclass(frozen=True)
class Manifest(PicklableModel):
    """One table version.

    Attributes:
        schema: Table schema with Lance field ids.
        fragments: Fragments sorted by id.
        version: Version number (1-based).
        timestamp_ns: Commit time in nanoseconds since the epoch.
        writer_version: Library that wrote this manifest.
        reader_feature_flags: Feature bits a reader must understand.
        writer_feature_flags: Feature bits a writer must understand.
        max_fragment_id: High-water mark of fragment ids ever used (``None`` = none yet).
        transaction_file: Name of the ``.txn`` file relative to ``_transactions/``.
        next_row_id: Next stable row id (only with stable row ids).
        data_format: ``(file_format, version)``, e.g. ``("lance", "2.0")``.
        config: Table config key/values.
        table_metadata: Free-form table metadata.
        tag: Legacy tag string (unused).
        indices: ``IndexMetadata`` protobuf messages of the index section.
        raw: Decoded ``lance.table.Manifest`` (keeps unknown fields).
        transaction_bytes: Inline transaction protobuf bytes, if present.
        raw_fragments: The models decoded from ``raw.fragments``, in order (set by decoding
            and committing); a rewrite keeps the stored bytes of those still present.
    """

    schema: LanceSchema
    fragments: tuple[FragmentMetadata, ...]
    version: int
    timestamp_ns: int = 0
    writer_version: WriterVersion | None = OUR_WRITER_VERSION
    reader_feature_flags: int = 0
    writer_feature_flags: int = 0
    max_fragment_id: int | None = None
    transaction_file: str = ""
    next_row_id: int = 0
    data_format: tuple[str, str] = ("lance", "2.0")
    config: Mapping[str, str] = field(default_factory=dict)
    table_metadata: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""
    indices: tuple[Any, ...] = ()
    raw: Any = field(default=None, compare=False, repr=False)
    transaction_bytes: bytes | None = field(default=None, compare=False, repr=False)
    raw_fragments: tuple[FragmentMetadata, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def timestamp(self) -> dt.datetime:
        """Commit time as an aware UTC datetime (microsecond precision)."""
        return dt.datetime.fromtimestamp(self.timestamp_ns / 1e9, tz=dt.UTC)

    @property
    def uses_stable_row_ids(self) -> bool:
        """Whether the table assigns stable row ids."""
        return bool(self.reader_feature_flags & FLAG_STABLE_ROW_IDS)

    @property
    def data_storage_version(self) -> str:
        """The table's default data file version, e.g. ``"2.0"``."""
        return self.data_format[1]

    def base_paths(self) -> dict[int, tuple[str, bool]]:
        """Base paths as ``{id: (path, is_dataset_root)}``."""
        if self.raw is None:
            return {}
        return {bp.id: (bp.path, bp.is_dataset_root) for bp in self.raw.base_paths}

    def fragment(self, fragment_id: int) -> FragmentMetadata | None:
        """Return the fragment with ``fragment_id`` or ``None``."""
        for frag in self.fragments:
            if frag.id == fragment_id:
                return frag
        return None

    def summary(self) -> dict[str, str]:
        """Per-version statistics, keyed like pylance's ``versions()`` metadata."""
        files = [f for frag in self.fragments for f in frag.files]
        deleted = sum(frag.num_deletions for frag in self.fragments)
        physical = sum(frag.physical_rows for frag in self.fragments)
        return {
            "total_data_file_rows": str(physical),
            "total_data_files": str(len(files)),
            "total_deletion_file_rows": str(deleted),
            "total_deletion_files": str(sum(1 for f in self.fragments if f.deletion_file is not None)),
            "total_files_size": str(sum(f.file_size_bytes or 0 for f in files)),
            "total_fragments": str(len(self.fragments)),
            "total_rows": str(physical - deleted),
        }

    def replace(self, **changes: Any) -> Manifest:
        """Return a copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)


# --- feature flags ------------------------------------------------------------


def check_feature_flags(manifest: Manifest, where: str, *, for_write: bool = False) -> None:
    """Refuse manifests whose feature flags we cannot honour.

    Raises:
        IncompatibleFeatureError: naming the unknown flag(s) and the manifest.
    """
    reader, writer = manifest.reader_feature_flags, manifest.writer_feature_flags
    unknown = reader & ~SUPPORTED_FLAGS
    if unknown:
        raise IncompatibleFeatureError(
            f"{where}: reader feature flag(s) {_bits(unknown)} are not supported by {LIBRARY_NAME}"
        )
    if for_write and writer & ~SUPPORTED_FLAGS:
        raise IncompatibleFeatureError(
            f"{where}: writer feature flag(s) {_bits(writer & ~SUPPORTED_FLAGS)} are not supported "
            f"by {LIBRARY_NAME}; refusing to write"
        )
    if (reader ^ writer) & FLAG_MIXED_FILE_VERSIONS:
        raise CorruptFileError(f"{where}: feature flag 256 must be set in both reader and writer flags")
    if reader & FLAG_STABLE_ROW_IDS:
        for frag in manifest.fragments:
            if frag.row_id_meta is None and not (frag.raw is not None and frag.raw.HasField("external_row_ids")):
                raise CorruptFileError(f"{where}: stable row ids are enabled but fragment {frag.id} "
                                       "has no row id sequence")


def _bits(value: int) -> str:
    return ", ".join(str(1 << i) for i in range(64) if value >> i & 1)


def compute_feature_flags(manifest: Manifest, base_flags: int = 0) -> tuple[int, int]:
    """Return ``(reader, writer)`` flags for a manifest about to be written."""
    flags = base_flags & PASSTHROUGH_FLAGS
    default = _parse_version(manifest.data_format[1])
    # One pass over the fragments (this runs on every commit).
    deletions = mixed = False
    for frag in manifest.fragments:
        if frag.deletion_file is not None:
            deletions = True
        for df in frag.files:
            version = (df.file_major_version, df.file_minor_version)
            if version != default and version != (0, 3):
                mixed = True
    if deletions:
        flags |= FLAG_DELETION_FILES
    if manifest.uses_stable_row_ids:
        flags |= FLAG_STABLE_ROW_IDS
    if manifest.raw is not None and len(manifest.raw.base_paths) > 0:
        flags |= FLAG_BASE_PATHS
    if mixed:
        flags |= FLAG_MIXED_FILE_VERSIONS
    writer = flags | (FLAG_TABLE_CONFIG if manifest.config else 0)
    return flags, writer


def _parse_version(text: str) -> tuple[int, int]:
    if text in ("0.3", "2.0"):
        return (2, 0)
    if text in ("0.1", "legacy"):
        return (0, 2)
    major, _, minor = text.partition(".")
    try:
        return int(major), int(minor)
    except ValueError:
        return (-1, -1)


# --- codec -------------------------------------------------------------------


def _lp(message: Any) -> bytes:
    body = message.SerializeToString()
    return struct.pack("<I", len(body)) + bytes(body)


_fragment_id = operator.attrgetter("id")


def kept_prefix(m: Manifest, target: Sequence[FragmentMetadata]) -> int:
    """How many leading fragments of ``target`` (sorted by id) are ``m.raw.fragments`` as stored.

    Those are the very model objects decoded from them (the leading ``m.raw_fragments``).
    """
    known = m.raw_fragments
    if m.raw is None or known is None or len(known) != len(m.raw.fragments):
        return 0
    keep = 0
    for old, new in zip(known, target, strict=False):  # target may be longer (appends)
        if old is not new:
            break
        keep += 1
    return keep


def manifest_to_pb(m: Manifest) -> Any:
    """Build the ``lance.table.Manifest`` message (starting from ``m.raw``)."""
    pb = table_pb2.Manifest()
    if m.raw is not None:
        pb.CopyFrom(m.raw)
    fields, metadata = schema_to_pb(m.schema)
    del pb.fields[:]
    pb.fields.extend(fields)
    pb.schema_metadata.clear()
    for key, value in metadata.items():
        pb.schema_metadata[key] = value if isinstance(value, bytes) else str(value).encode()
    target = sorted(m.fragments, key=_fragment_id)
    # ``pb.fragments`` (copied from raw) already encodes ``raw_fragments``: keep the
    # leading run that is unchanged and encode only the rest; an append then
    # re-encodes one fragment instead of all of them.
    keep = kept_prefix(m, target)
    del pb.fragments[keep:]
    pb.fragments.extend([encoded_fragment(f) for f in target[keep:]])
    pb.version = m.version
    pb.ClearField("timestamp")
    if m.timestamp_ns:
        pb.timestamp.seconds = m.timestamp_ns // 1_000_000_000
        pb.timestamp.nanos = m.timestamp_ns % 1_000_000_000
    pb.ClearField("writer_version")
    if m.writer_version is not None:
        wv = m.writer_version
        pb.writer_version.library = wv.library
        pb.writer_version.version = wv.version
        if wv.prerelease is not None:
            pb.writer_version.prerelease = wv.prerelease
        if wv.build_metadata is not None:
            pb.writer_version.build_metadata = wv.build_metadata
    pb.tag = m.tag
    pb.reader_feature_flags = m.reader_feature_flags
    pb.writer_feature_flags = m.writer_feature_flags
    if m.max_fragment_id is None:
        pb.ClearField("max_fragment_id")
    else:
        pb.max_fragment_id = m.max_fragment_id
    pb.transaction_file = m.transaction_file
    pb.next_row_id = m.next_row_id
    pb.data_format.file_format = m.data_format[0]
    pb.data_format.version = m.data_format[1]
    pb.config.clear()
    pb.config.update(dict(m.config))
    pb.table_metadata.clear()
    pb.table_metadata.update(dict(m.table_metadata))
    pb.ClearField("index_section")
    pb.ClearField("transaction_section")
    pb.ClearField("transaction_section_deprecated")
    return pb


def encode_manifest(m: Manifest, transaction_bytes: bytes) -> bytes:
    """Serialize a manifest file with its inline transaction (and index section)."""
    return encode_manifest_pb(m, transaction_bytes)[0]


def encode_manifest_pb(m: Manifest, transaction_bytes: bytes) -> tuple[bytes, Any]:
    """Like :func:`encode_manifest`, also returning the ``Manifest`` protobuf written."""
    pb = manifest_to_pb(m)
    out = bytearray()
    if m.indices:
        section = table_pb2.IndexSection()
        section.indices.extend(m.indices)
        pb.index_section = 0
        out += _lp(section)
    pb.transaction_section = len(out)
    out += struct.pack("<I", len(transaction_bytes)) + transaction_bytes
    pos = len(out)
    out += _lp(pb)
    out += struct.pack("<qhh", pos, *FOOTER_VERSION) + MAGIC
    return bytes(out), pb


def _read_lp(data: bytes, offset: int, end: int, what: str, where: str) -> bytes:
    if offset < 0 or offset + 4 > end:
        raise CorruptFileError(f"{where}: {what} offset {offset} is outside the file ({end} bytes)")
    (length,) = struct.unpack_from("<I", data, offset)
    if offset + 4 + length > end:
        raise CorruptFileError(f"{where}: {what} of {length} bytes at {offset} runs past the end of the file")
    return data[offset + 4 : offset + 4 + length]


def decode_manifest(data: bytes, where: str) -> Manifest:
    """Parse a manifest file's bytes.

    Raises:
        CorruptFileError: if the file is truncated or malformed.
    """
    pb, txn, pos = _decode_pb(data, where)
    indices: tuple[Any, ...] = ()
    if pb.HasField("index_section"):
        section = table_pb2.IndexSection()
        raw_section = _read_lp(data, pb.index_section, pos, "index section", where)
        try:
            section.ParseFromString(raw_section)
        except DecodeError as exc:
            raise CorruptFileError(f"{where}: malformed index section: {exc}") from exc
        indices = tuple(section.indices)
    return manifest_from_pb(pb, where, indices=indices, transaction_bytes=txn)


def decode_manifest_pb(data: bytes, where: str) -> tuple[Any, bytes | None]:
    """Parse only the ``Manifest`` protobuf and the inline transaction bytes (no models)."""
    pb, txn, _pos = _decode_pb(data, where)
    return pb, txn


#: Per-fragment statistics by serialized fragment: versions share most fragments, so
#: ``versions()`` over N versions computes each distinct fragment's numbers once.
_FRAGMENT_STATS: dict[bytes, tuple[int, int, int, int, int]] = {}
_FRAGMENT_STATS_MAX = 1 << 14  # ~200 bytes each


def _fragment_stats(frag: Any) -> tuple[int, int, int, int, int]:
    size = 0
    for f in frag.files:
        size += f.file_size_bytes
    if frag.HasField("deletion_file"):
        return frag.physical_rows, len(frag.files), size, 1, frag.deletion_file.num_deleted_rows
    return frag.physical_rows, len(frag.files), size, 0, 0


def summary_of_pb(pb: Any) -> dict[str, str]:
    """:meth:`Manifest.summary` computed straight from a ``Manifest`` protobuf."""
    cache = _FRAGMENT_STATS
    frags = pb.fragments[:]
    keys = [f.SerializeToString() for f in frags]
    stats = [cache.get(k) for k in keys]
    if None in stats:  # only fragments new since the versions seen so far
        for i, st in enumerate(stats):
            if st is None:
                stats[i] = st = _fragment_stats(frags[i])
                if len(cache) >= _FRAGMENT_STATS_MAX:
                    cache.clear()  # bounded; rebuilt on demand
                cache[keys[i]] = st
    # Column sums in C (zip/sum) rather than five additions per fragment in bytecode.
    totals = [sum(col) for col in zip(*stats, strict=True)] if stats else [0] * 5
    physical, files, size, with_deletions, deleted = totals
    return {
        "total_data_file_rows": str(physical),
        "total_data_files": str(files),
        "total_deletion_file_rows": str(deleted),
        "total_deletion_files": str(with_deletions),
        "total_files_size": str(size),
        "total_fragments": str(len(pb.fragments)),
        "total_rows": str(physical - deleted),
    }


def _decode_pb(data: bytes, where: str) -> tuple[Any, bytes | None, int]:
    size = len(data)
    if size < FOOTER_SIZE or data[-4:] != MAGIC:
        raise CorruptFileError(f"{where}: not a Lance manifest (missing LANC footer, {size} bytes)")
    (pos,) = struct.unpack_from("<q", data, size - FOOTER_SIZE)
    body = _read_lp(data, pos, size - FOOTER_SIZE, "manifest", where)
    if pos + 4 + len(body) != size - FOOTER_SIZE:
        raise CorruptFileError(f"{where}: manifest does not end at the footer (truncated or corrupt)")
    pb = table_pb2.Manifest()
    try:
        pb.ParseFromString(body)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: malformed manifest protobuf: {exc}") from exc
    txn: bytes | None = None
    if pb.HasField("transaction_section"):
        txn = _read_lp(data, pb.transaction_section, pos, "inline transaction", where)
    elif pb.HasField("transaction_section_deprecated"):
        txn = _read_lp(data, pb.transaction_section_deprecated, pos, "inline transaction", where)
    return pb, txn, pos


#: Arrow form of schemas, by object (kept alive here so ids stay unique; bounded).
_ARROW_SCHEMAS: dict[int, tuple[LanceSchema, pa.Schema]] = {}


def arrow_schema(schema: LanceSchema) -> pa.Schema:
    """``schema.to_arrow()``, computed once per schema object (both are immutable).

    Decoded manifests share schema objects, so every commit and dataset handle of a
    table reuses one conversion.
    """
    hit = _ARROW_SCHEMAS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    converted = schema.to_arrow()
    if len(_ARROW_SCHEMAS) >= 256:
        _ARROW_SCHEMAS.clear()
    _ARROW_SCHEMAS[id(schema)] = (schema, converted)
    return converted


#: Decoded schemas by their protobuf bytes (LanceSchema is immutable; versions share it).
_SCHEMAS: dict[tuple[tuple[bytes, ...], tuple[tuple[str, bytes], ...]], LanceSchema] = {}


def manifest_from_pb(pb: Any, where: str, *, indices: tuple[Any, ...] = (),
                     transaction_bytes: bytes | None = None,
                     known_fragments: tuple[FragmentMetadata, ...] = ()) -> Manifest:
    """Convert a decoded ``lance.table.Manifest`` into a :class:`Manifest`.

    ``known_fragments`` are models already decoded from the leading ``pb.fragments``
    (a writer that just encoded ``pb`` from them passes them instead of decoding again).
    """
    fields = pb.fields[:]
    metadata = dict(pb.schema_metadata)
    key = (tuple([f.SerializeToString() for f in fields]), tuple(sorted(metadata.items())))
    schema = _SCHEMAS.get(key)
    if schema is None:
        try:
            schema = schema_from_pb(fields, metadata)
        except CorruptFileError:
            raise
        except Exception as exc:  # schema codec errors carry no file name; add it
            raise CorruptFileError(f"{where}: invalid schema: {exc}") from exc
        if len(_SCHEMAS) >= 256:
            _SCHEMAS.clear()
        _SCHEMAS[key] = schema
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
    else:
        data_format = ("lance", _infer_format(pb))
    ts = pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos if pb.HasField("timestamp") else 0
    if known_fragments:
        rest = fragments_from_pb(pb.fragments[len(known_fragments):], where, out_of=len(pb.fragments))
        fragments = known_fragments + rest
    else:
        fragments = fragments_from_pb(pb.fragments, where)
    return Manifest(
        schema=schema,
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
        raw=pb,
        transaction_bytes=transaction_bytes,
        raw_fragments=fragments,
    )


def _infer_format(pb: Any) -> str:
    # Old manifests lack data_format: infer it from the first data file (FACTS a).
    for frag in pb.fragments:
        for f in frag.files:
            if (f.file_major_version, f.file_minor_version) in ((0, 3), (2, 0)):
                return "2.0"
            if f.file_major_version >= 2:
                return f"{f.file_major_version}.{f.file_minor_version}"
            return "0.1"
    return "2.0" if pb.writer_feature_flags & FLAG_V2_FORMAT_DEPRECATED else "0.1"
