"""Reading an index's candidate rows listed one by one (BTREE, BITMAP and other kinds answering addresses).

A covered fragment is read only at its candidates: deleted ones dropped, then, when many, whole
ranges around them decoded and the candidates picked (:func:`dense_spans`), else the rows
gathered by takes. When the filter can be checked on its own columns, those are read first and
the other projected columns taken only at the rows it keeps. Every fetched row is checked against
the value the index returned it with (:meth:`~lance_format.index.scan.IndexPlan.check`).
Answers in row ranges (ZONEMAP, BLOOMFILTER) go to :mod:`lance_format.index.range_scan` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import CorruptFileError
from lance_format.index.btree import arrow_ints, truth
from lance_format.index.range_scan import DENSE_FRACTION, range_batches, rows_at, split_columns, take_scan
from lance_format.sql_program import program_for
from lance_format.table.read import ROW_ADDR, ROW_ID, FragmentScan
from lance_format.table.scan import apply_filter, filter_mask

if TYPE_CHECKING:
    from lance_format.index.scan import IndexPlan
    from lance_format.table.read import ReadContext
    from lance_format.table.scan import Scan

U64 = npt.NDArray[np.uint64]
#: Rows without a candidate that a dense read decodes through rather than starting a new range.
DENSE_GAP = 1024
#: Scattered candidate rows gathered by one take (then cut into batches).
TAKE_GROUP_ROWS = 1 << 16


def live_candidates(ctx: ReadContext, frag: Any, plan: IndexPlan) -> npt.NDArray[np.uint32]:
    """The plan's candidate offsets of ``frag`` that are not deleted (checked against its rows)."""
    offsets = plan.offsets(frag.id)
    if offsets.size == 0:  # most fragments of a selective query: no deletion vector to look up
        return offsets
    deleted = ctx.deleted_offsets(frag)
    if deleted.size and offsets.size:
        offsets = offsets[~np.isin(offsets, deleted, assume_unique=True)]
    if offsets.size and int(offsets[-1]) >= frag.physical_rows:  # segments check their own; remaps too
        raise CorruptFileError(f"{ctx.store.uri('_indices')}: an index returned row offset {int(offsets[-1])} of "
                               f"fragment {frag.id}, which has {frag.physical_rows} rows")
    return offsets


def indexed_batches(scanner: Scan, frag: Any, plan: IndexPlan) -> Iterator[pa.RecordBatch]:
    ctx, opts = scanner._ctx, scanner._opts
    if plan.ranges is not None:
        yield from range_batches(scanner, frag, plan.ranges)
        return
    offsets = live_candidates(ctx, frag, plan)
    if offsets.size == 0:
        return
    flt = str(opts.filter) if opts.filter is not None else ""
    need_ids = opts.with_row_id or ROW_ID in flt
    need_addr = opts.with_row_address or ROW_ADDR in flt
    stable = ctx.row_ids(frag) if need_ids else None
    schema = scanner._schema  # what the scan streams (a projection derives its own columns after)
    step = max(1, opts.batch_size)
    # Many candidates: decoding whole ranges and picking rows beats gathering row by row.
    dense = offsets.size * DENSE_FRACTION >= frag.physical_rows
    first_cols, other_cols = split_columns(scanner, flt)
    if first_cols:
        yield from _filter_then_take(scanner, frag, plan, offsets, dense, first_cols, other_cols, stable)
        return
    scan = take_scan(ctx, frag, tuple(scanner._read_columns()))
    for batch, offs in _candidate_batches(scan, offsets, dense, step, _take_group(scanner)):
        addr = (np.uint64(frag.id) << np.uint64(32)) | offs
        plan.check(batch, addr)
        if need_ids:
            ids = stable[offs.astype(np.int64)] if stable is not None else addr
            batch = batch.append_column(ROW_ID, arrow_ints(ids, pa.uint64()))
        if need_addr:
            batch = batch.append_column(ROW_ADDR, arrow_ints(addr, pa.uint64()))
        if opts.filter is not None:
            batch = apply_filter(batch, opts.filter)
        if batch.schema.names != schema.names:
            batch = batch.select(schema.names)
        if schema.names and not batch.schema.equals(schema):
            batch = batch.cast(schema)
        if batch.num_rows:
            yield batch


