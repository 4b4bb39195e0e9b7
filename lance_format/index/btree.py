"""BTREE scalar index files, written and read as pylance 14.0.2 does.

Layout (``train_btree_index`` / ``btree_stats_as_batch``, ``rust/lance-index/src/scalar/btree.rs``):

* ``page_data.lance``: every indexed row sorted by value, nulls first, as columns
  ``values`` (the column type, nullable) and ``ids`` (``uint64`` not null: row address,
  or stable row id); page *k* is rows ``[k*B, (k+1)*B)``.
* ``page_lookup.lance``: one row per page, ``min`` / ``max`` (first and last value of
  the page), ``null_count: uint32`` and ``page_idx: uint32``; schema metadata
  ``batch_size`` = B (decimal) and ``range_partitioned`` = ``"false"``.

A query reads the small lookup file, then only the pages whose value range can match.
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import arrow_array, numbers, true_mask
from lance_format.errors import CorruptFileError
from lance_format.index.predicates import In, IsNull, Range, ValueQuery, value_mask
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.session import CacheKind
from lance_format.table.index_metadata import IndexFile

PAGE_DATA = "page_data.lance"
PAGE_LOOKUP = "page_lookup.lance"
#: ``DEFAULT_BTREE_BATCH_SIZE`` upstream.
DEFAULT_PAGE_SIZE = 4096
#: What an open file reader keeps (parsed metadata, chunk plans of the pages read), estimated.
OPEN_READER_BYTES = 64 * 1024
#: Pages read together at most for them to be kept in the session's index cache.
CACHED_RUN_PAGES = 8
#: Checked BTREE pages, ``(values, ids)`` by (page_data URI, page number).
BTREE_PAGE: CacheKind[tuple[pa.Array, npt.NDArray[np.uint64]]] = CacheKind("btree_page")

U64 = npt.NDArray[np.uint64]


def sort_training_data(values: pa.Array, ids: U64) -> tuple[pa.Array, U64]:
    """Sort rows by value, nulls first (ties keep their order), as the trainer expects."""
    order = _integer_order(values)
    if order is None:
        order = pc.array_sort_indices(values, null_placement="at_start").to_numpy()  # stable
    return values.take(pa.array(order)), ids[order]


def _integer_order(values: pa.Array) -> npt.NDArray[np.int64] | None:
    """Stable sort order of integer-like values without nulls through numpy (``None`` otherwise).

    When ``span * rows`` fits in 63 bits, ``(value - min) * rows + position`` is a unique key, so
    numpy's unstable sort gives the stable order, about 2-3x faster than Arrow's stable sort. The
    keys themselves are sorted (not argsorted: ~3x faster on 1M rows) and each sorted key's
    position is its remainder by ``rows``.
    """
    t = values.type
    if values.null_count or len(values) < 2 or not (
            pa.types.is_integer(t) or pa.types.is_temporal(t)) or pa.types.is_interval(t):
        return None
    raw = values.to_numpy(zero_copy_only=False)
    if raw.dtype.kind in "mM":  # dates, times, timestamps, durations: their integers
        raw = raw.view(np.int64) if raw.dtype.itemsize == 8 else raw.view(np.int32)
    if raw.dtype.kind not in "iu":
        return None
    n = raw.size
    lo, hi = int(raw.min()), int(raw.max())
    if (hi - lo + 1) * n >= 1 << 63:
        out: npt.NDArray[np.int64] = np.argsort(raw, kind="stable")
        return out
    key = (raw.astype(np.int64) - lo).astype(np.uint64) if raw.dtype != np.uint64 else raw - np.uint64(lo)
    key = key * np.uint64(n) + np.arange(n, dtype=np.uint64)
    key.sort()
    np.remainder(key, np.uint64(n), out=key)
    order: npt.NDArray[np.int64] = key.view(np.int64)  # positions < n < 2**63
    return order


def write_btree(out: IndexDir, values: pa.Array, ids: U64, *,
                page_size: int = DEFAULT_PAGE_SIZE) -> tuple[IndexFile, ...]:
    """Write both files of a BTREE index from rows already sorted by value (nulls first)."""
    n = len(values)
    data = pa.table({"values": values, "ids": pa.array(ids, pa.uint64())},
                    schema=pa.schema([pa.field("values", values.type), pa.field("ids", pa.uint64(), False)]))
    starts = np.arange(0, n, page_size, dtype=np.int64)
    lasts = np.minimum(starts + page_size, n) - 1
    nulls = np.clip(values.null_count - starts, 0, np.minimum(page_size, n - starts))
    lookup_schema = pa.schema([pa.field("min", values.type), pa.field("max", values.type),
                               pa.field("null_count", pa.uint32(), False),
                               pa.field("page_idx", pa.uint32(), False)])
    lookup = pa.table({"min": values.take(pa.array(starts)), "max": values.take(pa.array(lasts)),
                       "null_count": pa.array(nulls, pa.uint32()),
                       "page_idx": pa.array(np.arange(len(starts)), pa.uint32())}, schema=lookup_schema)
    f1 = out.write(PAGE_DATA, data)
    f2 = out.write(PAGE_LOOKUP, lookup, {"range_partitioned": "false", "batch_size": str(page_size)})
    return (f1, f2)


def page_size_of(metadata: dict[bytes, bytes]) -> int:
    """The page size a lookup file's schema metadata records.

    pylance reads a missing or unparseable ``batch_size`` as the default
    (``BTreeIndex::load``: ``parse().unwrap_or(DEFAULT_BTREE_BATCH_SIZE)``), so legacy-era
    files without it still open; the page count is checked against the row count after.
    """
    raw = metadata.get(b"batch_size")
    if raw is None or not re.fullmatch(rb"\+?[0-9]{1,19}", raw) or int(raw) >= 2**64:
        return DEFAULT_PAGE_SIZE
    return int(raw)


def same_values(a: pa.Array, b: pa.Array) -> npt.NDArray[np.bool_]:
    """Element-wise: equal, both null, or (floats) both NaN (``b`` cast to ``a``'s type if it differs)."""
    if a.type != b.type:
        try:
            b = b.cast(a.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise CorruptFileError(f"index values of type {b.type} where {a.type} was expected") from exc
    if not a.null_count and not b.null_count and not pa.types.is_floating(a.type):
        return truth(pc.equal(a, b))  # one kernel
    same = truth(pc.equal(a, b)) | (truth(a.is_null()) & truth(b.is_null()))
    if pa.types.is_floating(a.type):
        same |= truth(pc.and_(pc.is_nan(a), pc.is_nan(b)))
    return same


def descents(values: pa.Array) -> npt.NDArray[np.int64]:
    """Positions ``i`` where ``values[i+1] < values[i]`` (nulls and NaN never count)."""
    if len(values) < 2:
        return np.empty(0, np.int64)
    return np.flatnonzero(truth(pc.less(values.slice(1), values.slice(0, len(values) - 1))))


class BTreeIndex:
    """An opened BTREE segment: the page lookup in memory, pages read on demand.

    Opening checks the lookup against itself and the data file's row count (pages, nulls
    first, page ranges in order: O(pages)). Every page a query reads is checked against its
    lookup row (first and last value, null count) and for order, and, given a ``domain``,
    the matching ids against the rows the segment covers: a damaged file is refused with a
    ``CorruptFileError`` naming it instead of answering other rows.

    Args:
        index_dir: The segment's directory.
        domain: Ids the segment may hold (unchecked when ``None``).
    """

    def __init__(self, index_dir: IndexDir, domain: RowDomain | None = None):
        self._dir = index_dir
        self._domain = domain
        lookup_reader = index_dir.reader(PAGE_LOOKUP)
        self._lookup_path = lookup_reader.path
        self.page_size = page_size_of(lookup_reader.schema.metadata or {})
        if self.page_size <= 0:
            raise CorruptFileError(f"{lookup_reader.path}: page size {self.page_size} in the schema metadata")
        lookup = lookup_reader.read_all(batch_size=1 << 20).to_table()
        for col in ("min", "max", "null_count"):
            if col not in lookup.column_names:
                raise CorruptFileError(f"{lookup_reader.path}: no {col!r} column")
        self.mins = lookup.column("min").combine_chunks()
        self.maxs = lookup.column("max").combine_chunks()
        counts = lookup.column("null_count")
        if not pa.types.is_integer(counts.type) or counts.null_count:
            raise CorruptFileError(f"{lookup_reader.path}: null_count is {counts.type} with "
                                   f"{counts.null_count} nulls, expected uint32 without nulls")
        self.null_counts = ints(counts.combine_chunks())
        self._data = index_dir.reader(PAGE_DATA)
        if self._data.schema.names[:2] != ["values", "ids"]:
            raise CorruptFileError(f"{self._data.path}: expected columns values, ids")
        self.num_rows = self._data.num_rows
        self._check_lookup(lookup)
        # integer bounds without nulls as numpy: a range query's pages are then two binary searches
        # (the lookup is checked sorted above), not a pass of Arrow kernels over every page
        self._int_bounds: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        typ = self.mins.type
        if pa.types.is_integer(typ) and typ != pa.uint64() and not self.mins.null_count and not self.maxs.null_count:
            self._int_bounds = (ints(self.mins), ints(self.maxs))

    # -- validation ----------------------------------------------------------------------------
    def _page_bounds(self, pages: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        starts = pages * self.page_size
        return starts, np.minimum(starts + self.page_size, self.num_rows)

    def _check_lookup(self, lookup: pa.Table) -> None:
        where = self._lookup_path
        n, size = self.num_rows, self.page_size
        pages = len(self.mins)
        values_type = self._data.schema.field("values").type
        if self.mins.type != values_type or self.maxs.type != values_type:
            raise CorruptFileError(f"{where}: min/max of type {self.mins.type}/{self.maxs.type} but "
                                   f"{self._data.path} holds values of type {values_type}")
        if not pa.types.is_unsigned_integer(self._data.schema.field("ids").type):
            raise CorruptFileError(f"{self._data.path}: ids of type {self._data.schema.field('ids').type}")
        want = -(-n // size)
        if pages != want:
            raise CorruptFileError(f"{where}: {pages} pages, but {self._data.path} holds {n} rows in pages of "
                                   f"{size} ({want} pages)")
        if "page_idx" in lookup.column_names:
            idx = lookup.column("page_idx")
            if idx.null_count or not np.array_equal(ints(idx.combine_chunks()), np.arange(pages)):
                raise CorruptFileError(f"{where}: page_idx is not 0, 1, 2, … ({pages} pages)")
        covered = self._covered_rows()
        if covered and n > covered:
            raise CorruptFileError(f"{self._data.path}: {n} rows, more than the {covered} rows of the fragments "
                                   f"the index covers")
        if not pages:
            return
        starts, stops = self._page_bounds(np.arange(pages, dtype=np.int64))
        lengths = stops - starts
        # nulls first: every page before the last null is all nulls
        nulls = int(self.null_counts.sum())
        if not np.array_equal(self.null_counts, np.clip(nulls - starts, 0, lengths)):
            raise CorruptFileError(f"{where}: null counts {self.null_counts[:8].tolist()} are not those of "
                                   f"{nulls} nulls sorted first into pages of {size}")
        min_null = truth(self.mins.is_null())
        max_null = truth(self.maxs.is_null())
        if not (np.array_equal(min_null, self.null_counts > 0) and np.array_equal(max_null, self.null_counts == lengths)):
            raise CorruptFileError(f"{where}: null min/max do not match the pages' null counts")
        inside = np.flatnonzero(truth(pc.greater(self.mins, self.maxs)))
        between = np.flatnonzero(truth(pc.greater(self.maxs.slice(0, pages - 1), self.mins.slice(1))))
        if inside.size or between.size:
            k = int(inside[0]) if inside.size else int(between[0])
            raise CorruptFileError(f"{where}: page ranges are out of order at page {k}")

    def _covered_rows(self) -> int:
        """Physical rows of the covered fragments (0: unknown). Each row is indexed at most once.

        Only for row addresses: with stable row ids a compaction moves the fragment bitmap to
        fragments without the rows deleted since the build, which the index still lists.
        """
        d = self._domain
        if d is None or not d.addresses or d.fragments is None or not d.fragments:
            return 0
        rows = [d.fragment_rows(f) for f in d.fragments]
        return 0 if any(r is None for r in rows) else sum(r for r in rows if r is not None)

    def _check_pages(self, run: npt.NDArray[np.int64], values: pa.Array) -> None:
        """The rows of pages ``run`` (consecutive) agree with the lookup and are sorted, nulls first."""
        where = self._data.path
        first = int(run[0]) * self.page_size
        starts, stops = self._page_bounds(run)
        starts, stops = starts - first, stops - first
        if len(values) != int(stops[-1]):
            raise CorruptFileError(f"{where}: pages {int(run[0])}..{int(run[-1])} hold {len(values)} rows, "
                                   f"expected {int(stops[-1])}")
        null = truth(values.is_null())
        seen = np.concatenate(([0], np.cumsum(null)))
        if not np.array_equal(seen[stops] - seen[starts], self.null_counts[run]) or \
                bool((null[1:] & ~null[:-1]).any()):
            raise CorruptFileError(f"{where}: the nulls of pages {int(run[0])}..{int(run[-1])} disagree with "
                                   f"{self._lookup_path}")
        down = descents(values)
        if down.size:
            k = int(run[0]) + (int(down[0]) + 1) // self.page_size
            raise CorruptFileError(f"{where}: values of page {k} are out of order")
        pages = arrow_ints(run)
        if not (same_values(values.take(arrow_ints(starts)), self.mins.take(pages)).all()
                and same_values(values.take(arrow_ints(stops - 1)), self.maxs.take(pages)).all()):
            raise CorruptFileError(f"{where}: the first or last values of pages {int(run[0])}..{int(run[-1])} "
                                   f"disagree with {self._lookup_path}")

    @property
    def nbytes(self) -> int:
        """Memory this object holds (the page lookup; pages go to the session cache), for caches."""
        return int(self.mins.nbytes + self.maxs.nbytes + self.null_counts.nbytes) + OPEN_READER_BYTES

    @property
    def path(self) -> str:
        """URI of the file holding the indexed values and ids (``page_data.lance``)."""
        return self._data.path

    @property
    def num_pages(self) -> int:
        """Pages of the index."""
        return len(self.mins)

    def _candidate_pages(self, query: ValueQuery) -> npt.NDArray[np.int64]:
        if isinstance(query, IsNull):
            return np.flatnonzero(self.null_counts > 0)
        ranges = [Range(v, True, v, True) for v in query.values] if isinstance(query, In) else [query]
        if self._int_bounds is not None and len(ranges) == 1:
            run = self._page_run(ranges[0])
            if run is not None:
                return run
        hit = np.zeros(self.num_pages, dtype=bool)
        nan_pages = np.zeros(self.num_pages, dtype=bool)
        if pa.types.is_floating(self.mins.type):
            nan_pages = truth(pc.or_kleene(pc.is_nan(self.mins), pc.is_nan(self.maxs)))
        for r in ranges:
            ok = pc.is_valid(self.maxs)  # a page whose last value is null holds only nulls
            if r.lo is not None:
                ok = pc.and_(ok, pc.greater_equal(self.maxs, r.lo))
            if r.hi is not None:  # a null min means the page starts with nulls: no lower bound
                ok = pc.and_(ok, pc.or_kleene(pc.is_null(self.mins), pc.less_equal(self.mins, r.hi)))
            hit |= truth(ok)
        return np.flatnonzero(hit | nan_pages)

    def _page_run(self, r: Range) -> npt.NDArray[np.int64] | None:
        """Pages that may hold values of ``r`` from the integer bounds (``None``: not integer literals)."""
        assert self._int_bounds is not None
        mins, maxs = self._int_bounds
        lo, hi = (None if v is None else v.as_py() for v in (r.lo, r.hi))
        if not all(v is None or (type(v) is int and -(1 << 63) <= v < 1 << 63) for v in (lo, hi)):
            return None
        # pages with max >= lo and min <= hi: both bounds are sorted, so they are one run of pages
        first = 0 if lo is None else int(np.searchsorted(maxs, lo, side="left"))
        stop = self.num_pages if hi is None else int(np.searchsorted(mins, hi, side="right"))
        return np.arange(first, max(first, stop), dtype=np.int64)

    def search(self, query: ValueQuery) -> U64:
        """Ids (row addresses or stable row ids) of rows matching ``query``, sorted and unique."""
        return self.search_values(query)[0]

    def search_values(self, query: ValueQuery) -> tuple[U64, pa.Array]:
        """:meth:`search` with the value the index holds for each id (aligned).

        Raises:
            CorruptFileError: a page read disagrees with the lookup, is out of order, holds an id
                twice, or (with a ``domain``) an id that is no row of the covered fragments.
        """
        pages = self._candidate_pages(query)
        if pages.size == 0:
            return np.empty(0, np.uint64), pa.nulls(0, self.mins.type)
        values, ids = self._pages(pages)
        span = self._sorted_span(values, query, pages)
        if span is not None:  # integers of a run of pages: sorted, so the matches are one slice
            found = ids[span[0]:span[1]]
            order = np.argsort(found, kind="stable")
            said = values.slice(span[0], span[1] - span[0]).take(arrow_ints(order))
        else:
            mask = value_mask(values, query)
            found = ids[truth(mask)]
            values = values.filter(mask)  # a null in the mask drops the row, as False does
            # pages are sorted by value: ids come out sorted only within one value, so order them
            order = np.argsort(found, kind="stable")
            said = values.take(arrow_ints(order))
        ids_sorted = found[order]
        if ids_sorted.size > 1 and bool((ids_sorted[1:] == ids_sorted[:-1]).any()):
            raise CorruptFileError(f"{self._data.path}: the same id is indexed twice")
        if self._domain is not None:
            self._domain.check(ids_sorted, self._data.path)
        return ids_sorted, said

    def _sorted_span(self, values: pa.Array, query: ValueQuery, pages: npt.NDArray[np.int64]) -> tuple[int, int] | None:
        """Where ``query``'s matches lie in ``values`` read from consecutive ``pages`` (sorted: checked
        when read), for integer values without nulls and integer bounds; ``None`` otherwise."""
        if self._int_bounds is None or not isinstance(query, Range) or values.null_count or values.type != self.mins.type \
                or (pages.size > 1 and int(pages[-1]) - int(pages[0]) != pages.size - 1):
            return None
        lo, hi = (None if v is None else v.as_py() for v in (query.lo, query.hi))
        if not all(v is None or (type(v) is int and -(1 << 63) <= v < 1 << 63) for v in (lo, hi)):
            return None
        raw = ints(values)  # Python bounds beyond a narrow type compare right
        a = 0 if lo is None else int(np.searchsorted(raw, lo, side="left" if query.lo_inclusive else "right"))
        b = raw.size if hi is None else int(np.searchsorted(raw, hi, side="right" if query.hi_inclusive else "left"))
        return a, max(a, b)

    def _pages(self, pages: npt.NDArray[np.int64]) -> tuple[pa.Array, U64]:
        """Values and ids of ``pages`` (ascending), checked; small runs come from the session cache.

        A query reads the few pages its value range touches; the same pages answer the next
        query on the same values, so pages read in runs of up to :data:`CACHED_RUN_PAGES` are
        kept (as copies: a slice would pin the whole run) in the session's index cache, as
        upstream keeps BTREE pages in its index cache (``BTreeIndex::lookup_page``,
        ``rust/lance-index/src/scalar/btree.rs``). They were checked when read.
        """
        cache = self._dir.store.session.index_cache
        keys = [(self._data.path, p) for p in pages.tolist()]
        found = cache.get_many(BTREE_PAGE, keys)
        missing = np.array([p for p, hit in zip(pages.tolist(), found, strict=True) if hit is None], np.int64)
        fresh: dict[int, tuple[pa.Array, U64]] = {}
        if missing.size:
            cuts = np.flatnonzero(np.diff(missing) != 1) + 1
            for run in np.split(missing, cuts):
                values, ids = self._read_run(run)
                if run.size > CACHED_RUN_PAGES:  # a broad range: kept whole for this query only
                    fresh[int(run[0])] = (values, ids)
                    continue
                items = []
                for k, p in enumerate(run.tolist()):
                    a = k * self.page_size
                    b = min(a + self.page_size, len(values))
                    page = (pa.concat_arrays([values.slice(a, b - a)]), ids[a:b].copy())
                    fresh[p] = page
                    items.append(((self._data.path, p), page, page[0].nbytes + page[1].nbytes))
                cache.put_many(BTREE_PAGE, items)
        value_parts: list[pa.Array] = []
        id_parts: list[U64] = []
        for p, hit in zip(pages.tolist(), found, strict=True):
            got = hit if hit is not None else fresh.get(p)
            if got is None:  # inside a broad run read whole above
                continue
            value_parts.append(got[0])
            id_parts.append(got[1])
        if len(value_parts) == 1:
            return value_parts[0], id_parts[0]
        return pa.concat_arrays(value_parts), np.concatenate(id_parts)

    def _read_run(self, run: npt.NDArray[np.int64]) -> tuple[pa.Array, U64]:
        """Read and check pages ``run`` (consecutive)."""
        start = int(run[0]) * self.page_size
        stop = min(self.num_rows, (int(run[-1]) + 1) * self.page_size)
        # A reader of its own: this object may live on in the session's cache, and a reader keeps
        # decoded file pages (a whole column of the file, for sequential reads) for later reads.
        reader = self._dir.reader(PAGE_DATA)
        table = reader.read_range(start, stop - start, batch_size=1 << 20).to_table()
        values = table.column("values").combine_chunks()
        self._check_pages(run, values)
        ids = table.column("ids")
        if ids.null_count:
            raise CorruptFileError(f"{self._data.path}: null ids in pages {int(run[0])}..{int(run[-1])}")
        return values, ids_of(ids)

    def read_all(self) -> tuple[pa.Array, U64]:
        """Every ``(values, ids)`` row, in index order (checked like the pages a query reads)."""
        table = self._data.read_all(batch_size=1 << 20).to_table()
        values = table.column("values").combine_chunks()
        if self.num_pages:
            self._check_pages(np.arange(self.num_pages, dtype=np.int64), values)
        ids = table.column("ids")
        if ids.null_count:
            raise CorruptFileError(f"{self._data.path}: null ids")
        out = ids_of(ids).copy()
        if self._domain is not None:
            self._domain.check(out, self._data.path)
        return values, out

    def value_range(self) -> tuple[str, str]:
        """``(min, max)`` as pylance's stats print them (``"NULL"`` for a null)."""
        if not self.num_pages:
            return ("NULL", "NULL")
        lo, hi = self.mins[0].as_py(), self.maxs[-1].as_py()
        return ("NULL" if lo is None else str(lo), "NULL" if hi is None else str(hi))


# ``Array.to_numpy``, ``pa.array(ndarray)`` and ``fill_null(<Python value>)`` make pyarrow import
# pandas (~0.3 s of CPU in a fresh process), which a first indexed query would pay for; these read
# and build Arrow buffers directly (lance_format/arrays.py), typed as the index code uses them.
def ints(arr: pa.Array) -> npt.NDArray[np.int64]:
    """An integer array without nulls as int64 (a copy unless it is int64 already)."""
    out: npt.NDArray[np.int64] = numbers(arr).astype(np.int64, copy=False)
    return out


def ids_of(col: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.uint64]:
    """An unsigned integer column without nulls as uint64 (read-only when its buffer is viewed)."""
    out: npt.NDArray[np.uint64] = numbers(col).astype(np.uint64, copy=False)
    return out


#: Where a boolean array is true (a null counts as false), from its bitmaps.
truth = true_mask


def arrow_ints(x: npt.NDArray[np.integer], typ: pa.DataType | None = None) -> pa.Array:
    """An Arrow integer array (``typ``, int64 by default: for ``take``) over a 1-D ndarray of integers."""
    return arrow_array(np.asarray(x), pa.int64() if typ is None else typ)
