"""Read rows of a 2.0 file: per-field readers over columns of pages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format._pb import encodings_v2_0_pb2
from lance_format.errors import CorruptFileError, InvalidInputError, UnsupportedEncodingError
from lance_format.file.container import ARRAY_ENCODING_URL, ByteSource, FileMetadata, has_dictionary
from lance_format.file.v2_0.buffers import PageCtx, Sel, bitmap, gather_ranges
from lance_format.file.v2_0.columns import (
    BLOB,
    BLOB_DESCRIPTION_V1,
    PACKED,
    PRIMITIVE,
    STRUCT,
    Node,
    build_nodes,
    storage_of,
)
from lance_format.file.v2_0.page_decode import decode_array, read_ranges_encoded
from lance_format.file.workers import num_threads, run_all
from lance_format.pbwire import check_varints, check_wire_types

T = TypeVar("T")
#: Reads of at least this many rows decode their fields in parallel.
_PARALLEL_MIN_ROWS = 16384
#: Encodings whose ``buffer`` field says where their bytes are. An absent one reads as buffer 0
#: of the page (another buffer's bytes); pylance's decoder fails on it instead.
_NEEDS_BUFFER = frozenset({"Flat", "Bitpacked", "BitpackedForNonNeg", "PackedStruct"})


def _check_buffer_refs(msg: Any, where: str) -> None:
    """Refuse an encoding tree in which an encoding that stores bytes does not say where.

    Raises:
        CorruptFileError: a ``Flat`` (or bitpacked, packed-struct) encoding without ``buffer``.
    """
    name = msg.DESCRIPTOR.name
    if name in _NEEDS_BUFFER and not msg.HasField("buffer"):
        raise CorruptFileError(f"{where}: {name} encoding without a buffer reference")
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        for item in (value,) if hasattr(value, "DESCRIPTOR") else value:  # one message, or a repeated field
            _check_buffer_refs(item, where)


class ColumnPages:
    """The pages of one column, with row starts and parsed encodings (parsed lazily)."""

    def __init__(self, meta: FileMetadata, source: ByteSource, column: int, name: str) -> None:
        if column >= len(meta.columns):
            raise CorruptFileError(
                f"{meta.path}: field {name!r} needs column {column} but the file has "
                f"{len(meta.columns)} columns"
            )
        self.meta = meta
        self.source = source
        self.info = meta.columns[column]
        self.name = name
        lengths = np.array([p.length for p in self.info.pages], dtype=np.int64)
        self.starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self.num_rows = int(self.starts[-1])
        self._encodings: dict[int, Any] = {}
        self._cache_page = -1
        self._cache: dict[Any, np.ndarray] = {}

    def where(self, page: int) -> str:
        return f"{self.meta.path}: column {self.info.index} (field {self.name!r}) page {page}"

    def encoding(self, page: int) -> Any:
        enc = self._encodings.get(page)
        if enc is None:
            p = self.info.pages[page]
            if p.type_url != ARRAY_ENCODING_URL:
                raise UnsupportedEncodingError(
                    f"{self.where(page)}: page encoding {p.type_url!r} in a 2.0 file"
                )
            enc = encodings_v2_0_pb2.ArrayEncoding()
            try:
                enc.ParseFromString(p.encoding)
                check_varints(encodings_v2_0_pb2.ArrayEncoding, p.encoding, f"{self.where(page)}: page encoding")
                # a known field with the wrong wire type: prost (pylance) refuses the page, the
                # Python parser would drop the field (a buffer reference, a compression scheme)
                check_wire_types(enc, f"{self.where(page)}: page encoding")
                _check_buffer_refs(enc, f"{self.where(page)}: page encoding")
            except CorruptFileError:
                raise
            except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError and friends
                raise CorruptFileError(f"{self.where(page)}: cannot decode page encoding: {exc}") from exc
            self._encodings[page] = enc
        return enc

    def ctx(self, page: int) -> PageCtx:
        # decompressed buffers are cached for the most recent page only (bounded memory)
        if page != self._cache_page:
            self._cache_page, self._cache = page, {}
        return PageCtx(
            self.source, self.meta, self.info, self.info.pages[page], self.where(page), self._cache
        )

    def release(self) -> None:
        """Drop the decompressed buffers kept for the most recent page."""
        self._cache_page, self._cache = -1, {}

    def check_rows(self, stop: int) -> None:
        if stop > self.num_rows:
            raise CorruptFileError(
                f"{self.meta.path}: column {self.info.index} (field {self.name!r}) has "
                f"{self.num_rows} rows, {stop} needed"
            )

    def map_range(self, start: int, stop: int, fn: Callable[[int, Any, PageCtx, Sel], T]) -> list[T]:
        """Apply ``fn(page, encoding, ctx, sel)`` to every page overlapping ``[start, stop)``."""
        self.check_rows(stop)
        if stop <= start:
            return []
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        out = []
        page = first
        while page < len(self.info.pages) and self.starts[page] < stop:
            ps, pe = int(self.starts[page]), int(self.starts[page + 1])
            if pe > ps:
                sel = Sel(max(start, ps) - ps, min(stop, pe) - ps)
                out.append(fn(page, self.encoding(page), self.ctx(page), sel))
            page += 1
        return out

    def map_rows(self, rows: np.ndarray, fn: Callable[[int, Any, PageCtx, Sel], T]) -> list[T]:
        """Apply ``fn`` per page to the sorted unique ``rows`` falling in that page."""
        if rows.size == 0:
            return []
        self.check_rows(int(rows[-1]) + 1)
        page_of = np.searchsorted(self.starts, rows, side="right") - 1
        bounds = np.flatnonzero(np.diff(page_of)) + 1
        out = []
        for chunk in np.split(np.arange(rows.size), bounds):
            page = int(page_of[chunk[0]])
            local = rows[chunk] - self.starts[page]
            out.append(fn(page, self.encoding(page), self.ctx(page), Sel.of_rows(local)))
        return out


def _concat(parts: list[pa.Array], typ: pa.DataType) -> pa.Array:
    if not parts:
        return pa.array([], type=typ)
    if len(parts) == 1:
        return parts[0]
    if pa.types.is_dictionary(typ):
        # like the real reader: append the page dictionaries and shift the keys (no unification)
        shift = 0
        keys = []
        for part in parts:
            keys.append(
                pc.add(part.indices, pa.scalar(shift, type=typ.index_type)) if shift else part.indices
            )
            shift += len(part.dictionary)
        items = pa.concat_arrays([p.dictionary for p in parts])
        return pa.DictionaryArray.from_arrays(pa.concat_arrays(keys), items)
    if has_dictionary(typ):
        if pa.types.is_struct(typ):
            children = [
                _concat([p.flatten()[i] for p in parts], typ.field(i).type) for i in range(typ.num_fields)
            ]
            return pa.StructArray.from_buffers(typ, sum(len(p) for p in parts), [None], children=children)
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            lengths = np.concatenate([np.asarray(pc.list_value_length(p).fill_null(0)) for p in parts])
            valid = np.concatenate([np.asarray(p.is_valid()) for p in parts])
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64 if pa.types.is_large_list(typ) else np.int32)
            np.cumsum(lengths, out=offsets[1:])
            values = _concat([p.flatten() for p in parts], typ.value_type)
            vbuf = None if bool(valid.all()) else bitmap(valid)
            return pa.Array.from_buffers(typ, len(lengths), [vbuf, pa.py_buffer(offsets)], children=[values])
    return pa.concat_arrays(parts)


class FieldReader:
    """Reads one field (and its children) for row spans or sorted unique rows."""

    def __init__(self, node: Node, meta: FileMetadata, source: ByteSource) -> None:
        self.node = node
        self.ext_type = node.field.type if isinstance(node.field.type, pa.BaseExtensionType) else None
        self.type = storage_of(node.field.type)
        self.pages = ColumnPages(meta, source, node.column, node.field.name)
        self._items_cache: np.ndarray | None = None
        self.children = [FieldReader(c, meta, source) for c in node.children]

    def release(self) -> None:
        """Drop the decompressed page buffers kept for the next read (metadata stays)."""
        self.pages.release()
        for child in self.children:
            child.release()

    # -- spans ------------------------------------------------------------------------------
    def read(self, start: int, stop: int) -> pa.Array:
        """Rows ``[start, stop)`` of this field."""
        return self._wrap(self._read(start, stop))

    def take(self, rows: np.ndarray) -> pa.Array:
        """Rows at sorted, unique, in-range ``rows``."""
        return self._wrap(self._take(rows))

    def _wrap(self, arr: pa.Array) -> pa.Array:
        if self.ext_type is None:
            return arr
        return pa.ExtensionArray.from_storage(self.ext_type, arr)

    def _read(self, start: int, stop: int) -> pa.Array:
        kind = self.node.kind
        if kind == BLOB:
            return self._blob_bytes(self.descriptions(start, stop))
        if kind in (PRIMITIVE, PACKED):
            parts = self.pages.map_range(
                start, stop, lambda _p, enc, ctx, sel: decode_array(enc, ctx, sel, self.type)
            )
            return _concat(parts, self.type)
        if kind == STRUCT:
            self.pages.check_rows(stop)
            return self._struct([c.read(start, stop) for c in self.children], stop - start)
        return self._list_read(start, stop)

    def _take(self, rows: np.ndarray) -> pa.Array:
        kind = self.node.kind
        if kind == BLOB:
            return self._blob_bytes(self.descriptions(None, None, rows))
        if kind in (PRIMITIVE, PACKED):
            parts = self.pages.map_rows(
                rows, lambda _p, enc, ctx, sel: decode_array(enc, ctx, sel, self.type)
            )
            return _concat(parts, self.type)
        if kind == STRUCT:
            if rows.size:
                self.pages.check_rows(int(rows[-1]) + 1)
            return self._struct([c.take(rows) for c in self.children], int(rows.size))
        return self._list_take(rows)

    # -- blobs ------------------------------------------------------------------------------
    def descriptions(self, start: int | None, stop: int | None, rows: np.ndarray | None = None) -> pa.StructArray:
        """A blob column's stored (position, size) pairs for ``[start, stop)`` or sorted unique ``rows``."""
        def fn(_p: int, enc: Any, ctx: PageCtx, sel: Sel) -> pa.Array:
            return decode_array(enc, ctx, sel, BLOB_DESCRIPTION_V1)

        parts = self.pages.map_rows(rows, fn) if rows is not None else self.pages.map_range(int(start or 0), int(stop or 0), fn)
        return _concat(parts, BLOB_DESCRIPTION_V1)

    def _blob_bytes(self, desc: pa.StructArray) -> pa.Array:
        # 2.0 writers mark a null as (position 1, size 0) and an empty value as (0, 0)
        pos = desc.field(0).to_numpy(zero_copy_only=False).astype(np.int64)
        size = desc.field(1).to_numpy(zero_copy_only=False).astype(np.int64)
        null = (size == 0) & (pos != 0)
        offsets = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=offsets[1:])
        keep = np.flatnonzero(size > 0)
        data = np.zeros(0, np.uint8)
        if len(keep):
            blob, at = self.pages.source.gather(pos[keep], size[keep], "blob")
            data = gather_ranges(blob, at, size[keep])
        validity = pa.array(~null, pa.bool_()).buffers()[1] if null.any() else None
        arr = pa.Array.from_buffers(
            pa.large_binary(), len(size), [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        return arr if pa.types.is_large_binary(self.type) else arr.cast(self.type)

    # -- helpers ----------------------------------------------------------------------------
    def _struct(self, children: list[pa.Array], n: int) -> pa.Array:
        for c in children:
            if len(c) != n:
                raise CorruptFileError(
                    f"{self.pages.meta.path}: struct field {self.node.field.name!r} children "
                    f"have different lengths"
                )
        return pa.StructArray.from_buffers(self.type, n, [None], children=children)

    def _list_page(
        self, page: int, enc: Any, ctx: PageCtx, sel: Sel
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if enc.WhichOneof("array_encoding") != "list":
            raise UnsupportedEncodingError(
                f"{ctx.where}: list field stored as {enc.WhichOneof('array_encoding')}"
            )
        lst = enc.list
        starts, ends, valid = read_ranges_encoded(
            lst.offsets, ctx, sel, int(lst.null_offset_adjustment), int(lst.num_items)
        )
        base = int(self._item_starts()[page])
        return starts + base, ends + base, valid

    def _item_starts(self) -> np.ndarray:
        cached = self._items_cache
        if cached is None:
            counts = []
            for i in range(len(self.pages.info.pages)):
                enc = self.pages.encoding(i)
                if enc.WhichOneof("array_encoding") != "list":
                    raise UnsupportedEncodingError(
                        f"{self.pages.where(i)}: list field stored as {enc.WhichOneof('array_encoding')}"
                    )
                counts.append(int(enc.list.num_items))
            cached = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(np.array(counts, dtype=np.int64), out=cached[1:])
            self._items_cache = cached
        return cached

    def _list_build(
        self, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], items: pa.Array
    ) -> pa.Array:
        lengths = np.concatenate([e - s for s, e, _ in parts]) if parts else np.empty(0, np.int64)
        valid = np.concatenate([v for _, _, v in parts]) if parts else np.empty(0, bool)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        large = pa.types.is_large_list(self.type)
        if not large and int(offsets[-1]) >= 2**31:
            raise CorruptFileError(
                f"{self.pages.meta.path}: list field {self.node.field.name!r} too large for 32-bit offsets"
            )
        off = offsets if large else offsets.astype(np.int32)
        vbuf = None if bool(valid.all()) else bitmap(valid)
        return pa.Array.from_buffers(self.type, len(lengths), [vbuf, pa.py_buffer(off)], children=[items])

    def _list_read(self, start: int, stop: int) -> pa.Array:
        parts = self.pages.map_range(start, stop, self._list_page)
        child = self.children[0]
        if len(parts) > 1 and has_dictionary(child.type):
            # the real reader decodes items per offsets page; its dictionaries concatenate without merging
            pieces = [child.read(int(s[0]), int(e[-1])) if len(s) else child.read(0, 0) for s, e, _ in parts]
            return self._list_build(parts, _concat(pieces, child.type))
        if parts and any(len(p[0]) for p in parts):
            lo = int(parts[0][0][0])
            hi = int(parts[-1][1][-1])
            items = self.children[0].read(lo, hi)
        else:
            items = self.children[0].read(0, 0)
        return self._list_build(parts, items)

    def _list_take(self, rows: np.ndarray) -> pa.Array:
        parts = self.pages.map_rows(rows, self._list_page)
        child = self.children[0]
        if len(parts) > 1 and has_dictionary(child.type):
            pieces = [child.take(_expand(s, e)) for s, e, _ in parts]
            return self._list_build(parts, _concat(pieces, child.type))
        if parts:
            item_rows = _expand(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        else:
            item_rows = np.empty(0, np.int64)
        return self._list_build(parts, child.take(item_rows))


def _expand(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """All positions of the ranges ``[starts[i], ends[i])``, concatenated."""
    lens = ends - starts
    total = int(lens.sum())
    out_starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=out_starts[1:])
    out: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(starts - out_starts, lens)
    return out


class FileDecoder20:
    """Decoder of 2.0 files (protocol in :mod:`lance_format.file.container`).

    Args:
        meta: Parsed container metadata.
        source: The file.
        schema: Arrow schema of the whole file.
        projection: Indices of the top-level fields to return.
    """

    def __init__(
        self, meta: FileMetadata, source: ByteSource, schema: pa.Schema, projection: Sequence[int]
    ) -> None:
        self.meta = meta
        nodes = build_nodes(schema)
        self.readers = [FieldReader(nodes[i], meta, source) for i in projection]
        self.schema = pa.schema([schema.field(i) for i in projection], metadata=schema.metadata)
        self.num_rows = meta.num_rows

    def _batch(self, arrays: list[pa.Array], n: int) -> pa.RecordBatch:
        if not arrays:
            empty = pa.StructArray.from_buffers(pa.struct([]), n, [None], children=[])
            return pa.RecordBatch.from_struct_array(empty).replace_schema_metadata(self.schema.metadata)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def read_range(self, start: int, stop: int) -> pa.RecordBatch:
        """Rows ``[start, stop)`` of the projected fields."""
        if start < 0 or stop > self.num_rows or start > stop:
            raise InvalidInputError(
                f"{self.meta.path}: row range [{start}, {stop}) outside 0..{self.num_rows}"
            )
        if len(self.readers) > 2 and stop - start >= _PARALLEL_MIN_ROWS and num_threads() > 1:
            # fields decode independently and numpy/pyarrow release the GIL in the heavy steps
            # (reads into Arrow buffers, copies, casts): decode them on the shared pool
            # (workers.run_all). One or two fields decode inline: the hand-off cost more than it
            # saved (bench_file projection)
            tasks = [partial(r.read, start, stop) for r in self.readers]
            return self._batch(run_all(tasks, "lance20-fields"), stop - start)
        return self._batch([r.read(start, stop) for r in self.readers], stop - start)

    def blob_descriptions(self, name: str, rows: np.ndarray) -> pa.StructArray:
        """Stored (position, size) of a projected blob column's values at sorted unique ``rows``."""
        return self.readers[self.schema.names.index(name)].descriptions(None, None, rows)

    def take(self, indices: np.ndarray) -> pa.RecordBatch:
        """Rows at ``indices`` (any order, repeats allowed)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            raise InvalidInputError(
                f"{self.meta.path}: row index out of range (file has {self.num_rows} rows)"
            )
        if idx.size > 1 and bool((np.diff(idx) > 0).all()):
            uniq, inverse = idx, None
        else:
            uniq, inverse = np.unique(idx, return_inverse=True)
        arrays = [r.take(uniq) for r in self.readers]
        for r in self.readers:
            # a take keeps nothing decoded: a reader kept open for takes (indexed queries in a
            # long-lived process) then holds only the file's metadata
            r.release()
        if inverse is not None and not (len(uniq) == len(idx) and bool((uniq == idx).all())):
            take = pa.array(inverse.reshape(-1))
            arrays = [a.take(take) for a in arrays]
        return self._batch(arrays, int(idx.size))
