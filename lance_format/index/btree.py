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

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import CorruptFileError
from lance_format.index.predicates import In, IsNull, Range, ValueQuery, value_mask
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile

PAGE_DATA = "page_data.lance"
PAGE_LOOKUP = "page_lookup.lance"
#: ``DEFAULT_BTREE_BATCH_SIZE`` upstream.
DEFAULT_PAGE_SIZE = 4096

U64 = npt.NDArray[np.uint64]


def sort_training_data(values: pa.Array, ids: U64) -> tuple[pa.Array, U64]:
    """Sort rows by value, nulls first (ties keep their order), as the trainer expects."""
    order = pc.array_sort_indices(values, null_placement="at_start")  # stable: ties keep scan order
    return values.take(order), ids[order.to_numpy()]


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


class BTreeIndex:
    """An opened BTREE segment: the page lookup in memory, pages read on demand."""

    def __init__(self, index_dir: IndexDir):
        self._dir = index_dir
        lookup_reader = index_dir.reader(PAGE_LOOKUP)
        meta = lookup_reader.schema.metadata or {}
        try:
            self.page_size = int(meta[b"batch_size"])
        except (KeyError, ValueError) as exc:
            raise CorruptFileError(f"{lookup_reader.path}: no valid batch_size in the schema metadata") from exc
        lookup = lookup_reader.read_all(batch_size=1 << 20).to_table()
        for col in ("min", "max", "null_count"):
            if col not in lookup.column_names:
                raise CorruptFileError(f"{lookup_reader.path}: no {col!r} column")
        self.mins = lookup.column("min").combine_chunks()
        self.maxs = lookup.column("max").combine_chunks()
        self.null_counts = lookup.column("null_count").to_numpy()
        self._data = index_dir.reader(PAGE_DATA)
        if self._data.schema.names[:2] != ["values", "ids"]:
            raise CorruptFileError(f"{self._data.path}: expected columns values, ids")
        self.num_rows = self._data.num_rows

    @property
    def num_pages(self) -> int:
        """Pages of the index."""
        return len(self.mins)

    def _candidate_pages(self, query: ValueQuery) -> npt.NDArray[np.int64]:
        if isinstance(query, IsNull):
            return np.flatnonzero(self.null_counts > 0)
        ranges = [Range(v, True, v, True) for v in query.values] if isinstance(query, In) else [query]
        hit = np.zeros(self.num_pages, dtype=bool)
        nan_pages = np.zeros(self.num_pages, dtype=bool)
        if pa.types.is_floating(self.mins.type):
            nan_pages = pc.fill_null(pc.or_kleene(pc.is_nan(self.mins), pc.is_nan(self.maxs)), False).to_numpy(
                zero_copy_only=False)
        for r in ranges:
            ok = pc.is_valid(self.maxs)  # a page whose last value is null holds only nulls
            if r.lo is not None:
                ok = pc.and_(ok, pc.greater_equal(self.maxs, r.lo))
            if r.hi is not None:  # a null min means the page starts with nulls: no lower bound
                ok = pc.and_(ok, pc.or_kleene(pc.is_null(self.mins), pc.less_equal(self.mins, r.hi)))
            hit |= pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
        return np.flatnonzero(hit | nan_pages)

    def search(self, query: ValueQuery) -> U64:
        """Ids (row addresses or stable row ids) of rows matching ``query``, unsorted."""
        pages = self._candidate_pages(query)
        if pages.size == 0:
            return np.empty(0, np.uint64)
        out: list[U64] = []
        cuts = np.flatnonzero(np.diff(pages) != 1) + 1
        for run in np.split(pages, cuts):
            start = int(run[0]) * self.page_size
            stop = min(self.num_rows, (int(run[-1]) + 1) * self.page_size)
            table = self._data.read_range(start, stop - start, batch_size=1 << 20).to_table()
            values = table.column("values").combine_chunks()
            ids = table.column("ids").to_numpy()
            out.append(ids[value_mask(values, query).to_numpy(zero_copy_only=False)])
        return np.concatenate(out).astype(np.uint64, copy=False)

    def read_all(self) -> tuple[pa.Array, U64]:
        """Every ``(values, ids)`` row, in index order."""
        table = self._data.read_all(batch_size=1 << 20).to_table()
        return table.column("values").combine_chunks(), table.column("ids").to_numpy().astype(np.uint64)

    def value_range(self) -> tuple[str, str]:
        """``(min, max)`` as pylance's stats print them (``"NULL"`` for a null)."""
        if not self.num_pages:
            return ("NULL", "NULL")
        lo, hi = self.mins[0].as_py(), self.maxs[-1].as_py()
        return ("NULL" if lo is None else str(lo), "NULL" if hi is None else str(hi))
