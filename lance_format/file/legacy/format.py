"""Codec for the tail of a legacy (v1, footer version 0.1 / 0.2) Lance file.

Layout, as upstream's ``rust/lance-file/src/previous/writer/mod.rs`` (``write_footer``) lays it out::

    [pages of every field, batch by batch]
    [page table: i64 (position, length) for each field id from the lowest to the highest, each batch]
    [statistics pages + their page table]       (optional)
    [dictionary values]                          (for dictionary fields)
    [u32 length][lance.table.Manifest]           (self-describing schema; position 0 = absent)
    [u32 length][lance.file.Metadata]
    [u64 metadata position][u16 major][u16 minor]["LANC"]

Fields are numbered by their Lance field id (structs included, with an empty page); the page table
covers the contiguous id range of the file. This module turns those bytes into plain values; it is
the only legacy module that touches protobuf.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError

from lance_format._pb import file_pb2, table_pb2
from lance_format.errors import CorruptFileError
from lance_format.pbwire import check_varints, check_wire_types
from lance_format.schema import LanceField, LanceSchema
from lance_format.schema_codec import schema_from_pb, schema_to_pb

LEGACY_VERSIONS = ((0, 1), (0, 2))
#: The footer version current writers put on legacy files (``MAJOR_VERSION``/``MINOR_VERSION``
#: of rust/lance-file/src/format.rs).
WRITE_VERSION = (0, 2)
_FOOTER = struct.Struct("<QHH4s")
#: Who wrote the file, in the schema block (the table layer records the same in manifests).
WRITER_LIBRARY = "lance-dagster"
WRITER_LIBRARY_VERSION = "0.1.0"


@dataclass(frozen=True)
class Page:
    """Where one field's data for one batch starts, and how many items it holds."""

    position: int
    length: int


class PageTable(Mapping[int, tuple[Page, ...]]):
    """Field id → one :class:`Page` per batch, over the raw ``(position, length)`` table.

    A 1M-row file has about a thousand batches per field: building ``Page`` objects for every
    field up front cost more than opening the file otherwise does, so they are built per field
    on first access, and the vectorized readers take :meth:`array` directly.

    Args:
        ids: The contiguous field-id range the table covers, in table order.
        table: ``(len(ids), batches, 2)`` int64 positions and lengths.
    """

    def __init__(self, ids: range, table: np.ndarray) -> None:
        self._ids = ids
        self._table = table
        self._pages: dict[int, tuple[Page, ...]] = {}

    def array(self, fid: int) -> np.ndarray | None:
        """``(batches, 2)`` int64 ``(position, length)`` rows of field ``fid`` (None if absent)."""
        if fid not in self._ids:
            return None
        out: np.ndarray = self._table[fid - self._ids.start]
        return out

    def __getitem__(self, fid: int) -> tuple[Page, ...]:
        pages = self._pages.get(fid)
        if pages is None:
            rows = self.array(fid)
            if rows is None:
                raise KeyError(fid)
            pages = tuple(Page(p, n) for p, n in rows.tolist())
            self._pages[fid] = pages
        return pages

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(frozen=True)
class LegacyStatistics:
    """Page-level statistics: per statistics field, one row per batch."""

    schema: LanceSchema
    field_ids: tuple[int, ...]
    page_table: Mapping[int, tuple[Page, ...]]


@dataclass(frozen=True)
class LegacyTail:
    """Everything the tail of a legacy file says.

    Attributes:
        batch_offsets: Cumulative row counts, starting at 0 (``len = batches + 1``).
        page_table: Field id → one page per batch.
        schema: File schema with field ids (from the self-describing manifest).
        dictionaries: Field id → ``(position, length)`` of its dictionary values.
        statistics: Page statistics, when the writer collected them.
    """

    batch_offsets: tuple[int, ...]
    page_table: Mapping[int, tuple[Page, ...]]
    schema: LanceSchema
    dictionaries: dict[int, tuple[int, int]] = field(default_factory=dict)
    statistics: LegacyStatistics | None = None

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return self.batch_offsets[-1] if self.batch_offsets else 0


