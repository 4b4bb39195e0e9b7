"""BLOOMFILTER: a split-block bloom filter per zone (:mod:`lance_format.index.bloomfilter`).

Inexact, answers ``=``, ``IN`` and ``IS NULL``; zones hold row addresses. Compaction and
``optimize_indices`` treat it as ZONEMAP (:mod:`lance_format.index.kinds.zonemap`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, UnsupportedIndexTypeError
from lance_format.index import bloomfilter, zonemap, zones
from lance_format.index.kind import BuildContext, IndexKind, TrainingData
from lance_format.index.kinds.zonemap import (
    ZoneChunk,
    concat_zone_chunks,
    positive_int,
    remap_nulls,
    zone_chunk_of_runs,
)
from lance_format.index.predicates import IndexQuery, Range, ValueQuery
from lance_format.index.row_ranges import RowRanges
from lance_format.index.rowset import RowDomain, encode_row_set
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap

U64 = npt.NDArray[np.uint64]


class BloomReader:
    """An opened BLOOMFILTER segment as the scan asks it: candidate rows, no values (inexact)."""

    exact = False

    def __init__(self, index: bloomfilter.BloomFilterIndex, typ: pa.DataType):
        self.index = index
        self.type = typ

    @property
    def path(self) -> str:
        """The segment's file."""
        return self.index.path

    @property
    def nbytes(self) -> int:
        """Memory held, for the session's index cache (another handle on the same version reuses it)."""
        return self.index.nbytes

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Rows of every zone whose filter may hold a queried value, each with a null value."""
        if not isinstance(query, ValueQuery):
            raise UnsupportedIndexTypeError(f"{self.path}: a BLOOMFILTER index cannot answer {query.describe('column')}")
        rows = self.index.search(query)
        return rows, pa.nulls(rows.size, self.type)

    def search_ranges(self, query: IndexQuery) -> RowRanges:
        """The zones :meth:`search_values` lists row by row, as row ranges (the scan reads them whole)."""
        if not isinstance(query, ValueQuery):
            raise UnsupportedIndexTypeError(f"{self.path}: a BLOOMFILTER index cannot answer {query.describe('column')}")
        return self.index.search_ranges(query)


class BloomFilterKind(IndexKind):
    """pylance's ``BloomFilterIndexDetails`` (``rust/lance-index/src/scalar/bloomfilter.rs``)."""

    name: ClassVar[str] = "BLOOMFILTER"
    details: ClassVar[str] = "BloomFilterIndexDetails"
    display: ClassVar[str] = "BloomFilter"

    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    defaults: ClassVar[Mapping[str, Any]] = {"number_of_items": bloomfilter.DEFAULT_ITEMS,
                                             "probability": bloomfilter.DEFAULT_PROBABILITY}
    exact: ClassVar[bool] = False
    streams: ClassVar[bool] = True

    @property
    def type_url(self) -> str:
        # pylance 14.0.2 files this one under the index package, not lance.table (observed on its bytes)
        return "/lance.index.pb.BloomFilterIndexDetails"

    def params(self, column: str, given: Mapping[str, Any]) -> dict[str, Any]:
        out = super().params(column, given)
        out["number_of_items"] = positive_int(self.name, column, "number_of_items", out["number_of_items"])
        p = out["probability"]
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < float(p) < 1.0:
            raise InvalidInputError(f"BLOOMFILTER index on column {column!r}: probability must be in (0, 1), got {p!r}")
        out["probability"] = float(p)
        return out

    def answers(self, query: IndexQuery) -> bool:
        """``=``, ``IN`` and ``IS NULL`` (a range is not a bloom filter question)."""
        if not isinstance(query, ValueQuery):
            return False
        return not isinstance(query, Range) or (query.lo is not None and query.lo == query.hi)

    def check_column(self, column: str, typ: pa.DataType) -> None:
        bloomfilter.check_type(column, typ)

    def stores_addresses(self, meta: IndexMetadata, stable_row_ids: bool) -> bool:
        return True

    def reads_addresses(self, stable_row_ids: bool) -> bool:
        return True

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> ZoneChunk:
        values, addrs = zones.sort_by_address(data.values.cast(ctx.field_type), data.ids)
        table = bloomfilter.bloom_table(values, addrs, ctx.params["number_of_items"], ctx.params["probability"])
        return ZoneChunk(table, np.sort(addrs[values.is_null().to_numpy(zero_copy_only=False)]))

    def encode_batches(self, batches: Iterable[tuple[pa.Array, U64]], model: Any, ctx: BuildContext) -> ZoneChunk:
        """Filters run by run of whole zones (:func:`~lance_format.index.zones.whole_zones`)."""
        items, probability = int(ctx.params["number_of_items"]), float(ctx.params["probability"])
        return zone_chunk_of_runs(batches, ctx.field_type, items, bloomfilter.SCHEMA,
                                  lambda values, cut: bloomfilter.bloom_zones_table(values, cut, items, probability))

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        table, nulls = concat_zone_chunks(chunks, bloomfilter.SCHEMA)
        return bloomfilter.write_table(out, table, ctx.params["number_of_items"], ctx.params["probability"],
                                       encode_row_set(nulls))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> BloomReader:
        return BloomReader(bloomfilter.BloomFilterIndex(src, domain), pa.null())

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        index = bloomfilter.BloomFilterIndex(src)
        table = zonemap.remap_zones(index.table.select(bloomfilter.SCHEMA.names), amap.translate)
        return bloomfilter.write_table(out, table.cast(bloomfilter.SCHEMA), index.number_of_items, index.probability,
                                       remap_nulls(index.null_rows(), amap))

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        index = bloomfilter.BloomFilterIndex(src)
        return {"num_blocks": index.num_zones, "number_of_items": index.number_of_items,
                "probability": index.probability}


KIND = BloomFilterKind()
