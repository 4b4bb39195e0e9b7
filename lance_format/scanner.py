"""The public scanner (pylance's ``LanceScanner``): a configured scan of one dataset version.

The streaming engine is ``lance_format.table.scan.Scan`` (projection, deletions, filters,
limit/offset, row ids) over ``lance_format.table.read.ReadContext``; this class adds the
public surface (``to_table``, ``order_by``, scalar-index use, ``explain_plan``). The names
other modules import from here are re-exported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.scan import explain, scan_batches
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

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the result batch by batch (fragments in order)."""
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

    def count_rows(self) -> int:
        """Number of rows the scan yields."""
        opts = self._opts
        if opts.filter is not None and opts.limit is None and not opts.offset:
            # Ordering and projection do not change a count: only the filter's columns are read.
            cols = referenced_columns(opts.filter, self._ctx.arrow_schema.names)
            if counts_directly(self._ctx, opts.filter, cols):
                frags = opts.fragments if opts.fragments is not None else list(self._ctx.manifest.fragments)
                return count_matching(self._ctx, frags, opts.filter, row_range=opts.row_range)
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


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PREFETCH_FRAGMENTS",
    "ROW_ADDR",
    "ROW_ID",
    "FragmentScan",
    "LanceScanner",
    "ReadContext",
    "ScanOptions",
    "apply_filter",
    "is_low_latency",
    "referenced_columns",
    "take_rows",
]
