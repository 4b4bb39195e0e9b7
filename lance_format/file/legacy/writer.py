"""Writing legacy (v1) files, laid out as upstream's ``rust/lance-file/src/previous/writer/mod.rs``.

Each ``write_batch`` call becomes one on-disk batch: every field (in schema pre-order, children after
their parent) gets one page, then the footer holds the page table, the dictionary values, the
self-describing schema block and the metadata block (see :mod:`lance_format.file.legacy.format`).
The format has no validity bitmaps: null numbers are stored as the value Arrow holds under them
(zero for arrays built normally) and null strings as empty strings, exactly as pylance writes
them, so a reader sees what pylance's reader sees.
"""

from __future__ import annotations

from typing import BinaryIO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.file.legacy.decode import _fixed_width_bits
from lance_format.file.legacy.format import Page, encode_tail, footer
from lance_format.schema import LanceField, LanceSchema


def _values_bytes(arr: pa.Array) -> bytes | pa.Buffer:
    """The plain (fixed-width) bytes of ``arr``'s values, honouring its offset (zero-copy if byte-wide)."""
    typ = arr.type
    if pa.types.is_fixed_size_list(typ):
        flat = arr.values.slice(arr.offset * typ.list_size, len(arr) * typ.list_size)
        return _values_bytes(flat)
    if pa.types.is_boolean(typ):
        # nulls are written as false (``encode_boolean`` in rust/lance-io/src/encodings/plain.rs)
        filled = pc.fill_null(arr, False) if arr.null_count else arr
        bits_le: bytes = np.packbits(filled.to_numpy(zero_copy_only=False), bitorder="little").tobytes()
        return bits_le
    bits = _fixed_width_bits(typ)
    assert bits is not None
    width = bits // 8
    buf = arr.buffers()[1]
    assert buf is not None
    return buf.slice(arr.offset * width, len(arr) * width)


#: Bytes of pages gathered in memory before one write to the stream: one request per ~1,024-row
#: batch and field would cost more than the bytes do.
_FLUSH_BYTES = 4 << 20
#: How a field's pages are written (see ``LegacyFileEncoder._array``).
_Kind = Literal["struct", "list", "null", "fixed", "string"]


