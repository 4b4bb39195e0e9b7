"""The manifest: one immutable snapshot of a table version, and its feature flags.

A plain model; ``lance_format.table.codec.manifest`` reads and writes manifest files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_format.errors import CorruptFileError, IncompatibleFeatureError
from lance_format.schema import LanceSchema
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.models import BasePath, FragmentMetadata

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
#: Bits this implementation reads and writes (``rust/lance-table/src/feature_flags.rs`` in lance
#: 14.0.2); the rest is refused.
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
class Manifest:
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
        indices: Index segments of the index section.
        base_paths: Extra roots of a multi-base dataset.
        branch: Name of the branch this version belongs to (``None`` = main).
        max_allocated_field_id: High-water mark of field ids ever allocated, if recorded.
        unknown_fields: Wire bytes of manifest fields this library does not interpret
            (unknown ones, and known ones it only carries along such as ``version_aux_data``).
        transaction_bytes: Inline transaction protobuf bytes, if present.
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
    indices: tuple[IndexMetadata, ...] = ()
    base_paths: tuple[BasePath, ...] = ()
    branch: str | None = None
    max_allocated_field_id: int | None = None
    unknown_fields: bytes = field(default=b"", repr=False)
    transaction_bytes: bytes | None = field(default=None, compare=False, repr=False)

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

    def base_path(self, base_id: int) -> BasePath | None:
        """Return the base path with ``base_id`` or ``None``."""
        for bp in self.base_paths:
            if bp.id == base_id:
                return bp
        return None

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
            if not frag.has_row_ids:
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
            if version[0] == 0 and version != (0, 3):
                version = (0, 2)  # legacy files: 0.0 (old writers), 0.1 and 0.2 are one format
            if version != default and version != (0, 3):
                mixed = True
    if deletions:
        flags |= FLAG_DELETION_FILES
    if manifest.uses_stable_row_ids:
        flags |= FLAG_STABLE_ROW_IDS
    if manifest.base_paths:
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


def arrow_schema(schema: LanceSchema) -> pa.Schema:
    """``schema.to_arrow()``, computed once per schema object (both are immutable).

    Decoded manifests share schema objects, so every commit and dataset handle of a
    table reuses one conversion.
    """
    # Memoized on the schema object itself: it lives exactly as long as the schema, so
    # nothing process-wide grows.
    hit: pa.Schema | None = schema.__dict__.get("_arrow_schema")
    if hit is None:
        hit = schema.to_arrow()
        object.__setattr__(schema, "_arrow_schema", hit)
    return hit
