"""The Lance 2.x file container: footer, offset tables, column metadata, buffers.

Byte layout (all integers little endian), in file order::

    page buffers            each padded with 0x48 up to a 64-byte boundary
    column-level buffers    padded the same way
    global buffer 0         raw ``lance.file.FileDescriptor`` (schema + row count)
    column metadatas        one raw ``lance.file.v2.ColumnMetadata`` per column
    CMO table               per column: u64 position, u64 size
    GBO table               per global buffer: u64 position, u64 size
    footer (40 bytes)       u64 column_meta_start, u64 cmo_table_start, u64 gbo_table_start,
                            u32 num_global_buffers, u32 num_columns, u16 major, u16 minor, "LANC"

The real reader takes the CMO table as the last ``16 * num_columns`` bytes before the GBO
table, so the writer keeps them adjacent.

Decoder / encoder protocol
--------------------------
:mod:`lance_format.file.reader` parses the container with :func:`read_file_metadata` and hands
the result to a per-version decoder class (``lance_format.file.v2_0.FileDecoder20`` or the 2.1/2.2
one in ``lance_format.file.v2_1``) constructed as::

    decoder = DecoderClass(meta: FileMetadata, source: ByteSource,
                           schema: pa.Schema, projection: Sequence[int])

``schema`` is the whole file's Arrow schema (field metadata included) and ``projection`` the
indices of the requested top-level fields, in output order. The decoder offers::

    decoder.read_range(start: int, stop: int) -> pa.RecordBatch   # rows [start, stop)
    decoder.take(indices: np.ndarray) -> pa.RecordBatch           # uint64 row offsets, any order

both returning exactly the projected fields. Decoders must read only the byte ranges they need
(through ``source.read_ranges``) and raise :class:`~lance_format.errors.CorruptFileError` naming
``meta.path`` on inconsistent pages.

The writer side is symmetric: :class:`ContainerWriter` owns the output stream and the
alignment rules. :mod:`lance_format.file.writer` builds a per-version encoder
(``lance_format.file.v2_0.FileEncoder20`` / ``lance_format.file.v2_1.FileEncoder21``)::

    encoder = EncoderClass(writer: ContainerWriter, schema: pa.Schema, *,
                           max_page_bytes: int | None, version: tuple[int, int])
    encoder.owning_fields -> list[int]     # positions in LanceSchema.flat() (pre-order) of the
                                           # fields that own a column, in column order
    encoder.write_batch(batch: pa.RecordBatch) -> None   # batch already cast to ``schema``
    encoder.finish() -> list[ColumnMetadata protobuf]    # one per column, by column index

The encoder calls :meth:`ContainerWriter.write_buffer` for every page buffer (pages of different
columns may interleave) and builds column metadata with :func:`make_column_metadata`; the writer
then calls :meth:`ContainerWriter.finish`, which writes global buffer 0 (the FileDescriptor),
the column metadatas, the CMO/GBO tables and the footer.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, overload

import numpy as np
import pyarrow as pa
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from lance_format._pb import file2_pb2, file_pb2
from lance_format.errors import (
    CorruptFileError,
    UnsupportedEncodingError,
    UnsupportedVersionError,
)

# re-exported: decoders and tests take ByteSource from here (it lives in bytesource.py)
from lance_format.file.bytesource import Buf as Buf
from lance_format.file.bytesource import ByteSource as ByteSource
from lance_format.file.legacy.format import parse_tail
from lance_format.pbwire import check_varints, check_wire_types, discard_if_known, has_unknown_fields

FOOTER_SIZE = 40
#: Footer versions of the legacy (v1) format, read by ``lance_format.file.legacy``.
LEGACY_VERSIONS = ((0, 1), (0, 2))
MAGIC = b"LANC"
PAGE_ALIGNMENT = 64
PAD_BYTE = 0x48
_FOOTER = struct.Struct("<QQQIIHH4s")

#: type_url of page encodings in 2.0 files.
ARRAY_ENCODING_URL = "/lance.encodings.ArrayEncoding"
#: type_url of page layouts in 2.1+ files.
PAGE_LAYOUT_URL = "/lance.encodings21.PageLayout"
#: type_url of every column encoding.
COLUMN_ENCODING_URL = "/lance.encodings.ColumnEncoding"
#: ``ColumnEncoding{values: Empty}`` serialized; what every column carries by default.
DEFAULT_COLUMN_ENCODING = b"\x0a\x00"

V2_0 = (2, 0)
V2_1 = (2, 1)
V2_2 = (2, 2)

#: Bytes read from the end of a file in the first request (footer + usual metadata).
TAIL_PREFETCH = 64 * 1024


def normalize_version(major: int, minor: int, where: str) -> tuple[int, int]:
    """Map a footer version pair to the logical file version ``(2, x)``.

    Raises:
        UnsupportedVersionError: for legacy v1 files (0.2) and unknown versions.
    """
    if (major, minor) in ((0, 3), (2, 0)):
        return V2_0
    if (major, minor) in (V2_1, V2_2):
        return (major, minor)
    if (major, minor) in LEGACY_VERSIONS:
        raise UnsupportedVersionError(
            f"{where}: legacy (v1) Lance file version {major}.{minor} has no 2.x equivalent"
        )
    raise UnsupportedVersionError(f"{where}: unsupported Lance file version {major}.{minor}")


def parse_version_string(version: str | None) -> tuple[int, int]:
    """Turn a writer ``version`` argument (``"2.0"``, ``"stable"`` ...) into ``(major, minor)``."""
    text = "2.0" if version is None else str(version).strip().lower()
    table = {"2.0": V2_0, "0.3": V2_0, "2.1": V2_1, "2.2": V2_2, "stable": V2_2, "legacy": (0, 2), "0.1": (0, 2)}
    if text not in table:
        raise UnsupportedVersionError(f"unsupported Lance file version for writing: {version!r}")
    return table[text]


def footer_version(version: tuple[int, int]) -> tuple[int, int]:
    """Version pair written in the footer (2.0 files say 0.3, as the real writer does)."""
    return (0, 3) if version == V2_0 else version


def has_dictionary(typ: pa.DataType) -> bool:
    """Whether ``typ`` is or contains a dictionary type."""
    if pa.types.is_dictionary(typ):
        return True
    return any(has_dictionary(typ.field(i).type) for i in range(typ.num_fields))


# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageInfo:
    """One page of a column.

    Attributes:
        buffer_offsets: Absolute file offsets of the page buffers.
        buffer_sizes: Unpadded sizes of the page buffers.
        length: Rows (items) in the page.
        priority: First top-level row of the page.
        type_url: ``Any.type_url`` of the page encoding.
        encoding: Serialized encoding message (``Any.value``).
    """

    buffer_offsets: tuple[int, ...]
    buffer_sizes: tuple[int, ...]
    length: int
    priority: int
    type_url: str
    encoding: bytes


@dataclass(frozen=True)
class ColumnInfo:
    """Metadata of one column: its pages and column-level buffers."""

    index: int
    pages: tuple[PageInfo, ...]
    buffer_offsets: tuple[int, ...]
    buffer_sizes: tuple[int, ...]
    encoding_type_url: str
    encoding: bytes


@dataclass
class FileMetadata:
    """Everything the tail of a 2.x file says.

    Attributes:
        path: File URI (used in error messages).
        file_size: Size in bytes.
        footer_version: ``(major, minor)`` exactly as in the footer.
        version: Logical version, ``(2, 0)``, ``(2, 1)`` or ``(2, 2)``.
        num_rows: Row count from the FileDescriptor.
        schema_fields: ``lance.file.Field`` protobufs of the file schema, pre-order.
        schema_metadata: Schema-level metadata.
        columns: Column metadata, by column index.
        global_buffers: ``(position, size)`` of every global buffer.
    """

    path: str
    file_size: int
    footer_version: tuple[int, int]
    version: tuple[int, int]
    num_rows: int
    schema_fields: list[Any]
    schema_metadata: dict[str, bytes]
    columns: Sequence[ColumnInfo]
    global_buffers: list[tuple[int, int]] = field(default_factory=list)
    column_meta_start: int = 0
    #: The parsed tail of a legacy (0.1/0.2) file (``lance_format.file.legacy.format.LegacyTail``).
    legacy: Any = None

    @property
    def major_version(self) -> int:
        """Footer major version (pylance's ``LanceFileMetadata.major_version``)."""
        return self.footer_version[0]

    @property
    def minor_version(self) -> int:
        """Footer minor version (0.3 for 2.0 files)."""
        return self.footer_version[1]

    @property
    def num_data_bytes(self) -> int:
        """Bytes before global buffer 0 (page and column buffers)."""
        return self.global_buffers[0][0] if self.global_buffers else 0


#: ``Any`` messages already unpacked, by their bytes. Pages of one column carry the same layout in
#: file after file (a dataset's files share a schema and mostly a row count), so parsing and
#: checking each again is wasted work. Only small messages are kept, at most this many.
_ANY_CACHE: dict[bytes, tuple[str, bytes]] = {}
_ANY_CACHE_ENTRIES = 2048
_ANY_CACHE_MAX_BYTES = 512


def _unpack_any(raw: bytes, where: str, page: int | None = None) -> tuple[str, bytes]:
    """``(type_url, value)`` of a serialized ``Any``; ``where`` (and ``page``) name it in errors."""
    hit = _ANY_CACHE.get(raw)
    if hit is not None:
        return hit
    if page is not None:
        where = f"{where} page {page}"
    msg = any_pb2.Any()
    try:
        msg.ParseFromString(raw)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: cannot decode encoding Any message: {exc}") from exc
    if not discard_if_known(msg):  # rare: look again with the unknown fields kept
        again = any_pb2.Any()
        again.ParseFromString(raw)
        check_wire_types(again, where)
    out = (msg.type_url, msg.value)
    if len(raw) <= _ANY_CACHE_MAX_BYTES:
        if len(_ANY_CACHE) >= _ANY_CACHE_ENTRIES:
            _ANY_CACHE.clear()  # a crude bound; refilling costs one parse per distinct layout
        _ANY_CACHE[raw] = out
    return out


def _direct_encoding(enc: Any, where: str) -> tuple[str, bytes]:
    kind = enc.WhichOneof("location")
    if kind != "direct":
        raise UnsupportedEncodingError(f"{where}: encoding location {kind!r} is not supported (only direct)")
    return _unpack_any(enc.direct.encoding, where)


def _check(path: str, file_size: int, start: int, length: int, what: str) -> None:
    if start < 0 or length < 0 or start + length > file_size:
        raise CorruptFileError(
            f"{path}: {what} [{start}, {start + length}) lies outside the file ({file_size} bytes)"
        )


def parse_column_metadata(raw: Buf, ci: int, path: str, file_size: int) -> ColumnInfo:
    """Decode and validate the ``ColumnMetadata`` protobuf of column ``ci``.

    Raises:
        CorruptFileError: undecodable protobuf or buffers outside the file.
        UnsupportedEncodingError: an encoding not stored directly.
    """
    cm = file2_pb2.ColumnMetadata()
    where = f"{path}: column {ci}"
    data = bytes(raw)
    try:
        cm.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: cannot decode column metadata: {exc}") from exc
    check_varints(file2_pb2.ColumnMetadata, data, f"{where}: column metadata")
    # prost refuses a known field with the wrong wire type; the Python parser would file it as
    # unknown and carry on (a page's buffer reference lost, say): refuse it as pylance does.
    # ``cm`` is ours and never serialized again, so it may drop its unknown fields to find out
    # cheaply whether it had any; only then is the whole tree walked, on a fresh parse
    if not discard_if_known(cm):
        again = file2_pb2.ColumnMetadata()
        again.ParseFromString(data)
        check_wire_types(again, f"{where}: column metadata")
    if cm.HasField("encoding"):
        ctype, cenc = _direct_encoding(cm.encoding, where)
        if ctype != COLUMN_ENCODING_URL:  # pylance refuses the column too ("unexpected type URL")
            raise CorruptFileError(f"{where}: column encoding has type URL {ctype!r}, "
                                   f"expected {COLUMN_ENCODING_URL!r}")
    else:
        ctype, cenc = COLUMN_ENCODING_URL, DEFAULT_COLUMN_ENCODING
    pages = []
    for pi, p in enumerate(cm.pages):
        offsets = tuple(p.buffer_offsets)
        sizes = tuple(p.buffer_sizes)
        if len(offsets) != len(sizes):
            raise CorruptFileError(
                f"{where} page {pi}: {len(offsets)} buffer offsets but {len(sizes)} sizes"
            )
        for off, sz in zip(offsets, sizes, strict=True):
            if off + sz > file_size:  # uint64 fields: never negative
                _check(path, file_size, off, sz, f"column {ci} page {pi} buffer")
        enc = p.encoding
        if enc.WhichOneof("location") == "direct":
            type_url, value = _unpack_any(enc.direct.encoding, where, pi)
        else:
            type_url, value = _direct_encoding(enc, f"{where} page {pi}")  # raises
        pages.append(PageInfo(offsets, sizes, p.length, p.priority, type_url, value))
    for off, sz in zip(cm.buffer_offsets, cm.buffer_sizes, strict=False):
        _check(path, file_size, off, sz, f"column {ci} column buffer")
    return ColumnInfo(ci, tuple(pages), tuple(cm.buffer_offsets), tuple(cm.buffer_sizes), ctype, cenc)


class ColumnList(Sequence[ColumnInfo]):
    """Column metadata by column index, each parsed on first access.

    A reader of a few columns of a wide file then decodes only their metadata; the raw bytes
    of every column are kept (they were read with the file tail anyway).

    Args:
        raw: Serialized ``ColumnMetadata`` of every column.
        path: File URI (for error messages).
        file_size: File size, to validate buffer positions.
    """

    def __init__(self, raw: Sequence[Buf], path: str, file_size: int) -> None:
        self._raw = list(raw)
        self._parsed: list[ColumnInfo | None] = [None] * len(self._raw)
        self._path = path
        self._size = file_size

    def __len__(self) -> int:
        return len(self._raw)

    def _get(self, i: int) -> ColumnInfo:
        info = self._parsed[i]
        if info is None:
            info = parse_column_metadata(self._raw[i], i, self._path, self._size)
            self._parsed[i] = info
        return info

    @overload
    def __getitem__(self, index: int) -> ColumnInfo: ...

    @overload
    def __getitem__(self, index: slice) -> list[ColumnInfo]: ...

    def __getitem__(self, index: int | slice) -> ColumnInfo | list[ColumnInfo]:
        if isinstance(index, slice):
            return [self._get(i) for i in range(*index.indices(len(self._raw)))]
        n = len(self._raw)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"column index {index} out of range ({n} columns)")
        return self._get(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ColumnList({list(self)!r})"


def read_file_metadata(source: ByteSource) -> FileMetadata:
    """Parse the footer, offset tables, FileDescriptor and column metadata of a 2.x file.

    Raises:
        CorruptFileError: truncated file, bad magic, tables outside the file, undecodable protobuf.
        UnsupportedVersionError: legacy or unknown footer version.
    """
    path = source.path
    if source.size < FOOTER_SIZE:
        raise CorruptFileError(f"{path}: file is {source.size} bytes, too small for a Lance footer")
    source.prefetch_tail(TAIL_PREFETCH)
    tail = source.read_range(source.size - FOOTER_SIZE, FOOTER_SIZE, "footer")
    cm_start, cmo_start, gbo_start, n_gb, n_cols, major, minor, magic = _FOOTER.unpack(tail)
    if magic != MAGIC:
        raise CorruptFileError(f"{path}: bad magic {magic!r} at end of file (expected b'LANC')")
    if (major, minor) in LEGACY_VERSIONS:
        return _legacy_metadata(source, (major, minor))
    version = normalize_version(major, minor, path)
    body_end = source.size - FOOTER_SIZE
    if gbo_start + 16 * n_gb > body_end:
        raise CorruptFileError(
            f"{path}: global buffer table ({n_gb} entries at {gbo_start}) runs into the footer"
        )
    if n_gb < 1:
        raise CorruptFileError(f"{path}: no global buffers (schema expected)")
    cmo_start = gbo_start - 16 * n_cols
    if cmo_start < 0 or cm_start > cmo_start:
        raise CorruptFileError(
            f"{path}: column metadata table ({n_cols} columns) does not fit before {gbo_start}"
        )
    # gb0 and the column metadata precede the tables; fetch them in one go, as the real reader does
    source.prefetch_tail(source.size - min(cm_start, cmo_start))
    # struct rather than numpy: a handful of entries, read once per file opened
    gbo = struct.unpack(f"<{2 * n_gb}Q", source.read_range(gbo_start, 16 * n_gb, "GBO table"))
    cmo = struct.unpack(f"<{2 * n_cols}Q", source.read_range(cmo_start, 16 * n_cols, "CMO table"))
    gbs = list(zip(gbo[0::2], gbo[1::2], strict=True))
    for i, (pos, size) in enumerate(gbs):
        source.check_range(pos, size, f"global buffer {i}")
    fd_pos, fd_size = gbs[0]
    source.prefetch_tail(source.size - fd_pos)
    fd = file_pb2.FileDescriptor()
    try:
        raw_fd = source.read_range(fd_pos, fd_size, "file descriptor")
        fd.ParseFromString(raw_fd)
    except DecodeError as exc:
        raise CorruptFileError(f"{path}: cannot decode the file descriptor (global buffer 0): {exc}") from exc
    check_varints(file_pb2.FileDescriptor, raw_fd, f"{path}: file descriptor")
    # the schema's fields are checked where they are decoded (schema_codec); with no unknown field
    # anywhere (the usual case, one cheap look) there is nothing misfiled to find here or there
    if has_unknown_fields(fd):
        check_wire_types(fd, f"{path}: file descriptor", skip=frozenset({"schema"}))
        check_wire_types(fd.schema, f"{path}: file descriptor", skip=frozenset({"fields"}))
    cm_lo = min(cm_start, cmo_start)
    region = source.read_range(cm_lo, cmo_start - cm_lo, "column metadata")
    raw_cols: list[Buf] = []
    for ci in range(n_cols):
        pos, size = cmo[2 * ci], cmo[2 * ci + 1]
        source.check_range(pos, size, f"metadata of column {ci}")
        if pos >= cm_lo and pos + size <= cmo_start:
            raw_cols.append(memoryview(region)[pos - cm_lo : pos - cm_lo + size])
        else:  # unusual layout: metadata outside the usual region
            raw_cols.append(source.read_range(pos, size, f"metadata of column {ci}"))
    columns = ColumnList(raw_cols, path, source.size)
    return FileMetadata(
        path=path,
        file_size=source.size,
        footer_version=(major, minor),
        version=version,
        num_rows=fd.length,
        schema_fields=list(fd.schema.fields),
        schema_metadata=dict(fd.schema.metadata),
        columns=columns,
        global_buffers=gbs,
        column_meta_start=cm_start,
    )


def _legacy_metadata(source: ByteSource, version: tuple[int, int]) -> FileMetadata:
    """Metadata of a legacy (v1) file: the parsed tail rides along as ``legacy``."""

    tail = parse_tail(lambda pos, n: bytes(source.read_range(pos, n, "legacy metadata")), source.size,
                      source.path)
    return FileMetadata(path=source.path, file_size=source.size, footer_version=version, version=version,
                        num_rows=tail.num_rows, schema_fields=[], schema_metadata={}, columns=[],
                        legacy=tail)


class FileDecoder(Protocol):
    """What reader.py expects from a per-version decoder (see module docstring)."""

    def read_range(self, start: int, stop: int) -> pa.RecordBatch:
        """Decode rows ``[start, stop)`` of the projected fields."""
        ...

    def take(self, indices: np.ndarray) -> pa.RecordBatch:
        """Decode the rows at ``indices`` (uint64, any order, repeats allowed)."""
        ...

    # A decoder may also set ``validates_strings = True``: it refuses string values that are not
    # UTF-8 itself, and the reader skips its own check of the decoded batches (``file/utf8.py``).


# -- writing ------------------------------------------------------------------------------------

#: Input bytes buffered per column before a page is written, unless the writer is told otherwise.
#: Pages hold whole runs of rows, so fewer, bigger pages mean less fixed work per page on every
#: later read (a take of scattered rows decodes a few values from each page it touches). Lance's
#: own writer cuts at 32 MiB (``MAX_PAGE_BYTES`` in ``rust/lance-file/src/writer.rs``); at 16 MiB
#: a 1,000-row take of the 10M-row benchmark table ran in 34 ms (2.0) and 45 ms (2.2), against
#: 41 and 52 ms at 8 MiB and 31 and 40 ms at 32 MiB, while writing it peaked 30-45 MiB lower than
#: at 32 MiB, which was within 1% of pylance's write memory (``benchmarks/bench_dataset.py``).
DEFAULT_PAGE_BYTES = 16 * 1024 * 1024


class ContainerWriter:
    """Writes page buffers with 64-byte alignment, then the metadata tail.

    Args:
        stream: Binary stream positioned at offset 0 (``write`` / ``close``).
        path: URI used in error messages.
        version: Logical file version being written (``file_version`` attribute).
    """

    def __init__(self, stream: BinaryIO, path: str, version: tuple[int, int] = V2_0) -> None:
        self._stream = stream
        self.path = path
        self.file_version = version
        self.position = 0

    def _write(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        if view.nbytes:
            self._stream.write(view)
            self.position += view.nbytes

    def _pad(self) -> None:
        rem = self.position % PAGE_ALIGNMENT
        if rem:
            self._write(bytes([PAD_BYTE]) * (PAGE_ALIGNMENT - rem))

    def write_buffer(self, data: Any) -> tuple[int, int]:
        """Write one buffer (bytes-like or pyarrow Buffer) and pad to 64 bytes.

        Returns:
            ``(position, size)`` with the unpadded size.
        """
        pos = self.position
        if isinstance(data, pa.Buffer):
            data = memoryview(data)
        size = memoryview(data).nbytes
        self._write(data)
        self._pad()
        return pos, size

    def finish(
        self,
        schema_fields: Sequence[Any],
        schema_metadata: dict[str, bytes],
        num_rows: int,
        columns: Sequence[Any],
        version: tuple[int, int],
        extra_global_buffers: Sequence[tuple[int, int]] = (),
    ) -> int:
        """Write global buffer 0, column metadatas, CMO/GBO tables and the footer.

        Args:
            schema_fields: ``lance.file.Field`` protobufs, pre-order.
            schema_metadata: Schema metadata.
            num_rows: Row count for the FileDescriptor.
            columns: ``lance.file.v2.ColumnMetadata`` protobufs by column index.
            version: Logical file version; 2.0 is written as 0.3 in the footer.
            extra_global_buffers: ``(position, size)`` of global buffers 1, 2, … already
                written with :meth:`write_buffer` (MAINT2, issue 9: pylance's
                ``add_global_buffer``, used by LABEL_LIST index files).

        Returns:
            The total file size.
        """
        fd = file_pb2.FileDescriptor()
        fd.schema.fields.extend(schema_fields)
        for k, v in schema_metadata.items():
            fd.schema.metadata[k] = v
        fd.length = num_rows
        gb0_pos = self.position
        gb0 = fd.SerializeToString()
        self._write(gb0)
        cm_start = self.position
        cmo = []
        for col in columns:
            raw = col.SerializeToString()
            cmo.append((self.position, len(raw)))
            self._write(raw)
        cmo_start = self.position
        self._write(np.asarray(cmo, dtype="<u8").reshape(-1).tobytes() if cmo else b"")
        gbo_start = self.position
        self._write(struct.pack("<QQ", gb0_pos, len(gb0)))
        for pos, size in extra_global_buffers:
            self._write(struct.pack("<QQ", pos, size))
        major, minor = footer_version(version)
        self._write(_FOOTER.pack(cm_start, cmo_start, gbo_start, 1 + len(extra_global_buffers), len(columns),
                                 major, minor, MAGIC))
        return self.position


def make_column_metadata(pages: Sequence[tuple[list[tuple[int, int]], int, int, str, bytes]],
                         column_encoding: bytes | None = None) -> Any:
    """Build a ``ColumnMetadata`` protobuf.

    Args:
        pages: Per page ``(buffers [(position, size)], length, priority, type_url, encoding bytes)``.
        column_encoding: Serialized 2.0 ``ColumnEncoding`` (default: plain values).
    """
    cm = file2_pb2.ColumnMetadata()
    cm.encoding.direct.encoding = any_pb2.Any(
        type_url=COLUMN_ENCODING_URL, value=DEFAULT_COLUMN_ENCODING if column_encoding is None else column_encoding
    ).SerializeToString()
    for buffers, length, priority, type_url, encoding in pages:
        p = cm.pages.add()
        p.buffer_offsets.extend(b[0] for b in buffers)
        p.buffer_sizes.extend(b[1] for b in buffers)
        p.length = length
        p.priority = priority
        p.encoding.direct.encoding = any_pb2.Any(type_url=type_url, value=encoding).SerializeToString()
    return cm
