"""pylance's file metadata classes: what ``LanceFileReader.metadata()`` / ``file_statistics()`` return.

:class:`LanceFileMetadata` holds pylance's attributes (``schema``, ``num_rows``, byte counts,
``global_buffers`` and ``columns`` of :class:`LanceBufferDescriptor` / :class:`LanceColumnMetadata`
/ :class:`LancePageMetadata`) over the parsed tail (``lance_format.file.container.FileMetadata``);
attributes pylance does not have are looked up there, so our own callers keep reading the tail
(``legacy``, ``column_meta_start`` ...). A buffer descriptor is also a ``(position, size)`` tuple.

A page's ``encoding`` is its protobuf message in the layout pylance prints (prost's ``Debug`` of
the message: fields in declaration order with oneofs last, ``Some(Variant(...))`` for a set
oneof, enum values by name); our protos carry the fields this library reads, so a message can
print fewer fields than pylance's. The raw bytes are ``encoding_bytes``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa
from google.protobuf.message import DecodeError, Message

from lance_format._pb import encodings_v2_0_pb2, encodings_v2_1_pb2
from lance_format.file.container import ARRAY_ENCODING_URL, PAGE_LAYOUT_URL, FileMetadata, PageInfo
from lance_format.rust_debug import NONE, S, T, U, some, text

__all__ = [
    "LanceBufferDescriptor",
    "LanceColumnMetadata",
    "LanceColumnStatistics",
    "LanceFileMetadata",
    "LanceFileStatistics",
    "LancePageMetadata",
    "file_statistics",
]

_MESSAGES: dict[str, type[Message]] = {
    ARRAY_ENCODING_URL: encodings_v2_0_pb2.ArrayEncoding,
    PAGE_LAYOUT_URL: encodings_v2_1_pb2.PageLayout,
}


class LanceBufferDescriptor(NamedTuple):
    """Where one buffer lies in the file."""

    position: int
    size: int


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_") if part)


def _scalar(fd: Any, value: Any) -> Any:
    if fd.type == fd.TYPE_ENUM:
        named = fd.enum_type.values_by_number.get(value)
        return U(_camel(named.name)) if named is not None else value
    if fd.type == fd.TYPE_BYTES:
        return list(value)
    if fd.type == fd.TYPE_MESSAGE:
        return _prost(value)
    return value


def _prost(msg: Message) -> S:
    """A protobuf message as prost's Debug prints it (see the module docstring)."""
    desc = msg.DESCRIPTOR
    plain: list[tuple[str, Any]] = []
    oneofs: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for fd in desc.fields:
        group = fd.containing_oneof
        if group is not None and not group.name.startswith("_"):  # a real oneof (not proto3 optional)
            if group.name in seen:
                continue
            seen.add(group.name)
            which = msg.WhichOneof(group.name)
            if which is None:
                oneofs.append((group.name, NONE))
            else:
                member = desc.fields_by_name[which]
                oneofs.append((group.name, some(T(_camel(which), [_scalar(member, getattr(msg, which))]))))
            continue
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            plain.append((fd.name, [_scalar(fd, v) for v in value]))
        elif fd.type == fd.TYPE_MESSAGE or group is not None:
            plain.append((fd.name, some(_scalar(fd, value)) if msg.HasField(fd.name) else NONE))
        else:
            plain.append((fd.name, _scalar(fd, value)))
    return S(desc.name, plain + oneofs)


def encoding_text(type_url: str, encoding: bytes) -> str:
    """A page encoding as pylance prints it (the type URL and bytes when the message is unknown)."""
    cls = _MESSAGES.get(type_url)
    if cls is None:
        return f"{type_url}: {encoding.hex()}"
    msg = cls()
    try:
        msg.ParseFromString(encoding)
    except DecodeError:
        return f"{type_url}: {encoding.hex()}"
    return text(_prost(msg))


