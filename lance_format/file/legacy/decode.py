"""Decoding legacy (v1) pages into Arrow arrays.

Each field has one page per batch (``format.Page``). What a page holds depends only on the Arrow
type, as upstream's ``rust/lance-file/src/previous/reader.rs`` and ``rust/lance-io/src/encodings/``
read it:

* fixed-width values (numbers, booleans as bits, fixed-size lists and binaries): the values,
  back to back, with no validity — a null was written as a zero value;
* strings and binaries: the bytes, then ``length + 1`` absolute ``i64`` positions (the page points
  at the positions); an empty value reads as null when the field is nullable;
* lists: ``length + 1`` ``i32`` (``i64`` for large lists) offsets relative to the batch's item page;
* structs: an empty page; the children carry the data (no struct validity);
* null columns: no bytes, only a length;
* dictionaries: the keys as fixed-width values; the values live elsewhere in the file.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.file.legacy.format import LegacyTail, Page
from lance_format.schema import LanceField

ReadFn = Callable[[int, int], bytes]


def _fixed_width_bits(typ: pa.DataType) -> int | None:
    """Bits per value of a type stored as plain values, or ``None``."""
    if pa.types.is_boolean(typ):
        return 1
    if pa.types.is_fixed_size_list(typ):
        inner = _fixed_width_bits(typ.value_type)
        return None if inner is None else inner * typ.list_size
    if pa.types.is_fixed_size_binary(typ) or pa.types.is_decimal(typ):
        return int(typ.byte_width) * 8
    if pa.types.is_primitive(typ) and not pa.types.is_dictionary(typ):
        return int(typ.bit_width)
    return None


def _plain(read: ReadFn, typ: pa.DataType, page: Page, start: int, stop: int, where: str) -> pa.Array:
    n = stop - start
    if stop > page.length:
        raise CorruptFileError(f"{where}: rows [{start}, {stop}) past the page's {page.length} values")
    if pa.types.is_fixed_size_list(typ):
        size = typ.list_size
        inner = _plain(read, typ.value_type, Page(page.position, page.length * size), start * size,
                       stop * size, where)
        return pa.FixedSizeListArray.from_arrays(inner, type=typ)
    bits = _fixed_width_bits(typ)
    assert bits is not None
    if bits == 1:
        lo, hi = start // 8, (stop + 7) // 8
        data = read(page.position + lo, hi - lo)
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)], offset=start % 8)
    width = bits // 8
    data = read(page.position + start * width, n * width)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)])


def _nest_fixed_size(flat: pa.Array, typ: pa.DataType) -> pa.Array:
    """Wrap flat leaf values back into (possibly nested) fixed-size lists of ``typ``."""
    if not pa.types.is_fixed_size_list(typ):
        return flat
    inner = _nest_fixed_size(flat, typ.value_type)
    return pa.FixedSizeListArray.from_arrays(inner, type=typ)


def _fixed_array(buf: pa.Buffer, typ: pa.DataType, n: int, width: int) -> pa.Array:
    """``n`` values of byte-aligned fixed-width ``typ`` (``width`` bytes each) stored back to back in ``buf``.

    Fixed-size lists are built over their leaf values, as the legacy format stores them.
    """
    if pa.types.is_fixed_size_list(typ):
        leaf = typ
        while pa.types.is_fixed_size_list(leaf):
            leaf = leaf.value_type
        flat = pa.Array.from_buffers(leaf, n * width * 8 // leaf.bit_width, [None, buf])
        return _nest_fixed_size(flat, typ)
    return pa.Array.from_buffers(typ, n, [None, buf])


def _positions(read: ReadFn, page: Page, start: int, stop: int, dtype: str,
               where: str) -> npt.NDArray[np.int64]:
    width = np.dtype(dtype).itemsize
    if stop + 1 > page.length:
        raise CorruptFileError(f"{where}: rows [{start}, {stop}) past the page's {page.length - 1} values")
    raw = np.frombuffer(read(page.position + start * width, (stop - start + 1) * width), dtype=dtype)
    pos = raw.astype(np.int64)
    if pos.size > 1 and bool((np.diff(pos) < 0).any()):
        raise CorruptFileError(f"{where}: offsets decrease")
    return pos


def _binary(read: ReadFn, typ: pa.DataType, nullable: bool, page: Page, start: int, stop: int,
            where: str, size: int) -> pa.Array:
    # the page holds length + 1 positions; its recorded length is the value count
    pos = _positions(read, Page(page.position, page.length + 1), start, stop, "<i8", where)
    lo, hi = int(pos[0]), int(pos[-1])
    if lo < 0 or hi > size:
        raise CorruptFileError(f"{where}: value bytes [{lo}, {hi}) outside the {size}-byte file")
    data = read(lo, hi - lo) if hi > lo else b""
    return _binary_array(typ, nullable, pos - lo, data, where)


def _binary_array(typ: pa.DataType, nullable: bool, rel: npt.NDArray[np.int64], data: bytes | np.ndarray,
                  where: str, *, check_utf8: bool = True) -> pa.Array:
    """A string/binary array from offsets relative to ``data``; empty values are null if nullable.

    ``check_utf8=False`` is for callers whose reader validates strings itself (``LanceFileReader``
    checks every decoded chunk, see ``lance_format/file/utf8.py``): the same bytes once, not twice.
    """
    large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    if not large and int(rel[-1]) > np.iinfo(np.int32).max:  # too much for 32-bit offsets
        typ = pa.large_string() if pa.types.is_string(typ) else pa.large_binary()
        large = True
    validity = None
    if nullable:
        empty = rel[1:] == rel[:-1]
        if bool(empty.any()):
            validity = pa.array(~empty).buffers()[1]
    offsets = rel.astype(np.int64 if large else np.int32)
    arr = pa.Array.from_buffers(typ, rel.size - 1, [validity, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])
    if check_utf8 and (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise CorruptFileError(f"{where}: invalid UTF-8 in a string page") from exc
    return arr


class LegacyColumnReader:
    """Reads one top-level field of a legacy file, batch by batch.

    Args:
        tail: Parsed file tail.
        read: ``read(position, length)`` over the file.
        size: File size in bytes (bounds every read).
        path: File URI for errors.
    """

    def __init__(self, tail: LegacyTail, read: ReadFn, size: int, path: str) -> None:
        self.tail = tail
        self.read = read
        self.size = size
        self.path = path
        self._dicts: dict[int, pa.Array] = {}

    def _page(self, field: LanceField, batch: int) -> Page:
        pages = self.tail.page_table.get(field.id)
        if pages is None or batch >= len(pages):
            raise CorruptFileError(f"{self.path}: no page for field {field.name!r} (id {field.id}) batch {batch}")
        return pages[batch]

    def _dictionary(self, field: LanceField, value_type: pa.DataType) -> pa.Array:
        cached = self._dicts.get(field.id)
        if cached is not None:
            return cached
        info = self.tail.dictionaries.get(field.id)
        if info is None:
            raise CorruptFileError(f"{self.path}: dictionary field {field.name!r} has no dictionary values")
        pos, length = info
        where = f"{self.path}: dictionary of {field.name!r}"
        if _fixed_width_bits(value_type) is not None:
            values = _plain(self.read, value_type, Page(pos, length), 0, length, where)
        elif pa.types.is_string(value_type) or pa.types.is_binary(value_type) or \
                pa.types.is_large_string(value_type) or pa.types.is_large_binary(value_type):
            values = _binary(self.read, value_type, True, Page(pos, length), 0, length, where, self.size)
        else:
            raise NotSupportedError(f"{where}: dictionary values of type {value_type}")
        self._dicts[field.id] = values
        return values

    def read_batches(self, field: LanceField, typ: pa.DataType, pieces: list[tuple[int, int, int]]) -> pa.Array:
        """Rows of several batches (``(batch, start, stop)`` pieces), as one array.

        Byte-aligned values and strings are gathered from every batch's page and built once
        (a scan touches hundreds of 1,024-row batches); other types are read batch by batch.
        """
        bits = _fixed_width_bits(typ)
        if len(pieces) > 1 and bits is not None and bits % 8 == 0 and not pa.types.is_dictionary(typ):
            width = bits // 8
            chunks = []
            for batch, start, stop in pieces:
                page = self._page(field, batch)
                if stop > page.length:
                    raise CorruptFileError(f"{self.path}: field {field.name!r} batch {batch}: rows "
                                           f"[{start}, {stop}) past the page's {page.length} values")
                chunks.append(self.read(page.position + start * width, (stop - start) * width))
            n = sum(stop - start for _, start, stop in pieces)
            return _fixed_array(pa.py_buffer(b"".join(chunks)), typ, n, width)
        if len(pieces) > 1 and (pa.types.is_string(typ) or pa.types.is_binary(typ)
                                or pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)):
            return self._binary_batches(field, typ, pieces)
        parts = [self.read_batch(field, typ, b, s, e) for b, s, e in pieces]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return pa.array([], type=typ)
        if pa.types.is_dictionary(typ):
            return pa.chunked_array(parts, type=typ).unify_dictionaries().combine_chunks()
        return pa.concat_arrays(parts)

    def _binary_batches(self, field: LanceField, typ: pa.DataType, pieces: list[tuple[int, int, int]]) -> pa.Array:
        offsets: list[npt.NDArray[np.int64]] = []
        datas: list[bytes] = []
        base = 0
        for batch, start, stop in pieces:
            page = self._page(field, batch)
            where = f"{self.path}: field {field.name!r} batch {batch}"
            pos = _positions(self.read, Page(page.position, page.length + 1), start, stop, "<i8", where)
            lo, hi = int(pos[0]), int(pos[-1])
            if lo < 0 or hi > self.size:
                raise CorruptFileError(f"{where}: value bytes [{lo}, {hi}) outside the {self.size}-byte file")
            datas.append(self.read(lo, hi - lo) if hi > lo else b"")
            rel = pos - lo + base
            offsets.append(rel if not offsets else rel[1:])
            base += hi - lo
        return _binary_array(typ, field.nullable, np.concatenate(offsets), b"".join(datas),
                             f"{self.path}: field {field.name!r}")

    def read_batch(self, field: LanceField, typ: pa.DataType, batch: int, start: int, stop: int) -> pa.Array:
        """Rows ``[start, stop)`` of ``batch`` (relative to the batch) of ``field``."""
        where = f"{self.path}: field {field.name!r} batch {batch}"
        n = stop - start
        if pa.types.is_struct(typ):
            children = [self.read_batch(c, typ.field(i).type, batch, start, stop)
                        for i, c in enumerate(field.children)]
            return pa.StructArray.from_arrays(children, fields=list(typ)) if children else \
                pa.array([{}] * n, type=typ)
        page = self._page(field, batch)
        if pa.types.is_null(typ):
            if stop > page.length:
                raise CorruptFileError(f"{where}: rows [{start}, {stop}) past the page's {page.length} rows")
            return pa.nulls(n)
        if pa.types.is_dictionary(typ):
            keys = _plain(self.read, typ.index_type, page, start, stop, where)
            values = self._dictionary(field, typ.value_type)
            if len(keys) and len(values) and int(pc.max(keys).as_py()) >= len(values):
                raise CorruptFileError(f"{where}: dictionary key past the {len(values)} values")
            return pa.DictionaryArray.from_arrays(keys, values)
        if _fixed_width_bits(typ) is not None:
            return _plain(self.read, typ, page, start, stop, where)
        if pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ) or \
                pa.types.is_large_binary(typ):
            return _binary(self.read, typ, field.nullable, page, start, stop, where, self.size)
        if pa.types.is_list(typ) or pa.types.is_large_list(typ):
            large = pa.types.is_large_list(typ)
            pos = _positions(self.read, page, start, stop, "<i8" if large else "<i4", where)
            child = field.children[0]
            items = self.read_batch(child, typ.value_type, batch, int(pos[0]), int(pos[-1]))
            offsets = pa.array(pos - pos[0], type=pa.int64() if large else pa.int32())
            cls = pa.LargeListArray if large else pa.ListArray
            return cls.from_arrays(offsets, items, type=typ)
        raise NotSupportedError(f"{where}: legacy files cannot hold type {typ}")
