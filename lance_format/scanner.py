"""The public scanner (pylance's ``LanceScanner``): a configured scan of one dataset version.

The streaming engine is ``lance_format.table.scan.Scan`` (projection, deletions, filters,
limit/offset, row ids) over ``lance_format.table.read.ReadContext``; this class adds the
public surface (``to_table``, ``order_by``, scalar-index use, ``explain_plan``). The names
other modules import from here are re-exported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index.scan import count_from_index, explain, scan_batches
from lance_format.scan_stats import ScanStatistics, ScanTimer, attach_callback, format_analysis
from lance_format.table.count import count_matching, counts_directly
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import (
    DEFAULT_BATCH_SIZE,
    ROW_ADDR,
    ROW_ID,
    FragmentScan,
    ReadContext,
    is_low_latency,
    take_rows,
)
from lance_format.table.scan import (
    PREFETCH_FRAGMENTS,
    Scan,
    ScanOptions,
    apply_filter,
    referenced_columns,
)

#: Rows per internal batch when only counting.
COUNT_BATCH_SIZE = 1 << 17


class LanceScanner(Scan):
    """A configured scan of one dataset version (pylance-compatible methods)."""

    #: ``include_deleted_rows=True``: deleted rows still in their files come back, with null row ids.
    _include_deleted_rows = False

    def include_deleted_rows(self) -> LanceScanner:
        """Return deleted rows too (pylance's scanner option; set by ``LanceDataset.scanner``).

        Their ``_rowid`` / ``_rowaddr`` are null and their other columns hold what the files
        store. Ordering, vector and full-text searches and computed columns do not apply.
        """
        self._include_deleted_rows = True
        return self

    @property
    def dataset_schema(self) -> pa.Schema:
        """The schema of the whole dataset version (before projection), as pylance's scanner has it."""
        return self._ctx.arrow_schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the result batch by batch (fragments in order)."""
        if self._include_deleted_rows:
            yield from with_deleted_rows(self._ctx, self._opts, self._schema)
            return
        if self._opts.order_by:
            yield from self._sorted_batches()
            return
        yield from super().to_batches()

    def _stream(self, frags: list[FragmentMetadata]) -> Iterator[pa.RecordBatch]:
        if not self._ctx.manifest.indices:  # nothing to use: skip importing the index machinery
            yield from super()._stream(frags)
            return

        yield from scan_batches(self, frags)

    def _sorted_batches(self) -> Iterator[pa.RecordBatch]:
        # Sorting needs every matching row: scan unsorted (sort keys included), sort
        # stably (ties keep scan order, as pylance), then apply offset/limit.
        opts = self._opts
        keys = [k[0] for k in opts.order_by]
        cols = list(opts.columns) + [k for k in keys if k not in opts.columns]
        inner = dataclasses.replace(opts, columns=cols, limit=None, offset=0, order_by=())
        table = LanceScanner(self._ctx, inner).to_table()
        sort_keys: list[tuple[str, str]] = []
        for i, (name, ascending, nulls_first) in enumerate(opts.order_by):
            # One null-flag key per column gives per-column null placement.
            flag = f"__null_{i}"
            table = table.append_column(flag, pc.is_null(table.column(name), nan_is_null=True))
            sort_keys += [(flag, "descending" if nulls_first else "ascending"),
                          (name, "ascending" if ascending else "descending")]
        order = pc.sort_indices(table, sort_keys=sort_keys)
        stop = None if opts.limit is None else opts.offset + opts.limit
        order = order.slice(opts.offset, None if stop is None else stop - opts.offset)
        table = table.take(order).select(self._schema.names)
        yield from table.to_batches(max_chunksize=max(1, opts.batch_size))

    def to_table(self) -> pa.Table:
        """Materialize the result."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self._schema)

    def to_reader(self) -> pa.RecordBatchReader:
        """The result as a streaming ``RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self._schema, self.to_batches())

    def explain_plan(self, verbose: bool = False) -> str:
        """Describe the scan; says ``ScalarIndexQuery`` when a scalar index answers the filter."""

        return explain(self)

    def analyze_plan(self, count_rows: bool = False) -> str:
        """Run the scan (or count its rows) and describe the plan with what it measured.

        The first line is pylance's ``AnalyzeExec``; the plan lines are :meth:`explain_plan`'s
        with the rows returned, fragments, bytes read and requests appended.
        """
        frags = self._opts.fragments if self._opts.fragments is not None else self._ctx.manifest.fragments
        timer = ScanTimer(self._ctx.store.root, len(frags))
        if count_rows:
            counted = timer.rows = self.count_rows()
        else:
            counted = 0
            for batch in self.to_batches():
                timer.rows += batch.num_rows
        return format_analysis(self.explain_plan(), timer.stop(), count_rows, counted)

    def take(self, indices: Any) -> pa.Table:
        """Not implemented in pylance either (its scanner raises ``NotImplementedError("take")``).

        Raises:
            NotSupportedError: always; use ``LanceDataset.take``.
        """
        raise NotSupportedError("take: use LanceDataset.take (pylance's scanner does not implement it either)")

    def to_pandas(self, **kwargs: Any) -> Any:
        """The result as a pandas DataFrame (``to_table().to_pandas(**kwargs)``)."""
        return self.to_table().to_pandas(**kwargs)

    def count_rows(self) -> int:
        """Number of rows the scan yields."""
        opts = self._opts
        if opts.filter is not None and opts.limit is None and not opts.offset:
            # Ordering and projection do not change a count: only the filter's columns are read.
            cols = referenced_columns(opts.filter, self._ctx.arrow_schema.names)
            frags = opts.fragments if opts.fragments is not None else list(self._ctx.manifest.fragments)
            if counts_directly(self._ctx, opts.filter, cols):
                return count_matching(self._ctx, frags, opts.filter, row_range=opts.row_range)
            if not self._include_deleted_rows and not opts.order_by:  # exact indices count without reading rows
                counted = count_from_index(self, frags)
                if counted is not None:
                    return counted
        # Batch boundaries do not change a count: large batches cut the per-batch work (the
        # filter plan, slicing) that dominates a filtered count.
        opts = self._opts if self._opts.order_by else dataclasses.replace(
            self._opts, batch_size=max(self._opts.batch_size, COUNT_BATCH_SIZE))
        return sum(b.num_rows for b in LanceScanner(self._ctx, opts).to_batches())

    def head(self, num_rows: int) -> pa.Table:
        """The first ``num_rows`` rows."""
        out: list[pa.RecordBatch] = []
        left = num_rows
        for b in self.to_batches():
            out.append(b.slice(0, left))
            left -= out[-1].num_rows
            if left <= 0:
                break
        return pa.Table.from_batches(out, schema=self._schema)


def configure_scan(scanner: Any, ctx: ReadContext, *, include_deleted_rows: bool | None = None,
                   scan_stats_callback: Callable[[ScanStatistics], Any] | None = None) -> Any:
    """Apply ``LanceDataset.scanner``'s ``include_deleted_rows`` and ``scan_stats_callback`` options.

    Raises:
        NotSupportedError: ``include_deleted_rows`` on a search or a computed projection (pylance
            cannot return deleted rows from searches either).
    """
    if include_deleted_rows:
        if not isinstance(scanner, LanceScanner) or type(scanner).to_batches is not LanceScanner.to_batches:
            raise NotSupportedError("include_deleted_rows applies to plain scans only (no search, no "
                                    "computed columns)")
        scanner.include_deleted_rows()
    if scan_stats_callback is not None:
        opts = getattr(scanner, "_opts", None)
        frags = getattr(opts, "fragments", None)
        count = len(frags) if frags is not None else len(ctx.manifest.fragments)
        attach_callback(scanner, ctx.store.root, count, scan_stats_callback)
    return scanner


def with_deleted_rows(ctx: ReadContext, opts: ScanOptions, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Every stored row of the scan, deleted ones included with null ``_rowid`` / ``_rowaddr``.

    The rows are read as if nothing were deleted (row addresses always, to find the deleted
    ones), the filter applies to all of them as pylance applies it, then offset and limit.

    Raises:
        InvalidInputError: without ``with_row_id`` (pylance refuses that too), or with ``order_by``.
    """
    if not opts.with_row_id:
        raise InvalidInputError("include_deleted_rows is set but with_row_id is false")
    if opts.order_by:
        raise InvalidInputError("include_deleted_rows cannot be combined with order_by")
    inner = dataclasses.replace(opts, with_row_address=True, limit=None, offset=0, filter_sql=None)
    to_skip, left = opts.offset, opts.limit
    for batch in _AllStoredRows(ctx, inner).to_batches():
        if left is not None and left <= 0:
            return
        if to_skip >= batch.num_rows:
            to_skip -= batch.num_rows
            continue
        batch = batch.slice(to_skip, None if left is None else left)
        to_skip = 0
        if left is not None:
            left -= batch.num_rows
        yield _null_deleted(ctx, batch, schema)


def _null_deleted(ctx: ReadContext, batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    addr = batch.column(ROW_ADDR).to_numpy(zero_copy_only=False).astype(np.uint64)
    frag_ids = (addr >> np.uint64(32)).astype(np.int64)
    offsets = (addr & np.uint64(0xFFFFFFFF)).astype(np.int64)
    deleted_mask = np.zeros(len(addr), dtype=bool)
    for fid in np.unique(frag_ids).tolist():
        frag = ctx.manifest.fragment(int(fid))
        if frag is None:
            continue
        deleted = ctx.deleted_offsets(frag).astype(np.int64)
        if deleted.size:
            here = frag_ids == fid
            pos = np.searchsorted(deleted, offsets[here]).clip(max=deleted.size - 1)
            deleted_mask[here] = deleted[pos] == offsets[here]
    if deleted_mask.any():
        for name in (ROW_ID, ROW_ADDR):
            i = batch.schema.get_field_index(name)
            values = batch.column(i).to_numpy(zero_copy_only=False)
            batch = batch.set_column(i, pa.field(name, pa.uint64()), pa.array(values, pa.uint64(), mask=deleted_mask))
    return batch.select(schema.names)


class _AllStoredRows(Scan):
    """A scan that reads deleted rows as if they were live (deletion vectors not applied)."""

    def _prepare(self, frag: FragmentMetadata, read_cols: list[str], need_ids: bool,
                 prefetch_rows: bool = False) -> Any:
        prepared = super()._prepare(frag, read_cols, need_ids, prefetch_rows)
        return dataclasses.replace(prepared, deleted=np.empty(0, dtype=np.uint32))


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PREFETCH_FRAGMENTS",
    "ROW_ADDR",
    "ROW_ID",
    "FragmentScan",
    "LanceScanner",
    "ReadContext",
    "ScanOptions",
    "ScanStatistics",
    "apply_filter",
    "configure_scan",
    "is_low_latency",
    "referenced_columns",
    "take_rows",
    "with_deleted_rows",
]