def is_legacy(major: int, minor: int) -> bool:
    """Whether a footer version pair is a legacy (v1) file."""
    return (major, minor) in LEGACY_VERSIONS


#: ``read(position, length) -> bytes`` over the file.
ReadFn = Callable[[int, int], bytes]


def _lp_message(read: ReadFn, pos: int, size: int, what: str, path: str) -> bytes:
    """The protobuf bytes of a ``u32``-length-prefixed struct at ``pos``."""
    if pos < 0 or pos + 4 > size:
        raise CorruptFileError(f"{path}: {what} position {pos} is outside the {size}-byte file")
    (n,) = struct.unpack("<I", read(pos, 4))
    if pos + 4 + n > size:
        raise CorruptFileError(f"{path}: {what} ({n} bytes at {pos}) runs past the end of the file")
    return read(pos + 4, n)


def _page_table(read: ReadFn, pos: int, ids: range, batches: int, size: int, path: str,
                what: str) -> PageTable:
    n = len(ids) * batches * 2
    if pos < 0 or pos + 8 * n > size:
        raise CorruptFileError(f"{path}: {what} ({len(ids)} fields × {batches} batches at {pos}) "
                               f"runs past the end of the {size}-byte file")
    arr = np.frombuffer(read(pos, 8 * n), dtype="<i8", count=n).reshape(len(ids), batches, 2)
    if n and (int(arr.min()) < 0 or int(arr[:, :, 0].max()) > size):
        raise CorruptFileError(f"{path}: {what} points outside the {size}-byte file")
    return PageTable(ids, arr.astype(np.int64))  # native byte order for the vectorized readers


_LISTS = ("list", "list.struct", "large_list", "large_list.struct")


def _check_page_lengths(schema: LanceSchema, table: PageTable, offsets: tuple[int, ...], path: str) -> None:
    """Every row-aligned page holds its batch's rows (lists: one offset more), as writers record them.

    Row-aligned are the top-level fields and struct children below them; a struct's own page
    is empty, and a list's items have their own counts (only the offsets say how many), so
    those go unchecked. Metadata only: one comparison per field and batch.

    Raises:
        CorruptFileError: a page's recorded length is not its batch's row count.
    """
    sizes = np.diff(np.asarray(offsets, dtype=np.int64))

    def walk(fields: tuple[LanceField, ...]) -> None:
        for f in fields:
            if f.logical_type == "struct":
                walk(f.children)
                continue
            if f.children and f.logical_type not in _LISTS:
                continue  # fixed-size lists of structs: children of their own shape
            rows = table.array(f.id)
            if rows is None:
                continue  # reading the field says so
            want = sizes + 1 if f.logical_type in _LISTS else sizes
            bad = np.flatnonzero(rows[:, 1] != want)
            if bad.size:
                b = int(bad[0])
                raise CorruptFileError(f"{path}: field {f.name!r} (id {f.id}) batch {b}: page of "
                                       f"{int(rows[b, 1])} values, but the batch holds {int(sizes[b])} rows")

    walk(schema.fields)


