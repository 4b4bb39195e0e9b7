"""Counting the rows a filter matches without building the filtered result.

A filtered ``count_rows`` only needs, per fragment, the columns the filter references and
the number of set bits in the predicate's mask. :func:`count_matching` decodes those
columns in large windows, evaluates the predicate on each window as a scan does
(:func:`lance_format.table.scan.filter_mask`: the compute kernels called directly for a filter
built from SQL, one Acero projection otherwise), and subtracts the deleted rows that matched,
looked up by offset in the fragment's deletion vector; no batch is filtered, sliced or
concatenated.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import arrow_array
from lance_format.sql_program import Node, program_for
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import REMOTE_FRAGMENT_THREADS, ROW_ADDR, ROW_ID, FragmentScan, ReadContext
from lance_format.table.scan import filter_mask, referenced_columns

__all__ = ["COUNT_WINDOW_ROWS", "count_matching", "counts_directly"]

#: Rows decoded and evaluated per step: large enough that per-step overhead vanishes,
#: small enough that the referenced columns of one window stay far below memory limits.
COUNT_WINDOW_ROWS = 1 << 20


def counts_directly(ctx: ReadContext, expr: pc.Expression, columns: Sequence[str]) -> bool:
    """Whether :func:`count_matching` answers this filter exactly like a scan would.

    Not when the filter needs row ids or addresses (computed by the scan) or when a
    scalar index covers a referenced column: the index must answer that part, as the
    scan does (``lance_format.index.scan``).
    """
    text = str(expr)
    if ROW_ID in text or ROW_ADDR in text:
        return False
    indexed = {fid for meta in ctx.manifest.indices for fid in meta.fields}
    if not indexed:
        return True
    wanted = {f.id for name in columns for f in ctx.schema.field(name).flat()}
    return not (indexed & wanted)


def _true_count(mask: Any, rows: int) -> int:
    """Rows where ``mask`` is true (NULL counts as false, as a filter drops it)."""
    if isinstance(mask, pa.ChunkedArray):
        return sum(int(c.true_count) for c in mask.chunks)
    if isinstance(mask, pa.Array):
        return int(mask.true_count)
    value = mask.as_py() if isinstance(mask, pa.Scalar) else mask
    return rows if value is True else 0


def _count_fragment(ctx: ReadContext, frag: FragmentMetadata, columns: list[str], expr: pc.Expression,
                    program: Node | None, row_range: tuple[int, int] | None) -> int:
    deleted = ctx.deleted_offsets(frag)
    first, end = row_range or (0, frag.physical_rows)
    end = min(end, frag.physical_rows)
    scan = FragmentScan(ctx, frag, columns, readahead=True) if columns else None
    total = 0
    for start in range(first, end, COUNT_WINDOW_ROWS):
        stop = min(start + COUNT_WINDOW_ROWS, end)
        n = stop - start
        batch = scan.read(start, stop) if scan is not None else \
            pa.RecordBatch.from_pydict({}, schema=pa.schema([]))
        mask = filter_mask(expr, batch, program)
        hits = _true_count(mask, n)
        # bounds in the vector's own dtype: mixed dtypes would convert the whole vector per call
        lo, hi = np.searchsorted(deleted, np.array([start, stop], dtype=deleted.dtype))
        if hi > lo and hits:  # matches on deleted rows do not count
            if isinstance(mask, (pa.Array, pa.ChunkedArray)):
                gone = arrow_array(deleted[lo:hi].astype(np.int64) - start)
                hits -= _true_count(mask.take(gone), int(hi - lo))
            else:
                hits -= int(hi - lo)
        total += hits
    return total


def count_matching(ctx: ReadContext, frags: Sequence[FragmentMetadata], expr: pc.Expression,
                   *, row_range: tuple[int, int] | None = None) -> int:
    """Live rows of ``frags`` where ``expr`` is true (check :func:`counts_directly` first).

    Args:
        ctx: The dataset version's read context.
        frags: Fragments to count.
        expr: The filter; only the columns it references are decoded.
        row_range: Physical rows ``[start, stop)`` of each fragment (``None``: all).

    Raises:
        InvalidInputError: if the expression cannot be evaluated on the data.
    """
    program = program_for(expr)
    columns = referenced_columns(expr, ctx.arrow_schema.names)
    if not columns and program is None:
        # A filter on no column (a constant): evaluate it on one real column for the row count.
        columns = ctx.arrow_schema.names[:1]
    live = [f for f in frags if f.num_rows > 0]
    if ctx.low_latency or len(live) < 2:
        # One fragment after the other: counting fragments on two threads measured slower (3
        # fragments of 1M rows on 2 cores: 22 ms wall and 18 ms CPU, against 13 and 13 on one
        # thread), so the Python parts of decoding do not overlap well enough to pay for it.
        return sum(_count_fragment(ctx, f, columns, expr, program, row_range) for f in live)
    # Object stores: the fragments' requests wait side by side (one window of the filter's
    # columns per thread in memory).
    with ThreadPoolExecutor(max_workers=min(REMOTE_FRAGMENT_THREADS, len(live))) as pool:
        return sum(pool.map(lambda f: _count_fragment(ctx, f, columns, expr, program, row_range), live))
