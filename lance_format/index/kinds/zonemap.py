"""ZONEMAP: per-zone min / max / null and NaN counts (:mod:`lance_format.index.zonemap`).

Inexact: a query returns every row of the zones that may match, which the scan re-checks.
Zones hold row addresses whatever the dataset's row ids (upstream trains on ``_rowaddr``).
A compaction moves each zone onto the span its rows land in (pylance itself drops the index
from the rewritten fragments); ``optimize_indices`` rebuilds it over every live fragment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedIndexTypeError
from lance_format.index import zonemap, zones
from lance_format.index.codec.scalar import encode_zonemap_details
from lance_format.index.kind import BuildContext, IndexKind, TrainingData, check_scalar_type
from lance_format.index.predicates import IndexQuery, ValueQuery
from lance_format.index.row_ranges import RowRanges
from lance_format.index.rowset import RowDomain, encode_row_set
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap

U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class ZoneChunk:
    """One build task's zones and null rows (picklable, small)."""

    table: pa.Table
    nulls: U64


def positive_int(kind: str, column: str, name: str, value: Any) -> int:
    """``value`` as a positive integer parameter.

    Raises:
        InvalidInputError: not a positive integer.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
        raise InvalidInputError(f"{kind} index on column {column!r}: {name} must be a positive integer, got {value!r}")
    return int(value)


class ZoneReader:
    """An opened ZONEMAP segment as the scan asks it: candidate rows, no values (inexact)."""

    exact = False

    def __init__(self, index: zonemap.ZoneMapIndex):
        self.index = index

    @property
    def path(self) -> str:
        """The segment's file."""
        return self.index.path

    @property
    def nbytes(self) -> int:
        """Memory held, for the session's index cache (another handle on the same version reuses it)."""
        return self.index.nbytes

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Rows of every zone that may match ``query``, each with a null value (zones hold no per-row value)."""
        if not isinstance(query, ValueQuery):
            raise UnsupportedIndexTypeError(f"{self.path}: a ZONEMAP index cannot answer {query.describe('column')}")
        rows = self.index.search(query)
        return rows, pa.nulls(rows.size, self.index.min.type)

    def search_ranges(self, query: IndexQuery) -> RowRanges:
        """The zones :meth:`search_values` lists row by row, as row ranges (the scan reads them whole)."""
        if not isinstance(query, ValueQuery):
            raise UnsupportedIndexTypeError(f"{self.path}: a ZONEMAP index cannot answer {query.describe('column')}")
        return self.index.search_ranges(query)

    def search_split(self, query: IndexQuery) -> tuple[RowRanges, RowRanges] | None:
        """:meth:`search_ranges` as ``(zones whose every row matches, the others)``; ``None`` for other queries."""
        if not isinstance(query, ValueQuery):
            return None
        return self.index.search_split(query)


class ZoneMapKind(IndexKind):
    """pylance's ``ZoneMapIndexDetails`` (``rust/lance-index/src/scalar/zonemap.rs``)."""

    name: ClassVar[str] = "ZONEMAP"
    details: ClassVar[str] = "ZoneMapIndexDetails"
    display: ClassVar[str] = "ZoneMap"
    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    defaults: ClassVar[Mapping[str, Any]] = {"rows_per_zone": zonemap.DEFAULT_ROWS_PER_ZONE}
    exact: ClassVar[bool] = False
    streams: ClassVar[bool] = True

    def params(self, column: str, given: Mapping[str, Any]) -> dict[str, Any]:
        out = super().params(column, given)
        out["rows_per_zone"] = positive_int(self.name, column, "rows_per_zone", out["rows_per_zone"])
        return out

    def answers(self, query: IndexQuery) -> bool:
        """Ranges, ``=``, ``IN`` and ``IS NULL``."""
        return isinstance(query, ValueQuery)

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if pa.types.is_boolean(typ):
            raise UnsupportedIndexTypeError(f"a ZONEMAP index cannot be built on boolean column {column!r}")
        check_scalar_type(self.name, column, typ)

    def stores_addresses(self, meta: IndexMetadata, stable_row_ids: bool) -> bool:
        return True

    def reads_addresses(self, stable_row_ids: bool) -> bool:
        return True

    def details_value(self, ctx: BuildContext, model: Any) -> bytes:
        return encode_zonemap_details(int(ctx.params["rows_per_zone"]), ctx.field_type)

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> ZoneChunk:
        values = data.values.cast(ctx.field_type)
        values, addrs = zones.sort_by_address(values, data.ids)
        table = zonemap.zone_stats(values, zones.cut_zones(addrs, int(ctx.params["rows_per_zone"])))
        return ZoneChunk(table, np.sort(addrs[values.is_null().to_numpy(zero_copy_only=False)]))

    def encode_batches(self, batches: Iterable[tuple[pa.Array, U64]], model: Any, ctx: BuildContext) -> ZoneChunk:
        """Zone statistics run by run of whole zones (:func:`~lance_format.index.zones.whole_zones`)."""
        rows_per_zone = int(ctx.params["rows_per_zone"])
        return zone_chunk_of_runs(batches, ctx.field_type, rows_per_zone, zonemap.schema(ctx.field_type),
                                  zonemap.zone_stats)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        table, nulls = concat_zone_chunks(chunks, zonemap.schema(ctx.field_type))
        return zonemap.write_table(out, table, int(ctx.params["rows_per_zone"]), encode_row_set(nulls))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> ZoneReader:
        return ZoneReader(zonemap.ZoneMapIndex(src, domain))

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        index = zonemap.ZoneMapIndex(src)
        table = zonemap.remap_zones(index.table.select(zonemap.schema(index.min.type).names), amap.translate)
        return zonemap.write_table(out, table, index.rows_per_zone, remap_nulls(index.null_rows(), amap))

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        index = zonemap.ZoneMapIndex(src)
        return {"num_zones": index.num_zones, "rows_per_zone": index.rows_per_zone}


