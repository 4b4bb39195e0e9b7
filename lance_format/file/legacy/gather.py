"""Vectorized reads of plain and string legacy pages: many ``(batch, start, stop)`` pieces at once.

A legacy file holds one page per field per ~1,024-row batch (``decode`` describes what a page
holds), so a scan or a take touches thousands of pages. Reading them one Python call at a time
cost more than the bytes did; here the byte ranges of every piece of every field are computed
with numpy and fetched with one :meth:`~lance_format.file.bytesource.ByteSource.gather` (adjacent
pages coalesce into one request, as upstream's scheduler coalesces nearby reads in
``rust/lance-io/src/scheduler.rs``), then cut back into Arrow arrays. Strings take two rounds:
their positions first, then the value bytes those positions point at.

Types other than byte-aligned fixed-width values and strings/binaries (booleans, dictionaries,
lists, structs) are left to :class:`~lance_format.file.legacy.decode.LegacyColumnReader`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import CorruptFileError
from lance_format.file.bytesource import pooled_bytes
from lance_format.file.legacy.decode import _binary_array, _fixed_array, _fixed_width_bits
from lance_format.file.legacy.format import LegacyTail
from lance_format.schema import LanceField

_POS = 8  # string pages hold little-endian i64 positions


@dataclass(frozen=True)
class Pieces:
    """Row pieces to read, one per touched batch span (take: one per row).

    Attributes:
        batch: Batch of each piece (int64).
        start: First row of each piece, relative to its batch.
        stop: End row (exclusive) of each piece, relative to its batch (``stop > start``).
    """

    batch: npt.NDArray[np.int64]
    start: npt.NDArray[np.int64]
    stop: npt.NDArray[np.int64]

    @staticmethod
    def of(pieces: Sequence[tuple[int, int, int]]) -> Pieces:
        """From ``(batch, start, stop)`` tuples."""
        arr = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
        return Pieces(arr[:, 0], arr[:, 1], arr[:, 2])


def _is_string(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
                or pa.types.is_large_binary(typ))


def vectorizable(typ: pa.DataType) -> bool:
    """Whether :func:`read_fields` reads fields of ``typ`` (byte-aligned plain values, strings)."""
    if pa.types.is_dictionary(typ):
        return False
    bits = _fixed_width_bits(typ)
    if bits is not None:
        return bits > 0 and bits % 8 == 0
    return _is_string(typ)


class _Gathered:
    """One round of ranges from several fields, fetched with one gather."""

    def __init__(self) -> None:
        self.starts: list[npt.NDArray[np.int64]] = []
        self.lens: list[npt.NDArray[np.int64]] = []

    def add(self, starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]) -> int:
        self.starts.append(starts)
        self.lens.append(lens)
        return len(self.starts) - 1

    def fetch(self, source: Any, what: str) -> list[np.ndarray]:
        """Bytes of every added range set, each concatenated in piece order."""
        if not self.starts:
            return []
        starts, lens = np.concatenate(self.starts), np.concatenate(self.lens)
        if starts.size == 0:
            return [np.empty(0, np.uint8) for _ in self.starts]
        if int(starts.min()) < 0 or int((starts + lens).max()) > source.size:  # before allocating
            raise CorruptFileError(f"{what}: pages reach outside the {source.size}-byte file")
        dest_pos = np.zeros(lens.size, dtype=np.int64)
        np.cumsum(lens[:-1], out=dest_pos[1:])
        dest = pooled_bytes(int(lens.sum()))
        # every range lands at its place in one buffer: a field's bytes are one zero-copy slice
        source.read_into(starts, lens, dest, dest_pos, what)
        out, off = [], 0
        for ln in self.lens:
            size = int(ln.sum())
            out.append(dest[off : off + size])
            off += size
        return out


def read_fields(source: Any, tail: LegacyTail, path: str, fields: Sequence[LanceField],
                types: Sequence[pa.DataType], pieces: Pieces) -> list[pa.Array]:
    """Rows of ``pieces`` of every field (each :func:`vectorizable`), one array per field.

    Strings are not checked for valid UTF-8 here: ``LanceFileReader``, the only caller, checks
    every decoded chunk.

    Raises:
        CorruptFileError: a page is missing or too short, or string positions decrease or
            point outside the file.
    """
    where = f"{path}: legacy pages"
    first = _Gathered()
    plans: list[tuple[int, int]] = []  # (round-one slot, value width or 0 for strings)
    rows = pieces.stop - pieces.start
    for field, typ in zip(fields, types, strict=True):
        table = getattr(tail.page_table, "array", None)
        pages = table(field.id) if table is not None else _rows_of(tail, field.id)
        if pages is None or (pieces.batch.size and int(pieces.batch.max()) >= len(pages)):
            raise CorruptFileError(f"{path}: no pages for field {field.name!r} (id {field.id}) in every batch")
        page_pos, page_len = pages[pieces.batch, 0], pages[pieces.batch, 1]
        if bool((pieces.stop > page_len).any()):
            raise CorruptFileError(f"{path}: field {field.name!r}: rows past the end of a page")
        bits = _fixed_width_bits(typ)
        if bits is not None:
            width = bits // 8
            plans.append((first.add(page_pos + pieces.start * width, rows * width), width))
        else:
            plans.append((first.add(page_pos + pieces.start * _POS, (rows + 1) * _POS), 0))
    got = first.fetch(source, where)

    second = _Gathered()
    strings: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], int]] = {}
    for i, (slot, width) in enumerate(plans):
        if width:
            continue
        name = fields[i].name
        allpos = got[slot].view("<i8").astype(np.int64)
        counts = rows + 1
        last = np.cumsum(counts) - 1
        lo, hi = allpos[last - rows], allpos[last]
        steps = np.diff(allpos)
        steps[last[:-1]] = 0  # piece boundaries are not steps
        if bool((steps < 0).any()) or (lo.size and (int(lo.min()) < 0 or int(hi.max()) > source.size)):
            raise CorruptFileError(f"{path}: field {name!r}: string positions decrease or leave the file")
        strings[i] = (allpos, lo, counts, second.add(lo, hi - lo))
    data = second.fetch(source, where)

    out: list[pa.Array] = []
    for i, ((slot, width), typ) in enumerate(zip(plans, types, strict=True)):
        if width:
            out.append(_fixed_array(pa.py_buffer(got[slot]), typ, int(rows.sum()), width))
            continue
        allpos, lo, counts, dslot = strings[i]
        sizes = allpos[np.cumsum(counts) - 1] - lo
        base = np.zeros(lo.size, dtype=np.int64)
        np.cumsum(sizes[:-1], out=base[1:])
        rel = allpos - np.repeat(lo - base, counts)
        keep = np.ones(rel.size, dtype=bool)
        keep[(np.cumsum(counts) - counts)[1:]] = False  # a piece's first position ends the previous one
        # offsets were checked above; UTF-8 is checked by LanceFileReader on every decoded chunk
        out.append(_binary_array(typ, fields[i].nullable, rel[keep], data[dslot],
                                 f"{path}: field {fields[i].name!r}", check_utf8=False))
    return out


def _rows_of(tail: LegacyTail, fid: int) -> np.ndarray | None:
    pages = tail.page_table.get(fid)
    return None if pages is None else np.array([(p.position, p.length) for p in pages], dtype=np.int64)


__all__ = ["Pieces", "read_fields", "vectorizable"]
