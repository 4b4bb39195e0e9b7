"""Write fields of record batches into 2.0 columns, flushing a page per ~``max_page_bytes``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format._pb import encodings_v2_0_pb2 as pb
from lance_format.errors import InvalidInputError, UnsupportedTypeError
from lance_format.file.container import (
    ARRAY_ENCODING_URL,
    DEFAULT_PAGE_BYTES,
    ContainerWriter,
    make_column_metadata,
)
from lance_format.file.v2_0.columns import BLOB, LIST, PACKED, STRUCT, Node, build_nodes, count_columns
from lance_format.file.v2_0.page_encode import PageBuffers, encode_array, field_compression, list_offsets

Page = tuple[list[tuple[int, int]], int, int, str, bytes]


class _FieldEncoder:
    """Buffers one field's arrays and writes pages for it (and its children)."""

    def __init__(self, node: Node, writer: ContainerWriter, page_bytes: int, path: str) -> None:
        self.node = node
        self.writer = writer
        self.page_bytes = page_bytes
        self.path = path
        self.compression = field_compression(node.field.metadata)
        self.pages: list[Page] = []
        self.pending: list[pa.Array] = []
        self.pending_bytes = 0
        self.rows = 0
        self.children = [
            _FieldEncoder(c, writer, page_bytes, f"{path}.{c.field.name}") for c in node.children
        ]

    def _write_page(self, encoding: Any, buffers: list[Any], length: int) -> None:
        locs = [self.writer.write_buffer(b) for b in buffers]
        self.pages.append((locs, length, 0, ARRAY_ENCODING_URL, encoding.SerializeToString()))

    def append(self, arr: pa.Array) -> None:
        """Add one array of this field's values (any length, possibly sliced)."""
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        n = len(arr)
        self.rows += n
        kind = self.node.kind
        if kind == STRUCT:
            if arr.null_count:
                raise InvalidInputError(
                    f"the struct field {self.path!r} contains {arr.null_count} null value(s), but Lance file "
                    "version 2.0 does not encode struct validity; use file version 2.1 or later"
                )
            for child, values in zip(self.children, arr.flatten(), strict=False):
                child.append(values)
            return
        if n == 0:
            return
        self.pending.append(arr)
        self.pending_bytes += 8 * n if kind == LIST else arr.nbytes
        if self.pending_bytes >= self.page_bytes:
            self.flush()

    def flush(self) -> None:
        """Encode everything buffered into one or more pages."""
        if not self.pending:
            return
        arr = self.pending[0] if len(self.pending) == 1 else pa.concat_arrays(self.pending)
        pieces = max(1, -(-self.pending_bytes // self.page_bytes))
        self.pending, self.pending_bytes = [], 0
        step = -(-len(arr) // pieces)
        for start in range(0, len(arr), step):
            self._encode(arr.slice(start, step))

    def _encode(self, arr: pa.Array) -> None:
        out = PageBuffers()
        if self.node.kind == LIST:
            encoding, first, last = list_offsets(arr, out)
            self._write_page(encoding, out.buffers, len(arr))
            self.children[0].append(arr.values.slice(first, last - first))
            return
        encoding = encode_array(arr, out, packed=self.node.kind == PACKED, compression=self.compression)
        self._write_page(encoding, out.buffers, len(arr))

    def finish(self) -> None:
        """Flush remaining data of this field and its children; structs get their header page."""
        self.flush()
        for child in self.children:
            child.finish()
        if self.node.kind == STRUCT:
            enc = pb.ArrayEncoding()
            enc.struct.SetInParent()
            self.pages.append(([], self.rows, 0, ARRAY_ENCODING_URL, enc.SerializeToString()))

    def collect(self, out: list[Any]) -> None:
        """Append column metadata of this field and its descendants, in column order."""
        out.append(make_column_metadata(self.pages))
        for child in self.children:
            child.collect(out)


class FileEncoder20:
    """Encoder of 2.0 files (protocol in :mod:`lance_format.file.container`).

    Args:
        writer: The container writer.
        schema: Arrow schema of the batches.
        max_page_bytes: Buffered bytes per column that trigger a page flush (default ``DEFAULT_PAGE_BYTES``, 16 MiB).
        version: Accepted for the encoder protocol; always 2.0 here.
    """

    def __init__(
        self,
        writer: ContainerWriter,
        schema: pa.Schema,
        *,
        max_page_bytes: int | None = None,
        version: tuple[int, int] | None = None,
    ) -> None:
        self.schema = schema
        page_bytes = int(max_page_bytes or DEFAULT_PAGE_BYTES)
        if page_bytes <= 0:
            raise InvalidInputError(f"max_page_bytes must be positive, got {max_page_bytes}")
        self.nodes = build_nodes(schema)
        for node in self.nodes:
            if node.kind == BLOB:
                raise UnsupportedTypeError(
                    f"field {node.field.name!r}: writing 2.0 blob columns is not supported (use 2.1 or later)"
                )
        self.fields = [_FieldEncoder(n, writer, page_bytes, n.field.name) for n in self.nodes]
        self.num_columns = count_columns(self.nodes)

    @property
    def owning_fields(self) -> list[int]:
        """Pre-order positions (``LanceSchema.flat()``) of the fields owning columns, in column order."""
        out: list[int] = []
        pos = [0]

        def walk(node: Node, typ: pa.DataType) -> None:
            out.append(pos[0])
            pos[0] += 1
            if node.kind in (STRUCT, LIST):
                for child in node.children:
                    walk(child, child.field.type)
            else:
                pos[0] += _descendants(typ)

        for node in self.nodes:
            walk(node, node.field.type)
        return out

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Encode one batch (already matching ``schema``)."""
        for enc, column in zip(self.fields, batch.columns, strict=False):
            enc.append(column)

    def finish(self) -> list[Any]:
        """Flush all pages and return the column metadata protobufs by column index."""
        out: list[Any] = []
        for enc in self.fields:
            enc.finish()
            enc.collect(out)
        return out


def _descendants(typ: pa.DataType) -> int:
    """Lance child fields under a single-column field (a fixed-size list of structs keeps its item)."""
    if pa.types.is_fixed_size_list(typ) and pa.types.is_struct(typ.value_type):
        return 1 + _descendants(typ.value_type)
    if pa.types.is_struct(typ):
        return sum(1 + _descendants(typ.field(i).type) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return 1 + _descendants(typ.value_type)
    return 0


__all__ = ["FileEncoder20", "DEFAULT_PAGE_BYTES"]