def zone_chunk_of_runs(batches: Iterable[tuple[pa.Array, U64]], typ: pa.DataType,
                       rows_per_zone: int, schema: pa.Schema, rows_of: Callable[[pa.Array, zones.Zones], pa.Table]
                       ) -> ZoneChunk:
    """A build task's :class:`ZoneChunk` from its scan batches (or whole fragments): ``rows_of(values,
    zones)`` gives the zone rows of each run of whole zones (ZONEMAP statistics, BLOOMFILTER filters)."""
    tables: list[pa.Table] = []
    nulls: list[U64] = []
    if isinstance(batches, zones.WholeFragments):
        for fc in batches.columns():
            values = fc.values if fc.values.type == typ else fc.values.cast(typ)
            tables.append(rows_of(values, fc.zones(rows_per_zone)))
            if values.null_count:
                nulls.append(fc.addresses(values.is_null().to_numpy(zero_copy_only=False)))
    else:
        typed = ((v if v.type == typ else v.cast(typ), a) for v, a in batches)
        for values, addrs in zones.whole_zones(typed, rows_per_zone):
            tables.append(rows_of(values, zones.cut_zones(addrs, rows_per_zone)))
            if values.null_count:
                nulls.append(addrs[values.is_null().to_numpy(zero_copy_only=False)])
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return ZoneChunk(table, np.sort(np.concatenate(nulls)) if nulls else np.empty(0, np.uint64))


def concat_zone_chunks(chunks: Sequence[Any], schema: pa.Schema) -> tuple[pa.Table, U64]:
    """Every task's zones in fragment order, and every null row."""
    tables = [c.table for c in chunks if len(c.table)]
    if not tables:
        return schema.empty_table(), np.empty(0, np.uint64)
    table = pa.concat_tables(tables)
    order = np.lexsort((table.column("zone_start").to_numpy(), table.column("fragment_id").to_numpy()))
    nulls = np.sort(np.concatenate([c.nulls for c in chunks])).astype(np.uint64)
    return table.take(pa.array(order)), nulls


def remap_nulls(nulls: U64 | None, amap: RowAddressMap) -> bytes:
    """The null-rows buffer after a compaction."""
    if nulls is None:
        return encode_row_set(np.empty(0, np.uint64))
    return encode_row_set(np.sort(amap.translate(nulls)[0]))


KIND = ZoneMapKind()
