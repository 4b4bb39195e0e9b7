"""ZONEMAP scalar index files, written and read as pylance 14.0.2 does.

Layout (``ZoneMapIndexBuilder``, ``rust/lance-index/src/scalar/zonemap.rs``; verified on files
pylance 14.0.2 writes): one file ``zonemap.lance`` with a row per *zone* — ``min`` / ``max``
(the column type; null when the zone holds no value), ``null_count`` / ``nan_count``
(``uint32``), ``fragment_id`` / ``zone_start`` / ``zone_length`` (``uint64``) — and schema
metadata ``rows_per_zone`` (decimal). A zone is ``rows_per_zone`` consecutive *live* rows of
one fragment (the last zone of a fragment may be shorter); ``zone_start`` is the row offset
of its first row and ``zone_length`` the offsets it spans, deleted rows in between included.
pylance 14.0.2 also records the rows holding null as a ``RowIdTreeMap`` in global buffer 1
(schema metadata ``null_bitmap`` = ``"1"``); the same applies to BLOOMFILTER files.

The index is inexact: a query returns every row of each zone that may match (the scan
re-applies the filter to those rows), as upstream's ``SearchResult::AtMost``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import distinct
from lance_format.errors import CorruptFileError, LanceError
from lance_format.file import LanceFileReader
from lance_format.index.predicates import In, IsNull, Range, ValueQuery
from lance_format.index.row_ranges import RowRanges, ZoneSpans
from lance_format.index.rowset import RowDomain, decode_row_set, encode_row_set, fragment_of, offset_of
from lance_format.index.store import IndexDir
from lance_format.index.zones import Zones, cut_zones, sort_by_address, zone_rows
from lance_format.table.index_metadata import IndexFile

FILE = "zonemap.lance"
ROWS_PER_ZONE_KEY = "rows_per_zone"
#: Schema metadata naming the global buffer with the null rows (pylance 14.0.2).
NULL_BITMAP_KEY = "null_bitmap"
#: ``ROWS_PER_ZONE_DEFAULT`` upstream.
DEFAULT_ROWS_PER_ZONE = 8192
#: What an opened segment holds besides its arrays (file reader, metadata), for cache accounting.
OPEN_READER_BYTES = 64 * 1024

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


def null_rows_buffer(values: pa.Array, addrs: U64) -> bytes:
    """Global buffer 1 of a ZONEMAP / BLOOMFILTER file: the null rows as a ``RowIdTreeMap``."""
    if values.null_count == 0:
        return encode_row_set(addrs[:0])
    return encode_row_set(np.sort(addrs[values.is_null().to_numpy(zero_copy_only=False)]))


def _min_max(values: pa.Array) -> tuple[pa.Scalar, pa.Scalar, int]:
    """Min, max (null when no value) and NaN count; NaN sorts above every number (DataFusion's order)."""
    nans = 0
    if pa.types.is_floating(values.type):
        isnan = pc.fill_null(pc.is_nan(values), False)
        nans = int(pc.sum(isnan).as_py() or 0)
    if nans:
        nan = pa.scalar(float("nan"), values.type)
        rest = values.filter(pc.invert(isnan))
        lo = pc.min_max(rest)["min"].cast(values.type) if len(rest) > rest.null_count else nan
        return lo, nan, nans
    mm = pc.min_max(values)
    return mm["min"].cast(values.type), mm["max"].cast(values.type), nans


def _reduced_min_max(values: pa.Array, zones: Zones) -> tuple[pa.Array, pa.Array] | None:
    """Every zone's min and max in one numpy pass, for columns where that gives DataFusion's answer.

    Integers, dates, times and timestamps without nulls (their storage integers order as the
    values); floats too when they hold no NaN and no zero (NaN and -0.0 / 0.0 order apart in
    DataFusion). ``None`` for anything else: the per-zone kernels handle it.
    """
    typ = values.type
    if values.null_count or zones.first.size == 0:
        return None
    t = pa.types
    if t.is_integer(typ) or t.is_floating(typ) and not t.is_float16(typ):
        arr = values.to_numpy(zero_copy_only=False)
        if arr.dtype.kind == "f" and bool(np.any(np.isnan(arr) | (arr == 0))):
            return None
        storage = typ
    elif t.is_date(typ) or t.is_time(typ) or t.is_timestamp(typ):
        storage = pa.int32() if typ.bit_width == 32 else pa.int64()
        arr = values.view(storage).to_numpy(zero_copy_only=False)
    else:
        return None
    lo = pa.array(np.minimum.reduceat(arr, zones.first), storage)
    hi = pa.array(np.maximum.reduceat(arr, zones.first), storage)
    return (lo, hi) if storage == typ else (lo.view(typ), hi.view(typ))


def zone_stats(values: pa.Array, zones: Zones) -> pa.Table:
    """The rows of ``zonemap.lance`` for ``values`` (aligned with the rows ``zones`` cut)."""
    typ = values.type
    fast = _reduced_min_max(values, zones)
    if fast is not None:
        zeros = np.zeros(zones.first.size, np.uint32)
        return _stats_table(typ, fast[0], fast[1], zeros, zeros, zones)
    mins: list[pa.Scalar] = []
    maxs: list[pa.Scalar] = []
    nulls = np.zeros(zones.first.size, np.uint32)
    nans = np.zeros(zones.first.size, np.uint32)
    for k, (a, b) in enumerate(zip(zones.first.tolist(), zones.stop.tolist(), strict=True)):  # one step per zone
        part = values.slice(a, b - a)
        lo, hi, nan = _min_max(part)
        mins.append(lo)
        maxs.append(hi)
        nulls[k] = part.null_count
        nans[k] = nan
    return _stats_table(typ, pa.array([m.as_py() for m in mins], typ), pa.array([m.as_py() for m in maxs], typ),
                        nulls, nans, zones)


def _stats_table(typ: pa.DataType, mins: pa.Array, maxs: pa.Array, nulls: npt.NDArray[np.uint32],
                 nans: npt.NDArray[np.uint32], zones: Zones) -> pa.Table:
    return pa.table({
        "min": mins, "max": maxs,
        "null_count": pa.array(nulls, pa.uint32()), "nan_count": pa.array(nans, pa.uint32()),
        "fragment_id": pa.array(zones.fragment_id, pa.uint64()),
        "zone_start": pa.array(zones.zone_start, pa.uint64()),
        "zone_length": pa.array(zones.zone_length, pa.uint64())}, schema=schema(typ))


def schema(typ: pa.DataType) -> pa.Schema:
    """``zonemap.lance``'s columns for a column of type ``typ``."""
    u32, u64 = pa.uint32(), pa.uint64()
    return pa.schema([pa.field("min", typ), pa.field("max", typ), pa.field("null_count", u32, False),
                      pa.field("nan_count", u32, False), pa.field("fragment_id", u64, False),
                      pa.field("zone_start", u64, False), pa.field("zone_length", u64, False)])


def write_zonemap(out: IndexDir, values: pa.Array, addrs: U64, rows_per_zone: int = DEFAULT_ROWS_PER_ZONE
                  ) -> tuple[IndexFile, ...]:
    """Write ``zonemap.lance`` from a column's values and their row addresses."""
    values, addrs = sort_by_address(values, addrs)
    table = zone_stats(values, cut_zones(addrs, rows_per_zone))
    return write_table(out, table, rows_per_zone, null_rows_buffer(values, addrs))


def write_table(out: IndexDir, table: pa.Table, rows_per_zone: int, nulls: bytes) -> tuple[IndexFile, ...]:
    """Write ``zonemap.lance`` from its rows (the global buffer ``nulls`` as buffer 1)."""
    meta = {NULL_BITMAP_KEY: "1", ROWS_PER_ZONE_KEY: str(int(rows_per_zone))}
    return (out.write(FILE, table, meta, global_buffers=[nulls]),)


def read_null_rows(reader: LanceFileReader, where: str, domain: RowDomain | None) -> U64 | None:
    """The null rows a ZONEMAP / BLOOMFILTER file records (``None`` when it records none)."""
    md = reader.schema.metadata or {}
    raw = md.get(NULL_BITMAP_KEY.encode())
    if raw is None:
        return None
    try:
        data = reader.read_global_buffer(int(raw))
    except (ValueError, LanceError) as exc:
        raise CorruptFileError(f"{where}: bad {NULL_BITMAP_KEY} global buffer {raw!r}: {exc}") from exc
    rows = domain.fragment_rows if domain is not None else (lambda _f: None)
    return decode_row_set(data, rows, where=f"{where} null rows", domain=domain)


class ZoneMapIndex:
    """An opened ZONEMAP segment: every zone in memory.

    Args:
        index_dir: The segment's directory.
        domain: Rows the segment may cover (zones outside it are refused), unchecked when ``None``.
    """

    def __init__(self, index_dir: IndexDir, domain: RowDomain | None = None):
        reader = index_dir.reader(FILE)
        self._where = reader.path
        names = ["min", "max", "null_count", "nan_count", "fragment_id", "zone_start", "zone_length"]
        if reader.schema.names[:7] != names:
            raise CorruptFileError(f"{self._where}: expected columns {names}, found {reader.schema.names}")
        table = reader.read_all(batch_size=1 << 20).to_table()
        self.table = table
        md = reader.schema.metadata or {}
        try:
            self.rows_per_zone = int(md.get(ROWS_PER_ZONE_KEY.encode(), DEFAULT_ROWS_PER_ZONE))
        except ValueError as exc:
            raise CorruptFileError(f"{self._where}: bad {ROWS_PER_ZONE_KEY} {md[ROWS_PER_ZONE_KEY.encode()]!r}") from exc
        self.min = table.column("min").combine_chunks()
        self.max = table.column("max").combine_chunks()
        self.null_count = _u(table, "null_count", self._where)
        self.nan_count = _u(table, "nan_count", self._where)
        self.fragment_id, self.zone_start, self.zone_length = zone_bounds(table, domain, self._where)
        self.spans = ZoneSpans.of(self.fragment_id, self.zone_start, self.zone_length)
        self._has_value: npt.NDArray[np.bool_] = pc.is_valid(self.min).to_numpy(zero_copy_only=False)
        self._numbers = _as_numbers(self.min), _as_numbers(self.max)
        self._nulls = reader
        self._domain = domain

    @property
    def path(self) -> str:
        """URI of ``zonemap.lance``."""
        return self._where

    @property
    def nbytes(self) -> int:
        """Memory this object holds (the zone table), for the session's index cache."""
        return int(self.table.nbytes) + 2 * int(self.spans.lo.nbytes) + OPEN_READER_BYTES

    @property
    def num_zones(self) -> int:
        """Zones in the segment."""
        return len(self.table)

    def candidate_zones(self, query: ValueQuery) -> npt.NDArray[np.bool_]:
        """Zones that may hold a row matching ``query`` (a superset, as upstream's zone test)."""
        if isinstance(query, IsNull):
            return self.null_count > 0
        floating = pa.types.is_floating(self.min.type)
        has_value = self._has_value
        if isinstance(query, In):
            hit = np.zeros(len(self.min), bool)
            for v in query.values:
                hit |= self._in_range(Range(v, True, v, True), has_value)
        else:
            hit = self._in_range(query, has_value)
        if floating:  # NaN sorts above every number: a zone with NaN may match any comparison
            hit |= self.nan_count > 0
        return hit

    def _in_range(self, q: Range, has_value: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        lo_np, hi_np = self._numbers
        if lo_np is not None and hi_np is not None:
            return _in_range_numbers(q, has_value, lo_np, hi_np, self.min.type)
        ok = has_value.copy()
        if q.lo is not None:
            cmp = pc.greater_equal if q.lo_inclusive else pc.greater
            ok &= _mask(cmp(self.max, q.lo.cast(self.max.type)))
        if q.hi is not None:
            cmp = pc.less_equal if q.hi_inclusive else pc.less
            ok &= _mask(cmp(self.min, q.hi.cast(self.min.type)))
        return ok

    def search(self, query: ValueQuery) -> U64:
        """Every row address of the zones that may match ``query`` (sorted, unique)."""
        return zone_rows(self.fragment_id, self.zone_start, self.zone_length, self.candidate_zones(query))

    def search_ranges(self, query: ValueQuery) -> RowRanges:
        """The zones that may match ``query`` as row ranges (what :meth:`search` lists row by row)."""
        return self.spans.pick(self.candidate_zones(query))

    def search_split(self, query: ValueQuery) -> tuple[RowRanges, RowRanges]:
        """The zones of :meth:`search_ranges` as ``(zones every live row of which matches, the others)``.

        A zone matches whole when it holds no null and no NaN and its min and max both lie in the
        range; only ranges on numeric columns (zone bounds as numbers) are split, other queries
        have no such zone. The candidate test is :meth:`candidate_zones`'s, bounds converted once.
        """
        lo_np, hi_np = self._numbers
        if not isinstance(query, Range) or lo_np is None or hi_np is None:
            return RowRanges.empty(), self.search_ranges(query)
        typ = self.min.type
        candidates = self._has_value.copy()
        full: npt.NDArray[np.bool_] = candidates & (self.null_count == 0) & (self.nan_count == 0)
        if query.lo is not None:
            b = _bound(query.lo, typ)
            candidates &= (hi_np >= b) if query.lo_inclusive else (hi_np > b)
            full &= (lo_np >= b) if query.lo_inclusive else (lo_np > b)
        if query.hi is not None:
            b = _bound(query.hi, typ)
            candidates &= (lo_np <= b) if query.hi_inclusive else (lo_np < b)
            full &= (hi_np <= b) if query.hi_inclusive else (hi_np < b)
        if pa.types.is_floating(typ):  # as candidate_zones: a zone with NaN may match any comparison
            candidates |= self.nan_count > 0
        full &= candidates
        return self.spans.pick(full), self.spans.pick(candidates & ~full)

    def null_rows(self) -> U64 | None:
        """Rows recorded as null (pylance 14.0.2's global buffer), ``None`` if not recorded."""
        return read_null_rows(self._nulls, self._where, self._domain)


def _storage(typ: pa.DataType) -> pa.DataType | None:
    """The integer or float type whose numpy order is ``typ``'s (``None``: compare with Arrow kernels)."""
    t = pa.types
    if t.is_integer(typ) or (t.is_floating(typ) and not t.is_float16(typ)):
        return typ
    if t.is_date(typ) or t.is_time(typ) or t.is_timestamp(typ) or t.is_duration(typ):
        return pa.int32() if typ.bit_width == 32 else pa.int64()
    return None


def _as_numbers(values: pa.Array) -> npt.NDArray[Any] | None:
    """A zone column's values as numpy numbers (a zone with no value: 0, masked by ``has_value``)."""
    storage = _storage(values.type)
    if storage is None:
        return None
    out: npt.NDArray[Any] = pc.fill_null(values.view(storage), 0).to_numpy(zero_copy_only=False)
    return out


def _bound(value: pa.Scalar, typ: pa.DataType) -> Any:
    """A bound as the Python number the zones' numpy values compare with (already of the column
    type, so within the numpy type's range)."""
    storage = _storage(typ)
    assert storage is not None
    if value.type != typ:
        value = value.cast(typ)
    return (value if storage == typ else value.cast(storage)).as_py()


def _in_range_numbers(q: Range, has_value: npt.NDArray[np.bool_], lo: npt.NDArray[Any], hi: npt.NDArray[Any],
                      typ: pa.DataType) -> npt.NDArray[np.bool_]:
    """:meth:`ZoneMapIndex._in_range` on numpy copies of the zones' min / max (a few microseconds
    against ~100 for Arrow kernels on a few hundred zones); numpy compares NaN as Arrow does (false)."""
    ok = has_value.copy()
    if q.lo is not None:
        b = _bound(q.lo, typ)
        ok &= (hi >= b) if q.lo_inclusive else (hi > b)
    if q.hi is not None:
        b = _bound(q.hi, typ)
        ok &= (lo <= b) if q.hi_inclusive else (lo < b)
    return ok


def _mask(mask: pa.Array) -> npt.NDArray[np.bool_]:
    # A zone whose max is NaN compares false here; it holds NaN, which makes it a candidate anyway.
    out: npt.NDArray[np.bool_] = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
    return out


def _u(table: pa.Table, name: str, where: str) -> npt.NDArray[np.uint64]:
    col = table.column(name)
    if col.null_count:
        raise CorruptFileError(f"{where}: a null in column {name}")
    out: npt.NDArray[np.uint64] = col.to_numpy().astype(np.uint64)
    return out


def zone_bounds(table: pa.Table, domain: RowDomain | None, where: str) -> tuple[U64, U64, U64]:
    """A zone table's ``fragment_id``, ``zone_start`` and ``zone_length``, checked (ZONEMAP and BLOOMFILTER).

    Raises:
        CorruptFileError: a null entry, or zones outside the rows the segment covers.
    """
    fragment_id, zone_start, zone_length = (_u(table, name, where)
                                            for name in ("fragment_id", "zone_start", "zone_length"))
    check_zones(fragment_id, zone_start, zone_length, domain, where)
    return fragment_id, zone_start, zone_length


def check_zones(fragment_id: U64, zone_start: U64, zone_length: U64, domain: RowDomain | None, where: str) -> None:
    """Refuse zones reaching past the rows of a fragment the segment covers.

    Raises:
        CorruptFileError: a zone names rows its fragment does not have.
    """
    if domain is None or fragment_id.size == 0:
        return
    for frag in distinct(fragment_id).tolist():
        if domain.fragments is not None and frag not in domain.fragments:
            continue  # pylance keeps zones of fragments a compaction removed; they answer no row
        rows = domain.fragment_rows(int(frag))
        if rows is None:
            continue
        mine = fragment_id == frag
        end = int((zone_start[mine] + zone_length[mine]).max())
        if end > rows:
            raise CorruptFileError(f"{where}: a zone of fragment {frag} ends at row {end}, past its {rows} rows")


def intersect_ranges(a: Range, b: Range) -> Range:
    """One range whose candidate zones hold every zone both ``a`` and ``b`` pick (``a AND b`` on one column).

    Each side takes the tighter bound when the two compare (equal bounds: inclusive only if
    both are); otherwise (NaN) it keeps ``a``'s, which only widens the candidates. A conjunction of
    two ranges on a ZONEMAP column is then one pass over the zones and no row-set intersection.
    """
    lo, lo_inc, hi, hi_inc = a.lo, a.lo_inclusive, a.hi, a.hi_inclusive
    if b.lo is not None:
        if lo is None or b.lo.as_py() > lo.as_py():
            lo, lo_inc = b.lo, b.lo_inclusive
        elif b.lo.as_py() == lo.as_py():
            lo_inc = lo_inc and b.lo_inclusive
    if b.hi is not None:
        if hi is None or b.hi.as_py() < hi.as_py():
            hi, hi_inc = b.hi, b.hi_inclusive
        elif b.hi.as_py() == hi.as_py():
            hi_inc = hi_inc and b.hi_inclusive
    return Range(lo, lo_inc, hi, hi_inc)


def remap_zones(table: pa.Table, translate: Callable[[U64], tuple[U64, npt.NDArray[np.bool_]]]) -> pa.Table:
    """A zone table (ZONEMAP or BLOOMFILTER rows) with its zones moved by a compaction.

    A zone's rows keep their order when compacted, so the rows it held land in one span of a
    new fragment (or one per new fragment when the output is cut): each such span becomes a
    zone with the old zone's statistics, which still bound its rows (deletions only remove
    rows). Zones whose rows were all deleted are dropped; zones of untouched fragments stay.

    Args:
        table: The file's rows (``fragment_id`` / ``zone_start`` / ``zone_length`` columns).
        translate: Old row addresses → ``(new addresses, kept mask)`` (``RowAddressMap.translate``).
    """
    frag = table.column("fragment_id").to_numpy().astype(np.uint64)
    start = table.column("zone_start").to_numpy().astype(np.uint64)
    length = table.column("zone_length").to_numpy().astype(np.uint64)
    lens = length.astype(np.int64)
    total = int(lens.sum())
    zone = np.repeat(np.arange(frag.size, dtype=np.int64), lens)
    steps = np.arange(total, dtype=np.uint64) - np.repeat(np.cumsum(lens) - lens, lens).astype(np.uint64)
    old = np.repeat((frag << np.uint64(32)) + start, lens) + steps
    new, keep = translate(old)
    zone = zone[keep]
    if new.size == 0:
        return table.slice(0, 0)
    order = np.lexsort((new, zone))
    zone, new = zone[order], new[order]
    nfrag = fragment_of(new)
    cut = np.concatenate(([0], np.flatnonzero((zone[1:] != zone[:-1]) | (nfrag[1:] != nfrag[:-1])) + 1))
    last = np.append(cut[1:], new.size) - 1
    offs = offset_of(new).astype(np.uint64)
    out = table.take(pa.array(zone[cut]))
    cols = {"fragment_id": nfrag[cut], "zone_start": offs[cut], "zone_length": offs[last] - offs[cut] + np.uint64(1)}
    for name, values in cols.items():
        out = out.set_column(out.schema.get_field_index(name), out.schema.field(name), pa.array(values, pa.uint64()))
    by = np.lexsort((out.column("zone_start").to_numpy(), out.column("fragment_id").to_numpy()))
    return out.take(pa.array(by))
