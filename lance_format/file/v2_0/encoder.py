"""Write fields of record batches into 2.0 columns, flushing a page per ~``max_page_bytes``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import empty_pb2

from lance_format._pb import encodings_v2_0_pb2 as pb
from lance_format.errors import InvalidInputError
from lance_format.file.container import (
    ARRAY_ENCODING_URL,
    DEFAULT_PAGE_BYTES,
    PAD_BYTE,
    ContainerWriter,
    make_column_metadata,
)
from lance_format.file.v2_0.columns import BLOB, LIST, PACKED, STRUCT, Node, build_nodes, count_columns
from lance_format.file.v2_0.page_encode import PageBuffers, encode_array, field_compression, list_offsets

Page = tuple[list[tuple[int, int]], int, int, str, bytes]


#: A blob column's encoding: ``Blob{inner: values}`` (protos/encodings_v2_0.proto).
_BLOB_COLUMN = pb.ColumnEncoding(blob=pb.Blob(inner=pb.ColumnEncoding(values=empty_pb2.Empty()))).SerializeToString()


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
        if kind == BLOB:  # the bytes go out now (as pylance's writer does), the page keeps descriptions
            arr = self._blob_descriptions(arr)
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
        encoding = encode_array(arr, out, packed=self.node.kind in (PACKED, BLOB), compression=self.compression)
        self._write_page(encoding, out.buffers, len(arr))

    def _blob_descriptions(self, arr: pa.Array) -> pa.Array:
        """Write a blob page's values ahead of it and return their (position, size) pairs.

        As pylance's 2.0 writer: each non-empty value starts on a 64-byte boundary (written here
        as one padded buffer), an empty value is (0, 0) and a null (1, 0).
        """
        arr = arr.cast(pa.large_binary())
        offs = np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)
        sizes = np.diff(offs)
        valid = np.ones(len(arr), bool) if arr.null_count == 0 else arr.is_valid().to_numpy(zero_copy_only=False)
        sizes = np.where(valid, sizes, 0)
        padded = -(-sizes // 64) * 64
        starts = np.zeros(len(arr), np.int64)
        np.cumsum(padded[:-1], out=starts[1:])
        positions = np.where(valid, 0, 1).astype(np.uint64)
        if sizes.sum():
            data = np.frombuffer(arr.buffers()[2], np.uint8)
            out = np.full(int(padded.sum()), PAD_BYTE, np.uint8)  # the gaps padded as every buffer
            keep = np.flatnonzero(sizes > 0)
            src = np.repeat(offs[keep] - np.cumsum(sizes[keep]) + sizes[keep], sizes[keep]) + np.arange(int(sizes.sum()))
            dst = np.repeat(starts[keep] - np.cumsum(sizes[keep]) + sizes[keep], sizes[keep]) + np.arange(int(sizes.sum()))
            out[dst] = data[src]
            base, _ = self.writer.write_buffer(out[: int(starts[keep[-1]] + sizes[keep[-1]])])
            positions = np.where(sizes > 0, base + starts, positions).astype(np.uint64)
        return pa.StructArray.from_arrays(
            [pa.array(positions, pa.uint64()), pa.array(sizes.astype(np.uint64), pa.uint64())], ["position", "size"]
        )

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
        out.append(make_column_metadata(self.pages, _BLOB_COLUMN if self.node.kind == BLOB else None))
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
