"""Streaming a scan of one dataset version: projection, deletions, filters, limit/offset, row ids.

Batches stream fragment by fragment and, inside a fragment, ``batch_size`` rows at a
time, so memory stays bounded by one batch per data file. Deleted rows are dropped by
masking row offsets against the fragment's sorted deletion vector (vectorized).
``lance_format.scanner.LanceScanner`` is the public face of :class:`Scan`.
"""

from __future__ import annotations

import collections
import itertools
import re
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import arrow_array, arrow_mask, pool_empty
from lance_format.errors import InvalidInputError
from lance_format.sql_fast import parse_simple  # neither imports sqlglot nor pyarrow.dataset
from lance_format.sql_program import Node, filter_table, program_for, project_table, remember
from lance_format.table.blobs import bytes_field, scan_field
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import DEFAULT_BATCH_SIZE, ROW_ADDR, ROW_ID, FragmentScan, ReadContext

#: Fragments whose files and deletion vectors are opened ahead of the one being read.
PREFETCH_FRAGMENTS = 4
#: Rows a SQL filter is evaluated on at once in a scan (whole batches; see ``_fragment_batches``).
EVAL_SPAN_ROWS = 1 << 17


def referenced_columns(expr: pc.Expression, names: Sequence[str]) -> list[str]:
    """Columns an expression may reference (conservative: a textual match of the name).

    Exact for a filter built from SQL (its fields are known), which also spares compiling
    one regular expression per column in a fresh process.
    """
    program = program_for(expr)
    if program is not None:
        used = program.columns()
        return [n for n in names if n in used]
    text = str(expr)
    return [n for n in names if re.search(r"(?<![\w.])" + re.escape(n) + r"(?![\w])", text)]


@dataclass
class _Prepared:
    """A fragment ready to stream: open readers and its deletion vector."""

    frag: FragmentMetadata
    scan: FragmentScan
    deleted: npt.NDArray[np.uint32]
    row_ids: npt.NDArray[np.uint64] | None


@dataclass
class ScanOptions:
    """Normalized scanner arguments."""

    columns: list[str]
    filter: pc.Expression | None = None
    limit: int | None = None
    offset: int = 0
    with_row_id: bool = False
    with_row_address: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE
    fragments: list[FragmentMetadata] | None = None
    #: ``(column, ascending, nulls_first)`` keys; the result is sorted before offset/limit.
    order_by: tuple[tuple[str, bool, bool], ...] = ()
    #: The filter as SQL text, when given so: scalar indices answer parts of it
    #: (``lance_format.index.scan``).
    filter_sql: str | None = None
    #: Physical rows ``[start, stop)`` of each fragment to read (``None``: all of them); lets a
    #: caller split a large fragment into independent ranges (Spark input partitions).
    row_range: tuple[int, int] | None = None
    #: Blob columns as pylance's scans return them (descriptors, ``lance_format.table.blobs``);
    #: False (internal rewrites, Spark) reads v1 blobs as their bytes.
    blob_descriptions: bool = False