class LegacyFileEncoder:
    """Writes one legacy file to ``stream``.

    Args:
        stream: Binary stream positioned at the start of the new file.
        path: File URI for errors.
        lance_schema: Schema with the dataset's field ids.
        schema: Arrow schema of the batches.

    Raises:
        NotSupportedError: a type the legacy format cannot hold (maps, dictionaries with
            non-primitive values, list views...).
    """

    def __init__(self, stream: BinaryIO, path: str, lance_schema: LanceSchema, schema: pa.Schema) -> None:
        self.stream = stream
        self.path = path
        self.lance_schema = lance_schema
        self.schema = schema
        self.pos = 0
        self.pages: dict[int, list[Page]] = {}
        self.batch_offsets = [0]
        self.dictionaries: dict[int, pa.Array] = {}
        self._parts: list[bytes | pa.Buffer | np.ndarray] = []
        self._pending = 0
        # per field id, decided once: how its pages are written, and the byte width of plain
        # values (0 where bits are packed or lists nested); batches then skip the type tests
        self._kinds: dict[int, _Kind] = {}
        self._widths: dict[int, int] = {}
        for field, af in zip(lance_schema.fields, schema, strict=True):
            self._check(field, af.type)

    def _check(self, field: LanceField, typ: pa.DataType) -> None:
        if pa.types.is_struct(typ):
            self._kinds[field.id] = "struct"
            for i, child in enumerate(field.children):
                self._check(child, typ.field(i).type)
            return
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            self._kinds[field.id] = "list"
            self._check(field.children[0], typ.value_type)
            return
        if pa.types.is_dictionary(typ):
            value = typ.value_type
            # the table layer would also have to store the values in the dataset manifest
            # (``write_manifest`` in rust/lance-table/src/io/manifest.rs); we do not write that
            raise NotSupportedError(f"{self.path}: field {field.name!r}: dictionary columns ({value}) "
                                    "are not written in the legacy format; use 2.0 or later")
        bits = _fixed_width_bits(typ)
        if pa.types.is_null(typ):
            self._kinds[field.id] = "null"
            return
        if bits is not None:
            self._kinds[field.id] = "fixed"
            plain = not (pa.types.is_boolean(typ) or pa.types.is_fixed_size_list(typ))
            self._widths[field.id] = bits // 8 if plain else 0
            return
        if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ) or \
                pa.types.is_large_binary(typ):
            self._kinds[field.id] = "string"
            return
        raise NotSupportedError(f"{self.path}: field {field.name!r}: the legacy file format cannot hold {typ}")

    def _write(self, data: bytes | pa.Buffer | np.ndarray) -> int:
        start = self.pos
        size = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if size:
            self._parts.append(data)
            self.pos += size
            self._pending += size
        return start

    def _flush(self) -> None:
        if self._parts:
            self.stream.write(b"".join(self._parts))  # type: ignore[arg-type]  # buffer-protocol parts
            self._parts, self._pending = [], 0

    def _set(self, field: LanceField, page: Page) -> None:
        self.pages.setdefault(field.id, []).append(page)

    def _array(self, field: LanceField, arr: pa.Array) -> None:
        typ = arr.type
        n = len(arr)
        kind = self._kinds[field.id]
        if kind == "struct":
            if arr.null_count and not field.nullable:
                raise InvalidInputError(f"{self.path}: non-nullable field {field.name!r} holds nulls")
            for i, child in enumerate(field.children):
                self._array(child, arr.field(i))
            return
        if not field.nullable and arr.null_count:
            raise InvalidInputError(f"{self.path}: non-nullable field {field.name!r} holds nulls")
        if kind == "null":
            self._set(field, Page(self.pos, n))
        elif kind == "fixed":
            width = self._widths[field.id]
            buf = arr.buffers()[1]
            values = buf.slice(arr.offset * width, n * width) if width and buf is not None else _values_bytes(arr)
            self._set(field, Page(self._write(values), n))
        elif kind == "list":
            large = pa.types.is_large_list(typ)
            offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if large else np.int32,
                                    count=n + 1, offset=arr.offset * (8 if large else 4))
            rel = (offsets - offsets[0]).astype(np.int64 if large else np.int32)
            self._set(field, Page(self._write(rel.tobytes()), n + 1))
            items = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
            self._array(field.children[0], items)
        else:  # strings and binaries: bytes, then absolute positions
            large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
            offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if large else np.int32,
                                    count=n + 1, offset=arr.offset * (8 if large else 4)).astype(np.int64)
            data = arr.buffers()[2]
            lo, hi = int(offsets[0]), int(offsets[-1])
            start = self._write(data.slice(lo, hi - lo) if data is not None and hi > lo else b"")
            positions = offsets - lo + start
            self._set(field, Page(self._write(positions.astype("<i8")), n))

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Write ``batch`` as one on-disk batch."""
        if batch.num_rows == 0:
            return
        for field, col in zip(self.lance_schema.fields, batch.columns, strict=True):
            self._array(field, col)
        self.batch_offsets.append(self.batch_offsets[-1] + batch.num_rows)
        if self._pending >= _FLUSH_BYTES:
            self._flush()

    def finish(self) -> int:
        """Write the footer; returns the file size."""
        ids = self.lance_schema.field_ids()
        batches = len(self.batch_offsets) - 1
        lo = min(ids) if ids else 0
        rows: list[tuple[int, int]] = []
        for fid in range(lo, (max(ids) if ids else -1) + 1):
            pages = self.pages.get(fid, [])[:batches]
            rows.extend((p.position, p.length) for p in pages)
            rows.extend((0, 0) for _ in range(batches - len(pages)))  # fields without pages (none today)
        table_pos = self._write(np.array(rows, dtype="<i8").reshape(-1).tobytes())
        schema_pos = self.pos
        schema_block, _ = encode_tail(schema=self.lance_schema, batch_offsets=self.batch_offsets,
                                      page_table_position=table_pos, dictionaries={},
                                      manifest_position=schema_pos, stats=None)
        self._write(schema_block)
        _, meta_block = encode_tail(schema=self.lance_schema, batch_offsets=self.batch_offsets,
                                    page_table_position=table_pos, dictionaries={},
                                    manifest_position=schema_pos, stats=None)
        meta_pos = self._write(meta_block)
        self._write(footer(meta_pos))
        self._flush()
        return self.pos
