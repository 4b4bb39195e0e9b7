"""Reading an index's row ranges: ZONEMAP / BLOOMFILTER answers scanned without row addresses.

An index that answers in zones (:class:`~lance_format.index.row_ranges.RowRanges`) has its
ranges read as they are: each range is decoded in one piece (windows of at most
:data:`WINDOW_ROWS` rows, one batch under a limit, which may stop early), deleted rows are
dropped by a mask, and the filter is applied. The filter's own columns are read first; the
other projected columns are then read only at the rows the filter keeps (candidates of an
inexact index are mostly not matching rows). A count reads the filter's columns only.

Also here: the open fragment readers indexed scans keep between queries (:func:`take_scan`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import true_mask
from lance_format.errors import CorruptFileError
from lance_format.file.reader import _guarded
from lance_format.index.btree import arrow_ints
from lance_format.session import CacheKind
from lance_format.sql_program import program_for
from lance_format.table.read import ROW_ADDR, ROW_ID, FragmentScan
from lance_format.table.scan import filter_mask, referenced_columns, row_addresses

if TYPE_CHECKING:
    from lance_format.index.row_ranges import RowRanges
    from lance_format.table.read import ReadContext
    from lance_format.table.scan import Scan

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
#: Candidates per fragment row above which whole ranges are decoded instead of taken.
DENSE_FRACTION = 16
#: Rows of a range decoded at once (a range of many zones is read in pieces of this size).
WINDOW_ROWS = 1 << 16
#: Open fragment readers for candidate takes by (dataset URI, fragment, its data files, columns and their fields).
TAKE_SCAN: CacheKind[FragmentScan] = CacheKind("take_scan")
#: What one kept fragment scan holds (readers, chunk plans of the pages taken from), estimated.
TAKE_SCAN_BYTES = 256 * 1024
#: Each kept scan's file decoder when it can be asked for rows directly (see :func:`read_rows`), else None.
_DIRECT: weakref.WeakKeyDictionary[FragmentScan, Any] = weakref.WeakKeyDictionary()


def take_scan(ctx: ReadContext, frag: Any, columns: tuple[str, ...]) -> FragmentScan:
    """A fragment's open readers for reading candidate rows, kept in the session's index cache.

    Opening a fragment's data files (footer, column metadata) and planning the chunks of the
    pages a take touches cost ~1 ms a fragment, more than gathering a few rows; a long-lived
    process answering indexed queries reuses them, across versions sharing the files. Only scans of flat
    columns in 2.0+ files are kept: their takes decode the chunks (2.1+) or value ranges (2.0)
    holding the rows and keep no decoded pages (legacy files' takes decode and keep whole pages,
    which the estimate would miss).
    """
    # Keyed by what the readers read, not by version: the fragment's data files (names unique per
    # write, so a dataset written again at the same URI is not mistaken for the old one) and each
    # column's field id and Arrow field (a rename reuses the files). Versions that only delete or
    # append share the open readers; one set per version held ~9 descriptors each until evicted.
    fields = tuple((ctx.schema.field(c).id, ctx.arrow_schema.field(c)) for c in columns)
    key = (ctx.store.uri(""), frag.id, tuple(f.path for f in frag.files), columns, fields)
    cache = ctx.store.session.index_cache
    found = cache.get(TAKE_SCAN, key)
    if found is None:
        found = FragmentScan(ctx, frag, columns)
        flat = not any(pa.types.is_nested(ctx.arrow_schema.field(c).type) for c in columns)
        if flat and all(v >= (2, 0) for v in found.file_versions()):
            cache.put(TAKE_SCAN, key, found, TAKE_SCAN_BYTES)
    return found


def _fixed_width(typ: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_date(typ)
                or t.is_timestamp(typ) or t.is_time(typ) or t.is_duration(typ))


def read_rows(scan: FragmentScan, start: int, stop: int) -> pa.RecordBatch:
    """Rows ``[start, stop)`` of ``scan``'s columns (as :meth:`FragmentScan.read`).

    Columns of fixed-width types that one data file holds under the table's names are decoded by
    the file's decoder directly: the reader's batching layers (a generator, a table of one batch,
    its columns re-assembled) cost ~50 us a call, a tenth of decoding a zone. Strings go the
    usual way, where the reader checks their UTF-8.
    """
    if scan not in _DIRECT:
        plain = all(_fixed_width(f.type) for f in scan.target)
        _DIRECT[scan] = scan.whole_file_decoder() if plain and scan.columns else None
    dec = _DIRECT[scan]
    if dec is None:
        return scan.read(start, stop)
    batch = _guarded(scan.data_file_of(scan.columns[0]).path, dec.read_range, start, stop)
    return scan.batch_of(batch.columns)


def rows_at(scan: FragmentScan, offs: U64) -> pa.RecordBatch:
    """``scan``'s columns at sorted row offsets ``offs``: the span they cover decoded whole when
    they fill most of it, else taken row by row."""
    lo, hi = int(offs[0]), int(offs[-1]) + 1
    if offs.size * DENSE_FRACTION < hi - lo:
        return scan.take(offs)
    rows = read_rows(scan, lo, hi)
    return rows if offs.size == hi - lo else rows.take(arrow_ints(offs - np.uint64(lo)))


def split_columns(scanner: Scan, flt: str) -> tuple[list[str], list[str]]:
    """The scan's columns as ``(filter columns, other columns)`` when the filter can be checked on
    its own columns first; ``([], [])`` when not (no filter, or it reads row ids or addresses).

    Candidates of an inexact index (ZONEMAP, BLOOMFILTER) are mostly not matching rows: reading
    the other projected columns for only the rows the filter keeps spares decoding whole zones of them.
    """
    opts = scanner._opts
    if opts.filter is None or ROW_ID in flt or ROW_ADDR in flt:
        return [], []
    read = scanner._read_columns()
    used = set(referenced_columns(opts.filter, scanner._ctx.arrow_schema.names))
    first = [c for c in read if c in used]
    rest = [c for c in read if c not in used]
    return (first, rest) if first and rest else ([], [])


def _windows(starts: I64, stops: I64, size: int) -> list[tuple[int, int]]:
    """Each range ``[starts[k], stops[k])`` cut into windows of at most ``size`` rows."""
    out: list[tuple[int, int]] = []
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):  # one step per range (a zone or a run of them)
        out.extend((w, min(w + size, b)) for w in range(a, b, size))
    return out


def _fragment_ranges(ctx: ReadContext, frag: Any, ranges: RowRanges) -> tuple[I64, I64]:
    """The ranges of ``frag`` as row offsets, refused past its rows (segments check their zones on open)."""
    starts, stops = ranges.of_fragment(frag.id)
    if stops.size and int(stops[-1]) > frag.physical_rows:
        raise CorruptFileError(f"{ctx.store.uri('_indices')}: an index returned rows up to offset {int(stops[-1])} "
                               f"of fragment {frag.id}, which has {frag.physical_rows} rows")
    return starts, stops


def _live(deleted: npt.NDArray[np.uint32], a: int, b: int) -> npt.NDArray[np.bool_] | None:
    """Which rows of ``[a, b)`` are not deleted; ``None`` when none is."""
    if deleted.size == 0:
        return None
    lo, hi = np.searchsorted(deleted, np.array([a, b], dtype=deleted.dtype))
    if hi == lo:
        return None
    keep = np.ones(b - a, dtype=bool)
    keep[deleted[lo:hi].astype(np.int64) - a] = False
    return keep


class _Reader:
    """One fragment's ranges read window by window: the filter's columns, masked and filtered."""

    def __init__(self, scanner: Scan, frag: Any, ranges: RowRanges, columns: tuple[str, ...]):
        ctx, opts = scanner._ctx, scanner._opts
        self.frag = frag
        self.filter = opts.filter
        flt = str(opts.filter) if opts.filter is not None else ""
        # a filter on row ids or addresses needs those columns before it is evaluated
        self.ids_in_filter = ROW_ID in flt
        self.addr_in_filter = ROW_ADDR in flt
        self.stable = ctx.row_ids(frag) if (opts.with_row_id or self.ids_in_filter) else None
        self.program = program_for(opts.filter) if opts.filter is not None else None
        self.deleted = ctx.deleted_offsets(frag)
        self.scan = take_scan(ctx, frag, columns)
        starts, stops = _fragment_ranges(ctx, frag, ranges)
        step = max(1, opts.batch_size)
        self.windows = _windows(starts, stops, step if opts.limit is not None else max(step, WINDOW_ROWS))

    def ids(self, addr: U64) -> U64:
        """Row ids of rows at ``addr`` (addresses when the dataset has no stable row ids)."""
        if self.stable is None:
            return addr
        out: U64 = self.stable[(addr & np.uint64(0xFFFFFFFF)).astype(np.int64)]
        return out

    def window(self, a: int, b: int, counting: bool = False
               ) -> tuple[pa.RecordBatch, npt.NDArray[np.bool_] | None, int]:
        """Rows ``[a, b)``: the batch, which rows pass (``None``: all, or only counted), and how many do."""
        batch = read_rows(self.scan, a, b)
        keep = _live(self.deleted, a, b)
        if self.ids_in_filter or self.addr_in_filter:
            addr = row_addresses(self.frag.id, a, b)
            if self.ids_in_filter:
                batch = batch.append_column(ROW_ID, arrow_ints(self.ids(addr), pa.uint64()))
            if self.addr_in_filter:
                batch = batch.append_column(ROW_ADDR, arrow_ints(addr, pa.uint64()))
        if self.filter is None:
            return batch, keep, b - a if keep is None else int(keep.sum())
        mask = filter_mask(self.filter, batch, self.program)
        if isinstance(mask, (pa.Array, pa.ChunkedArray)):
            if keep is None and isinstance(mask, pa.Array) and mask.type == pa.bool_():
                n = int(mask.true_count)
                return batch, (None if n == b - a or counting else true_mask(mask)), n
            passed = true_mask(mask)  # NULL drops a row
            keep = passed if keep is None else keep & passed
        else:
            value = mask.as_py() if isinstance(mask, pa.Scalar) else mask
            if value is not True:
                return batch, np.zeros(b - a, bool), 0
        return batch, keep, b - a if keep is None else int(keep.sum())


def live_rows(ctx: ReadContext, frag: Any, ranges: RowRanges) -> int:
    """Rows of ``frag``'s ranges that are not deleted (nothing read but the deletion vector)."""
    starts, stops = _fragment_ranges(ctx, frag, ranges)
    n = int((stops - starts).sum())
    deleted = ctx.deleted_offsets(frag)
    if n and deleted.size:
        at = np.searchsorted(deleted, np.concatenate((stops, starts)).astype(deleted.dtype))
        n -= int((at[:stops.size] - at[stops.size:]).sum())
    return n


