"""Row selections and bounds-checked access to the buffers of one 2.0 page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, UnsupportedEncodingError
from lance_format.file.container import ByteSource, ColumnInfo, FileMetadata, PageInfo


@dataclass(frozen=True)
class Sel:
    """Rows of one page to decode: a contiguous span, or sorted unique ``rows`` inside it.

    Attributes:
        start: First row (inclusive) of the span.
        stop: Last row (exclusive) of the span.
        rows: Sorted unique int64 rows, or ``None`` for every row of the span.
    """

    start: int
    stop: int
    rows: np.ndarray | None = None

    @staticmethod
    def of_rows(rows: np.ndarray) -> Sel:
        """Selection of sorted unique ``rows`` (contiguous ones collapse to a span)."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return Sel(0, 0)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if hi - lo == rows.size:
            return Sel(lo, hi)
        return Sel(lo, hi, rows)

    def __len__(self) -> int:
        return self.stop - self.start if self.rows is None else int(self.rows.size)

    def scaled(self, factor: int) -> Sel:
        """Selection of the ``factor`` consecutive items of every selected row."""
        if self.rows is None:
            return Sel(self.start * factor, self.stop * factor)
        items = (self.rows[:, None] * factor + np.arange(factor, dtype=np.int64)).reshape(-1)
        return Sel(self.start * factor, self.stop * factor, items)

    def as_rows(self) -> np.ndarray:
        """The selected rows as an int64 array."""
        if self.rows is None:
            return np.arange(self.start, self.stop, dtype=np.int64)
        return self.rows


class PageCtx:
    """Reads (parts of) the buffers a page encoding refers to, checking every bound.

    Args:
        source: The file.
        meta: File metadata (for global buffers and the path).
        column: The page's column (for column buffers).
        page: The page.
        where: Human-readable location for errors (file, column, page).
    """

    def __init__(
        self,
        source: ByteSource,
        meta: FileMetadata,
        column: ColumnInfo,
        page: PageInfo,
        where: str,
        cache: dict[Any, np.ndarray] | None = None,
    ) -> None:
        self.cache: dict[Any, np.ndarray] = {} if cache is None else cache
        self.source = source
        self.meta = meta
        self.column = column
        self.page = page
        self.where = where

    def corrupt(self, problem: str) -> CorruptFileError:
        """Build a CorruptFileError naming this page."""
        return CorruptFileError(f"{self.where}: {problem}")

    def locate(self, buf: Any) -> tuple[int, int]:
        """``(file offset, size)`` of a ``lance.encodings.Buffer`` reference."""
        idx, kind = int(buf.buffer_index), int(buf.buffer_type)
        if kind == 0:
            offs, sizes = self.page.buffer_offsets, self.page.buffer_sizes
        elif kind == 1:
            offs, sizes = self.column.buffer_offsets, self.column.buffer_sizes
        elif kind == 2:
            offs = tuple(g[0] for g in self.meta.global_buffers)
            sizes = tuple(g[1] for g in self.meta.global_buffers)
        else:
            raise UnsupportedEncodingError(f"{self.where}: unknown buffer type {kind}")
        if idx >= len(offs):
            raise self.corrupt(f"buffer index {idx} out of range ({len(offs)} buffers)")
        return int(offs[idx]), int(sizes[idx])

    def read(self, buf: Any, start: int, length: int) -> np.ndarray:
        """Bytes ``[start, start+length)`` of a buffer as a uint8 array."""
        off, size = self.locate(buf)
        if start < 0 or length < 0 or start + length > size:
            raise self.corrupt(
                f"read of bytes [{start}, {start + length}) past the end of a {size}-byte buffer"
            )
        return np.frombuffer(self.source.read_range(off + start, length, self.where), dtype=np.uint8)

    def buffer_size(self, buf: Any) -> int:
        """Size in bytes of a referenced buffer."""
        return self.locate(buf)[1]

    def gather(
        self, buf: Any, starts: np.ndarray, lengths: np.ndarray | int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Many small ranges of one buffer; see :meth:`ByteSource.gather`."""
        off, size = self.locate(buf)
        starts = np.asarray(starts, dtype=np.int64)
        lens = np.broadcast_to(np.asarray(lengths, dtype=np.int64), starts.shape)
        if starts.size and (
            int(starts.min()) < 0 or int(lens.min()) < 0 or int((starts + lens).max()) > size
        ):
            raise self.corrupt(f"offsets point past the end of a {size}-byte buffer")
        return self.source.gather(starts + off, lens, self.where)


def gather_fixed(blob: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Rows of ``width`` bytes at ``pos`` in ``blob``, concatenated (uint8)."""
    if width == 1:
        out: np.ndarray = blob[pos]
        return out
    out = blob[(pos[:, None] + np.arange(width, dtype=np.int64)).reshape(-1)]
    return out


#: Average value size from which :func:`gather_ranges` copies value by value.
_LARGE_VALUE_BYTES = 4096


def gather_ranges(blob: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """:func:`gather_var` for values that may be large (blobs).

    Large values are copied one slice each: the Python step per value is small next to its copy,
    where the vectorised gather builds an 8-byte index per output byte (10x slower on blobs).
    """
    n = len(pos)
    total = int(lengths.sum())
    if n == 0 or total < _LARGE_VALUE_BYTES * n:
        return gather_var(blob, pos, lengths)
    out = np.empty(total, np.uint8)
    at = 0
    for p, ln in zip(pos.tolist(), lengths.tolist(), strict=True):
        out[at : at + ln] = blob[p : p + ln]
        at += ln
    return out


def gather_var(blob: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Variable-length ranges ``blob[pos[i] : pos[i]+lengths[i]]``, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, np.uint8)
    out_starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=out_starts[1:])
    idx = np.arange(total, dtype=np.int64) + np.repeat(pos - out_starts, lengths)
    return blob[idx]


def bitmap(valid: np.ndarray) -> pa.Buffer:
    """Arrow (LSB-first) bitmap of a bool array."""
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def unpack_bits(data: np.ndarray, bit_offset: int, count: int) -> np.ndarray:
    """``count`` bools from an LSB-first bitmap starting at ``bit_offset``."""
    return np.unpackbits(data, bitorder="little")[bit_offset : bit_offset + count].astype(bool)


def fixed_width(typ: pa.DataType) -> int | None:
    """Byte width of a fixed-width, byte-aligned type (``None`` otherwise)."""
    if pa.types.is_boolean(typ) or pa.types.is_dictionary(typ) or pa.types.is_null(typ):
        return None
    try:
        return int(typ.byte_width)
    except ValueError:
        return None