def _take_group(scanner: Scan) -> int:
    """Scattered candidates gathered by one take: TAKE_GROUP_ROWS at a time (each take reads the chunks of
    every page it touches: per batch, a 1% query read every page again), one batch under a limit (it may stop early)."""
    step = max(1, scanner._opts.batch_size)
    return step * max(1, TAKE_GROUP_ROWS // step) if scanner._opts.limit is None else step


def _candidate_batches(scan: FragmentScan, offsets: npt.NDArray[np.uint32], dense: bool, step: int,
                       group: int) -> Iterator[tuple[pa.RecordBatch, U64]]:
    """``scan``'s columns at candidate ``offsets``, batch by batch, with the offsets of each batch."""
    windows = dense_spans(offsets, step) if dense else [(s, s + step) for s in range(0, offsets.size, step)]
    taken_at, taken = -1, None
    for start, stop in windows:
        if dense:
            lo, hi = np.searchsorted(offsets, [start, stop])
            offs = offsets[lo:hi].astype(np.uint64)
            batch = scan.read(start, stop)
            if offs.size != stop - start:
                batch = batch.take(arrow_ints(offs - np.uint64(start)))
        else:
            first = start - start % group
            if first != taken_at:
                taken_at, taken = first, scan.take(offsets[first:first + group].astype(np.uint64))
            assert taken is not None
            offs = offsets[start:stop].astype(np.uint64)
            batch = taken.slice(start - first, offs.size)
        yield batch, offs


def _filter_then_take(scanner: Scan, frag: Any, plan: IndexPlan, offsets: npt.NDArray[np.uint32], dense: bool,
                      first_cols: list[str], other_cols: list[str],
                      stable: npt.NDArray[np.uint64] | None) -> Iterator[pa.RecordBatch]:
    """Candidates read as the filter's columns, filtered, then the other columns taken at the kept rows only."""
    ctx, opts = scanner._ctx, scanner._opts
    assert opts.filter is not None
    schema = scanner._schema  # what the scan streams (a projection derives its own columns after)
    step = max(1, opts.batch_size)
    group = _take_group(scanner)
    program = program_for(opts.filter)
    rest: FragmentScan | None = None
    for batch, offs in _candidate_batches(take_scan(ctx, frag, tuple(first_cols)), offsets, dense, step, group):
        addr = (np.uint64(frag.id) << np.uint64(32)) | offs
        plan.check(batch, addr)
        mask = filter_mask(opts.filter, batch, program)
        if isinstance(mask, (pa.Array, pa.ChunkedArray)):
            keep = truth(mask)  # NULL drops a row; fill_null + to_numpy would import pandas
        else:
            value = mask.as_py() if isinstance(mask, pa.Scalar) else mask
            keep = np.full(offs.size, value is True)
        if not keep.any():
            continue
        if not keep.all():
            batch, offs, addr = batch.take(arrow_ints(np.flatnonzero(keep))), offs[keep], addr[keep]
        rest = rest or take_scan(ctx, frag, tuple(other_cols))
        more = rows_at(rest, offs)  # an exact index keeps most rows of a span: decoded whole
        columns = dict(zip(batch.schema.names, batch.columns, strict=True))
        columns.update(zip(more.schema.names, more.columns, strict=True))
        if opts.with_row_id:
            ids = stable[offs.astype(np.int64)] if stable is not None else addr
            columns[ROW_ID] = arrow_ints(ids, pa.uint64())
        if opts.with_row_address:
            columns[ROW_ADDR] = arrow_ints(addr, pa.uint64())
        out = pa.RecordBatch.from_arrays([columns[n] for n in schema.names], names=schema.names)
        if not out.schema.equals(schema):
            out = out.cast(schema)
        yield out


def dense_spans(offsets: npt.NDArray[np.uint32], step: int, gap: int = DENSE_GAP) -> list[tuple[int, int]]:
    """Row ranges to decode for sorted candidate ``offsets``: each run of candidates (no hole wider than
    ``gap`` rows) as ranges of at most ``step`` rows, so rows far from every candidate are never read."""
    if offsets.size == 0:
        return []
    cut = np.flatnonzero(np.diff(offsets.astype(np.int64)) > gap) + 1
    firsts = offsets[np.concatenate(([0], cut))].astype(np.int64).tolist()
    lasts = offsets[np.append(cut - 1, offsets.size - 1)].astype(np.int64).tolist()
    out: list[tuple[int, int]] = []
    for first, last in zip(firsts, lasts, strict=True):  # one step per run of candidates
        out.extend((a, min(a + step, last + 1)) for a in range(first, last + 1, step))
    return out