def count_ranges(scanner: Scan, frag: Any, ranges: RowRanges) -> int:
    """Rows of ``frag``'s ranges that are live and match the scan's filter (only its columns read)."""
    opts = scanner._opts
    cols = referenced_columns(opts.filter, scanner._ctx.arrow_schema.names) if opts.filter is not None else []
    cols = [c for c in cols if c not in (ROW_ID, ROW_ADDR)] or scanner._read_columns()[:1]
    reader = _Reader(scanner, frag, ranges, tuple(cols))
    return sum(reader.window(a, b, counting=True)[2] for a, b in reader.windows)


def range_batches(scanner: Scan, frag: Any, ranges: RowRanges) -> Iterator[pa.RecordBatch]:
    """The scan's batches for ``frag``'s ranges: rows live and matching, projected columns."""
    ctx, opts = scanner._ctx, scanner._opts
    flt = str(opts.filter) if opts.filter is not None else ""
    first, rest = split_columns(scanner, flt)
    if not first:
        first, rest = scanner._read_columns(), []
    reader = _Reader(scanner, frag, ranges, tuple(first))
    schema = scanner._schema  # what the scan streams (a projection derives its own columns after)
    step = max(1, opts.batch_size)
    others = take_scan(ctx, frag, tuple(rest)) if rest else None
    for a, b in reader.windows:
        batch, keep, n = reader.window(a, b)
        if n == 0:
            continue
        wanted = [c for c in batch.schema.names if c in schema.names]  # filter-only columns are not taken
        if keep is None:
            offs = np.arange(a, b, dtype=np.uint64)
        else:
            picked = np.flatnonzero(keep)
            offs = picked.astype(np.uint64) + np.uint64(a)
            batch = batch.select(wanted).take(arrow_ints(picked)) if wanted else batch.select([]).slice(0, n)
        columns = {c: batch.column(c) for c in wanted}
        if others is not None:
            more = rows_at(others, offs)
            columns.update(zip(more.schema.names, more.columns, strict=True))
        if opts.with_row_id or opts.with_row_address:
            addr = offs | (np.uint64(frag.id) << np.uint64(32))
            if opts.with_row_id:
                columns[ROW_ID] = arrow_ints(reader.ids(addr), pa.uint64())
            if opts.with_row_address:
                columns[ROW_ADDR] = arrow_ints(addr, pa.uint64())
        if schema.names:
            out = pa.RecordBatch.from_arrays([columns[c] for c in schema.names], names=schema.names)
            if not out.schema.equals(schema):
                out = out.cast(schema)
        else:  # no column asked for: the rows' count only
            out = batch.select([])
        for s in range(0, n, step):
            yield out.slice(s, step) if n > step else out