def _buffers(offsets: tuple[int, ...], sizes: tuple[int, ...]) -> list[LanceBufferDescriptor]:
    return [LanceBufferDescriptor(int(p), int(n)) for p, n in zip(offsets, sizes, strict=True)]


class LancePageMetadata:
    """One page: its buffers and its encoding (text); other attributes are the parsed page's."""

    def __init__(self, page: PageInfo) -> None:
        self._page = page
        self.buffers = _buffers(page.buffer_offsets, page.buffer_sizes)
        self.encoding_bytes = page.encoding

    @property
    def encoding(self) -> str:
        """The page's encoding message as pylance prints it."""
        return encoding_text(self._page.type_url, self._page.encoding)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._page, name)


class LanceColumnMetadata:
    """One column: its column buffers and pages; other attributes are the parsed column's."""

    def __init__(self, column: Any) -> None:
        self._column = column
        self.column_buffers = _buffers(column.buffer_offsets, column.buffer_sizes)
        self.pages = [LancePageMetadata(p) for p in column.pages]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._column, name)


class LanceFileMetadata:
    """What a file's tail says, with pylance's attribute names (see the module docstring)."""

    def __init__(self, meta: FileMetadata, schema: pa.Schema) -> None:
        self._meta = meta
        self._schema = schema

    @property
    def schema(self) -> pa.Schema:
        """The file's Arrow schema."""
        return self._schema

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return int(self._meta.num_rows)

    @property
    def major_version(self) -> int:
        """Footer major version."""
        return self._meta.major_version

    @property
    def minor_version(self) -> int:
        """Footer minor version (0.3 for 2.0 files)."""
        return self._meta.minor_version

    @property
    def num_data_bytes(self) -> int:
        """Bytes of pages and column buffers (before global buffer 0)."""
        return self._meta.num_data_bytes

    @property
    def num_column_metadata_bytes(self) -> int:
        """Bytes of column metadata and the column offset table."""
        return _metadata_bytes(self._meta) if self._meta.legacy is None else 0

    @property
    def global_buffers(self) -> list[LanceBufferDescriptor]:
        """Every global buffer (0 is the file descriptor)."""
        return [LanceBufferDescriptor(int(p), int(n)) for p, n in self._meta.global_buffers]

    @property
    def num_global_buffer_bytes(self) -> int:
        """Bytes of all global buffers."""
        return sum(b.size for b in self.global_buffers)

    @property
    def columns(self) -> list[LanceColumnMetadata]:
        """Every column's buffers and pages (parsed on first use of each column)."""
        return [LanceColumnMetadata(c) for c in self._meta.columns]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meta, name)


def _metadata_bytes(meta: FileMetadata) -> int:
    # pylance counts from column_meta_start to the global-buffer offset table: the column metadata
    # blocks and the column-offset table (a (position, size) u64 pair per global buffer, then the
    # 40-byte footer, follow).
    gbo_start = meta.file_size - 40 - 16 * len(meta.global_buffers)
    return gbo_start - meta.column_meta_start


class LanceColumnStatistics(NamedTuple):
    """Pages and stored bytes of one column."""

    num_pages: int
    size_bytes: int

    def __repr__(self) -> str:
        return f"ColumnStatistics(num_pages={self.num_pages}, size_bytes={self.size_bytes})"


class LanceFileStatistics(NamedTuple):
    """Per-column statistics of a file (pylance's ``file_statistics()``)."""

    columns: list[LanceColumnStatistics]

    def __repr__(self) -> str:
        return f"FileStatistics(columns=[{', '.join(map(repr, self.columns))}])"


def file_statistics(meta: FileMetadata) -> LanceFileStatistics:
    """Pages and page-buffer bytes of every column (column buffers not counted, as pylance)."""
    return LanceFileStatistics([LanceColumnStatistics(len(c.pages), sum(sum(p.buffer_sizes) for p in c.pages))
                                for c in meta.columns])