def parse_tail(read: ReadFn, size: int, path: str) -> LegacyTail:
    """Parse the tail of a legacy file of ``size`` bytes read through ``read``.

    Raises:
        CorruptFileError: truncated footer, tables outside the file, undecodable protobuf, or a
            file without the self-describing schema block.
    """
    if size < _FOOTER.size:
        raise CorruptFileError(f"{path}: file is {size} bytes, too small for a Lance footer")
    meta_pos, _major, _minor, magic = _FOOTER.unpack(read(size - _FOOTER.size, _FOOTER.size))
    if magic != b"LANC":
        raise CorruptFileError(f"{path}: bad magic {magic!r} at end of file (expected b'LANC')")
    meta = file_pb2.Metadata()
    try:
        raw = _lp_message(read, meta_pos, size - _FOOTER.size, "metadata block", path)
        meta.ParseFromString(raw)
        check_varints(file_pb2.Metadata, raw, f"{path}: metadata block")
        check_wire_types(meta, f"{path}: metadata block")  # prost refuses misfiled fields too
        offsets = tuple(int(x) for x in meta.batch_offsets)
        if not meta.manifest_position:
            raise CorruptFileError(f"{path}: legacy file without a schema block cannot be read alone")
        manifest = table_pb2.Manifest()
        raw = _lp_message(read, meta.manifest_position, size, "schema block", path)
        manifest.ParseFromString(raw)
        check_varints(table_pb2.Manifest, raw, f"{path}: schema block")
        check_wire_types(manifest, f"{path}: schema block", skip=frozenset({"fields"}))  # fields: schema_from_pb
    except DecodeError as exc:
        raise CorruptFileError(f"{path}: cannot decode the legacy metadata ({exc})") from exc
    if any(b < a for a, b in zip(offsets, offsets[1:], strict=False)) or (offsets and offsets[0] != 0):
        raise CorruptFileError(f"{path}: batch offsets {list(offsets)[:8]} are not increasing from 0")
    schema = schema_from_pb(manifest.fields, dict(manifest.schema_metadata))
    dictionaries = {int(f.id): (int(f.dictionary.offset), int(f.dictionary.length))
                    for f in manifest.fields if f.HasField("dictionary")}
    batches = max(0, len(offsets) - 1)
    ids = schema.field_ids()
    table: Mapping[int, tuple[Page, ...]] = {}
    if ids and batches:
        table = _page_table(read, int(meta.page_table_position), range(min(ids), max(ids) + 1), batches,
                            size, path, "page table")
        _check_page_lengths(schema, table, offsets, path)
    stats = None
    if meta.HasField("statistics") and meta.statistics.fields:
        st = meta.statistics
        stats_schema = schema_from_pb(st.schema, {})
        leaf = tuple(int(x) for x in st.fields)
        stats = LegacyStatistics(stats_schema, leaf, _page_table(
            read, int(st.page_table_position), range(0, max(leaf) + 1), 1, size, path, "statistics page table"))
    return LegacyTail(offsets, table, schema, dictionaries, stats)


def encode_tail(*, schema: LanceSchema, batch_offsets: list[int], page_table_position: int,
                dictionaries: dict[int, tuple[int, int]], manifest_position: int,
                stats: tuple[LanceSchema, list[int], int] | None) -> tuple[bytes, bytes]:
    """Encode the schema block and the metadata block (each ``u32``-length-prefixed).

    Returns ``(schema_block, metadata_block_without_position)``; the caller writes the schema
    block at ``manifest_position`` and the metadata block after it.
    """
    fields, metadata = schema_to_pb(schema)
    for f in fields:
        if f.id in dictionaries:
            f.dictionary.offset, f.dictionary.length = dictionaries[f.id]
    manifest = table_pb2.Manifest()
    # the block pylance writes is a manifest with only these set (``ManifestDescribing`` in
    # rust/lance-table/src/io/manifest.rs)
    manifest.version = 1
    manifest.writer_version.library = WRITER_LIBRARY
    manifest.writer_version.version = WRITER_LIBRARY_VERSION
    manifest.data_format.file_format = "lance"
    manifest.data_format.version = "0.1"
    manifest.fields.extend(fields)
    for k, v in metadata.items():
        manifest.schema_metadata[k] = v
    schema_bytes = manifest.SerializeToString()
    meta = file_pb2.Metadata()
    meta.batch_offsets.extend(batch_offsets if len(batch_offsets) > 1 else [])
    meta.page_table_position = page_table_position
    meta.manifest_position = manifest_position
    if stats is not None:
        stats_schema, leaf_ids, stats_pos = stats
        stats_fields, _ = schema_to_pb(stats_schema)
        meta.statistics.schema.extend(stats_fields)
        meta.statistics.fields.extend(leaf_ids)
        meta.statistics.page_table_position = stats_pos
    meta_bytes = meta.SerializeToString()
    return (struct.pack("<I", len(schema_bytes)) + schema_bytes,
            struct.pack("<I", len(meta_bytes)) + meta_bytes)


def footer(metadata_position: int, version: tuple[int, int] = WRITE_VERSION) -> bytes:
    """The 16-byte footer."""
    return _FOOTER.pack(metadata_position, version[0], version[1], b"LANC")