class Scan:
    """A configured scan of one dataset version: the streaming engine under ``LanceScanner``.

    Subclasses may override :meth:`_stream` (how the remaining fragments become batches)
    and :meth:`to_batches`; the delete pipeline uses this class directly.
    """

    def __init__(self, ctx: ReadContext, options: ScanOptions):
        self._ctx = ctx
        self._opts = options
        fields = [scan_field(ctx.arrow_schema.field(c)) if options.blob_descriptions
                  else bytes_field(ctx.arrow_schema.field(c)) for c in options.columns]
        if options.with_row_id:
            fields.append(pa.field(ROW_ID, pa.uint64()))
        if options.with_row_address:
            fields.append(pa.field(ROW_ADDR, pa.uint64()))
        self._schema = pa.schema(fields, metadata=ctx.arrow_schema.metadata)

    @property
    def projected_schema(self) -> pa.Schema:
        """Schema of the batches this scanner yields."""
        return self._schema

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the result batch by batch (fragments in order)."""
        opts = self._opts
        to_skip = opts.offset
        remaining = opts.limit
        if remaining is not None and remaining <= 0:
            return
        frags = opts.fragments if opts.fragments is not None else list(self._ctx.manifest.fragments)
        first = 0
        if opts.filter is None:  # skip whole leading fragments without reading them
            while first < len(frags) and to_skip >= frags[first].num_rows:
                to_skip -= frags[first].num_rows
                first += 1
        todo = list(frags[first:])
        for batch in self._stream(todo):
            if to_skip:
                if batch.num_rows <= to_skip:
                    to_skip -= batch.num_rows
                    continue
                batch = batch.slice(to_skip)
                to_skip = 0
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            if batch.num_rows:
                yield batch
            if remaining is not None and remaining <= 0:
                return

    def _stream(self, frags: list[FragmentMetadata]) -> Iterator[pa.RecordBatch]:
        """Batches of ``frags`` in order (before offset/limit): every row, read from the files."""
        for prepared in self._prefetch(frags):
            yield from self._fragment_batches(prepared)

    def _read_columns(self) -> list[str]:
        opts = self._opts
        read_cols = list(opts.columns)
        if opts.filter is not None:
            for c in referenced_columns(opts.filter, self._ctx.arrow_schema.names):
                if c not in read_cols:
                    read_cols.append(c)
        if not read_cols and self._ctx.arrow_schema.names:
            read_cols.append(self._ctx.arrow_schema.names[0])  # carries the row count; dropped later
        return read_cols

    def _prepare(self, frag: FragmentMetadata, read_cols: list[str], need_ids: bool,
                 prefetch_rows: bool = False) -> _Prepared:
        # a scan without a limit reads every row in order: decode in large windows (not for a
        # row range: a window would decode rows past its end)
        whole = self._opts.limit is None and self._opts.row_range is None
        scan = FragmentScan(self._ctx, frag, read_cols, readahead=whole,
                            blob_descriptions=self._opts.blob_descriptions)
        scan.open()
        if prefetch_rows and whole and self._opts.filter is None and frag.physical_rows:
            # object stores: the first window of rows is fetched here too, in the background,
            # so the fragment's first request does not wait until the one before it is done
            # (one window per fragment ahead: PREFETCH_FRAGMENTS windows of memory at most)
            scan.read(0, min(max(1, self._opts.batch_size), frag.physical_rows))
        deleted = self._ctx.deleted_offsets(frag)
        return _Prepared(frag, scan, deleted, self._ctx.row_ids(frag) if need_ids else None)

    def _prefetch(self, frags: list[FragmentMetadata]) -> Iterator[_Prepared]:
        # Opening files and reading deletion vectors is per-fragment latency (one or more
        # requests each); do it for the next few fragments in the background, with the first
        # window of rows of an unfiltered scan (see _prepare), so memory stays bounded.
        read_cols = self._read_columns()
        flt = str(self._opts.filter) if self._opts.filter is not None else ""
        need_ids = self._opts.with_row_id or ROW_ID in flt
        if len(frags) <= 1 or self._ctx.low_latency:
            # Nothing to overlap on a local disk or in memory: opening is CPU work, and
            # worker threads would only contend for the GIL (measured ~1.5x slower).
            for frag in frags:
                yield self._prepare(frag, read_cols, need_ids)
            return
        pool = ThreadPoolExecutor(max_workers=PREFETCH_FRAGMENTS)
        try:
            pending: collections.deque[Future[_Prepared]] = collections.deque()
            queue = iter(frags)
            for frag in itertools.islice(queue, PREFETCH_FRAGMENTS):
                pending.append(pool.submit(self._prepare, frag, read_cols, need_ids, True))
            while pending:
                prepared = pending.popleft().result()
                nxt = next(queue, None)
                if nxt is not None:
                    pending.append(pool.submit(self._prepare, nxt, read_cols, need_ids, True))
                yield prepared
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _fragment_batches(self, prepared: _Prepared) -> Iterator[pa.RecordBatch]:
        opts = self._opts
        frag, scan, deleted, stable_ids = prepared.frag, prepared.scan, prepared.deleted, prepared.row_ids
        flt = str(opts.filter) if opts.filter is not None else ""
        need_ids = opts.with_row_id or ROW_ID in flt
        need_addr = opts.with_row_address or ROW_ADDR in flt
        step = max(1, opts.batch_size)
        names = self._schema.names
        first, end = opts.row_range or (0, frag.physical_rows)
        end = min(end, frag.physical_rows)
        # A filter built from SQL is evaluated once per span of whole batches, its mask then
        # sliced per batch: the kernels' per-call cost would otherwise dominate small batches.
        # Not when it reads row ids or addresses (those columns exist per batch only), nor
        # under a limit (the scan may stop after one batch: nothing is read ahead of it).
        program = None
        if opts.filter is not None and ROW_ID not in flt and ROW_ADDR not in flt and opts.limit is None:
            program = program_for(opts.filter)
        span = step if program is None else step * max(1, EVAL_SPAN_ROWS // step)
        for span_start in range(first, end, span):
            span_stop = min(span_start + span, end)
            whole = masks = None
            if program is not None:
                whole = scan.read(span_start, span_stop)
                masks = filter_mask(opts.filter, whole, program)
            for start in range(span_start, span_stop, step):
                stop = min(start + step, span_stop)
                keep = None
                if deleted.size:
                    # bounds in the vector's own dtype: mixed dtypes would convert the whole vector per call
                    lo, hi = np.searchsorted(deleted, np.array([start, stop], dtype=deleted.dtype))
                    if hi > lo:
                        keep = np.ones(stop - start, dtype=bool)
                        keep[deleted[lo:hi].astype(np.int64) - start] = False
                        if not keep.any():
                            continue
                batch = scan.read(start, stop) if whole is None else whole.slice(start - span_start, stop - start)
                mask = masks.slice(start - span_start, stop - start) if isinstance(masks, pa.Array) else masks
                if keep is not None:
                    batch = batch.filter(arrow_mask(keep))  # pa.array imports pandas
                    if isinstance(mask, pa.Array):
                        mask = mask.filter(arrow_mask(keep))
                if need_ids or need_addr:  # row addresses only matter for these columns
                    addr = row_addresses(frag.id, start, stop)
                    if keep is not None:
                        addr = addr[keep]
                if need_ids:
                    ids = stable_ids[(addr & np.uint64(0xFFFFFFFF)).astype(np.int64)] if stable_ids is not None \
                        else addr
                    batch = batch.append_column(ROW_ID, arrow_array(ids, pa.uint64()))
                if need_addr:
                    batch = batch.append_column(ROW_ADDR, arrow_array(addr, pa.uint64()))
                if program is not None:
                    batch = _select(batch, mask)
                elif opts.filter is not None:
                    batch = apply_filter(batch, opts.filter)
                if not batch.schema.equals(self._schema):  # usually equal: one C call per batch
                    if batch.schema.names != names:
                        batch = batch.select(names)
                    if names and not batch.schema.equals(self._schema):
                        batch = batch.cast(self._schema)  # zero-column casts would drop the row count
                yield batch


#: ``0, 1, 2, ...`` (read-only), grown on demand up to :data:`_IOTA_MAX` values.
_IOTA: npt.NDArray[np.uint64] = np.arange(0, dtype=np.uint64)
_IOTA_MAX = 1 << 22


def row_addresses(frag_id: int, start: int, stop: int) -> npt.NDArray[np.uint64]:
    """Row addresses of rows ``[start, stop)`` of fragment ``frag_id``.

    Written in one pass into memory from Arrow's pool, which reuses freed blocks: a fresh
    ``arange`` (and the OR that made addresses of it) faulted in new pages per batch, ~40% of a
    scan of one integer column with its addresses (what every index build reads).
    """
    global _IOTA
    n = stop - start
    first = np.uint64((frag_id << 32) + start)
    if n > _IOTA_MAX:
        return np.arange(n, dtype=np.uint64) + first
    if _IOTA.size < n:
        grown = np.arange(max(n, 2 * _IOTA.size), dtype=np.uint64)
        grown.flags.writeable = False
        _IOTA = grown
    out = pool_empty(n, np.uint64)
    np.add(_IOTA[:n], first, out=out)
    return out


def filter_mask(expr: pc.Expression | None, data: pa.RecordBatch | pa.Table, program: Node | None = None) -> Any:
    """The filter's mask on ``data``: an array, or a scalar for a constant filter.

    A filter built from SQL (``program``, see :func:`~lance_format.sql_program.program_for`) is
    computed by calling its kernels; any other expression by one Acero projection. Scans and
    counts (``lance_format.table.count``) both evaluate filters here.

    Raises:
        InvalidInputError: if the expression cannot be evaluated on the data.
    """
    try:
        if program is not None:
            mask = program.evaluate(data)
        else:
            assert expr is not None
            table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
            mask = project_table(table, [expr], ["mask"]).column(0)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"filter {expr} cannot be evaluated: {exc}") from exc
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.chunk(0) if mask.num_chunks == 1 else mask.combine_chunks()
    return mask


def _select(batch: _Data, mask: Any) -> _Data:
    """Rows of ``batch`` where ``mask`` (an array or a constant) is true; NULL drops the row."""
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        return batch.filter(mask)
    keep = mask.as_py() if isinstance(mask, pa.Scalar) else mask
    return batch if keep is True else batch.slice(0, 0)


_Data = TypeVar("_Data", pa.RecordBatch, pa.Table)


def apply_filter(batch: _Data, expr: pc.Expression) -> _Data:
    """Rows of ``batch`` (a RecordBatch or Table) where ``expr`` is true.

    Raises:
        InvalidInputError: if the expression cannot be evaluated on the data.
    """
    program = program_for(expr)
    if program is not None:  # the filter came from SQL: call the kernels, no plan per batch
        return _select(batch, filter_mask(expr, batch, program))
    is_batch = isinstance(batch, pa.RecordBatch)
    table = pa.Table.from_batches([batch]) if is_batch else batch
    try:
        result = filter_table(table, expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"filter {expr} cannot be evaluated: {exc}") from exc
    if not is_batch:
        return result
    if result.num_rows:
        return result.combine_chunks().to_batches()[0]
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in result.schema], schema=result.schema)


Filter: TypeAlias = str | pc.Expression | None


def filter_expression(filter: Filter, schema: pa.Schema) -> pc.Expression | None:
    """A filter argument (SQL text or pyarrow expression) as a pyarrow expression over ``schema``.

    ``_rowid`` / ``_rowaddr`` may be referenced in SQL text even though they are not columns.

    Raises:
        InvalidInputError: for SQL this library cannot translate.
    """
    if filter is None or isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, str):
        key = (filter, schema)
        hit = _PARSED.get(key)
        if hit is not None:
            if hit[1] is not None and program_for(hit[0]) is None:
                remember(hit[1])  # pushed out of sql_program's table since: scans evaluate it directly again
            return hit[0]
        expr = _parse(filter, schema)
        with _PARSED_LOCK:
            while len(_PARSED) >= _MAX_PARSED:
                _PARSED.pop(next(iter(_PARSED)), None)
            _PARSED[key] = (expr, program_for(expr))
        return expr
    return _parse(filter, schema)


#: Parsed SQL filters by (text, schema): a request parses its filter more than once
#: (``count_rows`` and its scanner, a scan and its index plan) and a long-lived process sees
#: the same filters again; parsing is ~0.3-0.7 ms of pure Python each time. Expressions are
#: immutable, so one may serve every caller. Bounded: the oldest entries go first.
_PARSED: dict[tuple[str, pa.Schema], tuple[pc.Expression, Node | None]] = {}
_PARSED_LOCK = threading.Lock()
_MAX_PARSED = 256


def _parse(filter: Filter, schema: pa.Schema) -> pc.Expression | None:
    if filter is None or isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, str):
        extra = schema
        for name in (ROW_ID, ROW_ADDR):
            if name in filter and name not in schema.names:
                extra = extra.append(pa.field(name, pa.uint64()))
        simple = parse_simple(filter, extra)  # common shapes without importing sqlglot (~0.2 s)
        if simple is not None:
            return simple
        schema = extra
    from lance_format.sql import to_expression  # sqlglot: imported only for the other SQL

    return to_expression(filter, schema)


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "PREFETCH_FRAGMENTS",
    "ROW_ADDR",
    "ROW_ID",
    "Scan",
    "ScanOptions",
    "apply_filter",
    "filter_expression",
    "filter_mask",
    "referenced_columns",
]
