"""``nearest=`` scans: k nearest neighbours of a query vector, as pylance 14.0.2 answers them.

What runs (``docs/formats/vector-indices.md`` §8; pylance's plans, checked with ``explain_plan``):

* **ANN** over every segment of the column's vector index (when ``use_index`` and the metric is
  the index's): the probed partitions' rows are scored from the index storage
  (:mod:`lance_format.index.vector.search`); deleted rows, rows a ``prefilter=True`` filter
  rejects and rows of fragments no longer in the dataset are never candidates. IVF_RQ codes get
  pylance's estimates (l2, cosine); on dot its probed rows are scored exactly from the data. Segment row ids
  are moved to current row addresses first: through ``__lance_frag_reuse`` after a compaction
  that deferred the remap, and from stable row ids to addresses on stable-row-id datasets. All of
  that is worked out per partition, when a query first reaches it, from row ids read with its
  codes (:mod:`lance_format.search.segment_rows`): a first query touches only what it probes.
* **Flat** (``KNNVectorDistance``): exact distances over the fragments no segment covers (all
  fragments without an index, with ``use_index=False`` or another metric than the index's).
* **Merge**: with a ``refine_factor`` or uncovered fragments, the ANN candidates are re-scored
  with exact distances read from the data and merged with the flat ones; otherwise the index's
  (possibly estimated) distances are returned. The k best by ``(_distance, _rowid)`` win.
* **Postfilter** (default): the filter is applied to those k rows, so fewer may come back.

Columns are the projection, then ``_distance`` (float32), then ``_rowid`` / ``_rowaddr`` when asked.
Multivector columns (``list<fixed_size_list>``) take ``[m, d]`` queries and are scored by
late interaction, exactly and through the index (:mod:`lance_format.search.multivector`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.arrays import arrow_array, numbers
from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index import frag_reuse
from lance_format.index.codec.vector import decode_vector_details
from lance_format.index.vector.distance import F32, Metric, distances
from lance_format.index.vector.layout import RQStorage
from lance_format.index.vector.search import Scorer, search_segment, top_k
from lance_format.scanner import LanceScanner
from lance_format.search import multivector
from lance_format.search.metrics import check_metric, default_metric
from lance_format.search.nearest_explain import explain
from lance_format.search.nearest_query import DISTANCE, NearestQuery, parse_nearest
from lance_format.search.placement import placed
from lance_format.search.prefilter import prefilter_mask
from lance_format.search.rows import take_addresses
from lance_format.search.segment_rows import (
    UsableRows,
    open_segment,
    reuse_versions,
    stable_ids,
    state,
    usable_rows,
    vector_segments,
)
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.read import ROW_ADDR, ROW_ID, ReadContext
from lance_format.table.scan import Scan, ScanOptions, apply_filter, referenced_columns

__all__ = ["DISTANCE", "NearestQuery", "NearestScanner", "nearest_scanner", "parse_nearest"]

U64 = npt.NDArray[np.uint64]


def _vectors(col: pa.ChunkedArray | pa.Array, dim: int) -> npt.NDArray[Any]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    values = arr.values.slice(arr.offset * dim, len(arr) * dim).to_numpy(zero_copy_only=False)
    out: npt.NDArray[Any] = values.reshape(len(arr), dim)
    if arr.null_count:
        out = out.astype(np.float64 if out.dtype == np.float64 else np.float32)
        out[np.asarray(arr.is_null())] = np.nan  # null vectors have no distance and are dropped
    return out


def nearest_scanner(ctx: ReadContext, options: ScanOptions, nearest: Mapping[str, Any],
                    output_kinds: Sequence[str] | None, *, prefilter: bool | None,
                    order: Sequence[str] | None = None) -> NearestScanner:
    """The scanner of ``ds.scanner(nearest=..., ...)`` over ``options`` (projection, filter, row ids).

    Raises:
        InvalidInputError: see :func:`parse_nearest`; ``prefilter`` not a bool.
        NotSupportedError: computed or nested output columns, ``order_by``, ``row_range``.
    """
    if output_kinds is not None and any(k not in ("column", ROW_ID, ROW_ADDR) for k in output_kinds):
        raise NotSupportedError("nearest= with computed or nested output columns is not supported")
    if options.order_by:
        raise NotSupportedError("nearest= with order_by is not supported (results are ordered by _distance)")
    if options.row_range is not None:
        raise NotSupportedError("nearest= over a row range is not supported")
    if prefilter is not None and not isinstance(prefilter, bool):
        raise InvalidInputError(f"prefilter must be a bool, got {prefilter!r}")
    query = parse_nearest(nearest, ctx.arrow_schema)
    return NearestScanner(ctx, options, query, prefilter=bool(prefilter), order=order)


class NearestScanner(LanceScanner):
    """A ``nearest=`` scan of one dataset version (pylance's ``LanceScanner`` methods)."""

    def __init__(self, ctx: ReadContext, options: ScanOptions, query: NearestQuery, *, prefilter: bool = False,
                 order: Sequence[str] | None = None):
        super().__init__(ctx, options)
        self._query = query
        self._prefilter = prefilter
        fields = [ctx.arrow_schema.field(c) for c in options.columns] + [pa.field(DISTANCE, pa.float32())]
        if options.with_row_id:
            fields.append(pa.field(ROW_ID, pa.uint64()))
        if options.with_row_address:
            fields.append(pa.field(ROW_ADDR, pa.uint64()))
        self._schema = placed(pa.schema(fields), order)  # _distance where columns= named it
        typ = ctx.arrow_schema.field(query.column).type
        vec = typ.value_type if query.multi else typ
        self._dim = vec.list_size
        self._element = vec.value_type
        self._metric: Metric = query.metric or default_metric(self._element)

    @property
    def projected_schema(self) -> pa.Schema:
        """Schema of the result."""
        return self._schema

    # -- planning ------------------------------------------------------------------------------
    def _index(self) -> tuple[list[IndexMetadata], Metric, frozenset[int]]:
        """Segments to search, the metric, and the live fragments they cover (once per version)."""
        query = self._query
        cache = state(self._ctx).plans
        key = (query.column, query.use_index, query.metric)
        hit = cache.get(key)
        if hit is None:
            hit = self._plan_index()
            check_metric(hit[1], self._element, query.column)  # before a row is read, and never cached
            cache[key] = hit
        return hit

    def _plan_index(self) -> tuple[list[IndexMetadata], Metric, frozenset[int]]:
        query = self._query
        segs = vector_segments(self._ctx, query.column) if query.use_index else []
        if segs:
            index_metric = decode_vector_details(segs[0].index_details.value).metric \
                if segs[0].index_details is not None else "l2"
            if query.metric is not None and query.metric != index_metric:
                segs = []  # pylance falls back to a brute-force search for another metric
            else:
                live = frozenset(f.id for f in self._ctx.manifest.fragments)
                reuse = reuse_versions(self._ctx)
                covered: set[int] = set()
                for m in segs:
                    assert m.fragment_bitmap is not None
                    bitmap = m.fragment_bitmap
                    if reuse and not self._ctx.manifest.uses_stable_row_ids:
                        bitmap = frag_reuse.covered_after(bitmap, reuse, m.dataset_version)
                    covered |= bitmap
                return segs, index_metric, frozenset(covered) & live
        return [], query.metric or default_metric(self._element), frozenset()

    def _frags(self) -> list[Any]:
        return self._opts.fragments if self._opts.fragments is not None else list(self._ctx.manifest.fragments)

    # -- execution ------------------------------------------------------------------------------
    def _ann(self, segs: list[IndexMetadata], covered: frozenset[int], k: int) -> tuple[U64, F32]:
        query = self._query
        if not query.multi:
            return self._ann_each(segs, covered, k, [query.q])[0]
        # one search per query vector, then the late-interaction estimate (search/multivector.py)
        per = self._ann_each(segs, covered, multivector.per_query_k(query.k), list(query.q))
        return multivector.xtr_scores(per, k)

    def _ann_each(self, segs: list[IndexMetadata], covered: frozenset[int], k: int,
                  queries: list[npt.NDArray[Any]]) -> list[tuple[U64, F32]]:
        """The ``k`` best index entries for each query vector (row addresses, distances)."""
        query = self._query
        frags = [f for f in self._frags() if f.id in covered]
        mask, mask_key = None, None  # the rows the prefilter keeps, evaluated once per fragment and version
        if self._prefilter and self._opts.filter is not None:
            mask = prefilter_mask(self._ctx, frags, self._opts.filter, self._opts.filter_sql)
            mask_key = self._opts.filter_sql if self._opts.filter_sql is not None else str(self._opts.filter)
        opened = []
        for meta in segs:
            seg = open_segment(self._ctx, meta)
            # which rows may be returned, worked out for the partitions a query reaches (segment_rows.py)
            usable = usable_rows(self._ctx, meta, seg, frags, mask, mask_key)
            exact = isinstance(seg.storage, RQStorage) and seg.metric == "dot"  # no dot estimate (search.py)
            opened.append((seg, usable, self._exact_scorer(usable) if exact else None))
        out = []
        for q in queries:
            out_a, out_d = [], []
            for seg, usable, score in opened:
                rows, dist = search_segment(seg, q, k, query.probe, usable.allowed, query.distance_range, score,
                                            best_per_row=query.multi and "HNSW" in seg.index_type,
                                            prepare=usable.prepare, ef=query.ef, allowed_mask=usable.ok)
                out_a.append(usable.addrs[rows])
                out_d.append(dist)
            a = np.concatenate(out_a) if out_a else np.empty(0, np.uint64)
            d = np.concatenate(out_d) if out_d else np.empty(0, np.float32)
            pick = top_k(d, a, k)
            out.append((a[pick], d[pick]))
        return out

    def _exact_scorer(self, usable: UsableRows) -> Scorer:
        """Exact distances read from the data, for storage we cannot score (IVF_RQ's RaBitQ codes:
        their packed layout is not implemented). The probed partitions still decide the candidates,
        so results are those of an exact re-rank of every probed row."""
        metric = self._metric

        def score(parts: npt.NDArray[np.int64], rows: list[npt.NDArray[np.int64]]) -> F32:
            flat_rows = np.concatenate(rows) if rows else np.empty(0, np.int64)
            out = np.full(flat_rows.size, np.nan, np.float32)
            live = usable.ok[flat_rows]  # prepared: search_segment prepares partitions before scoring
            out[live] = self._exact(usable.addrs[flat_rows[live]], metric)
            return out

        return score

    def _exact(self, addrs: U64, metric: Metric) -> F32:
        return self._score(take_addresses(self._ctx, addrs, [self._query.column]).column(0), metric)

    def _score(self, col: pa.ChunkedArray | pa.Array, metric: Metric) -> F32:
        """Exact distances of the rows of the vector column ``col``."""
        if self._query.multi:
            return multivector.row_distances(metric, col, self._query.q)
        return distances(metric, _vectors(col, self._dim), self._query.q)

    def _flat(self, frags: list[Any], metric: Metric, k: int) -> tuple[U64, F32]:
        query = self._query
        use_filter = self._prefilter and self._opts.filter is not None
        opts = ScanOptions([query.column], self._opts.filter if use_filter else None, with_row_address=True,
                           fragments=frags, filter_sql=self._opts.filter_sql if use_filter else None)
        best_a, best_d = np.empty(0, np.uint64), np.empty(0, np.float32)
        for batch in Scan(self._ctx, opts).to_batches():
            d = self._score(batch.column(0), metric)
            a = numbers(batch.column(ROW_ADDR)).astype(np.uint64)
            d = self._in_range(d)
            best_a, best_d = np.concatenate([best_a, a]), np.concatenate([best_d, d])
            pick = top_k(best_d, best_a, k)
            best_a, best_d = best_a[pick], best_d[pick]
        return best_a, best_d

    def _in_range(self, d: F32) -> F32:
        lo, hi = self._query.distance_range
        if lo is None and hi is None:
            return d
        bad = np.zeros(d.size, bool)
        if lo is not None:
            bad |= d < lo
        if hi is not None:
            bad |= d >= hi
        return np.where(bad, np.float32(np.nan), d).astype(np.float32)

    def _neighbours(self) -> tuple[U64, F32]:
        """The k nearest live rows: addresses and distances, sorted."""
        query = self._query
        segs, metric, covered = self._index()
        self._metric = metric
        frags = self._frags()
        rest = [f for f in frags if f.id not in covered]
        if not segs:
            return self._flat(rest, metric, query.k)
        wanted = query.k * (query.refine_factor or 1)
        addrs, dist = self._ann(segs, covered, wanted)
        if query.refine_factor is None and not rest:
            return addrs, dist
        dist = self._in_range(self._exact(addrs, metric))
        if rest:
            fa, fd = self._flat(rest, metric, query.k)
            addrs, dist = np.concatenate([addrs, fa]), np.concatenate([dist, fd])
        pick = top_k(dist, addrs, query.k)
        return addrs[pick], dist[pick]

    def to_table(self) -> pa.Table:
        """The k nearest rows, sorted by ``_distance`` (then ``_rowid``), postfiltered."""
        addrs, dist = self._neighbours()
        opts = self._opts
        cols = list(opts.columns)
        post = None if self._prefilter else opts.filter
        extra = [] if post is None else [c for c in referenced_columns(post, self._ctx.arrow_schema.names)
                                          if c not in cols]
        table = take_addresses(self._ctx, addrs, cols + extra)
        table = table.append_column(pa.field(DISTANCE, pa.float32()), arrow_array(dist, pa.float32()))
        ids = stable_ids(self._ctx, addrs) if self._ctx.manifest.uses_stable_row_ids else addrs
        if ids.size > 1:  # ties are ordered by _rowid, as pylance's TopK
            order = np.lexsort((ids, dist))
            if (np.diff(order) != 1).any():  # usually in order already (not with stable row ids)
                table, ids, addrs = table.take(arrow_array(order)), ids[order], addrs[order]
        table = table.append_column(ROW_ID, arrow_array(ids, pa.uint64())).append_column(
            ROW_ADDR, arrow_array(addrs, pa.uint64()))
        if post is not None:
            table = apply_filter(table, post)
        table = table.slice(opts.offset, opts.limit).select(self._schema.names)
        # a cast of an equal schema still rebuilds the table (~0.1 ms a query)
        return table if table.schema.equals(self._schema, check_metadata=True) else table.cast(self._schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The result as record batches."""
        yield from self.to_table().to_batches(max_chunksize=max(1, self._opts.batch_size))

    def to_reader(self) -> pa.RecordBatchReader:
        """The result as a ``RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self._schema, self.to_batches())

    def count_rows(self) -> int:
        """Rows the search returns."""
        return int(self.to_table().num_rows)

    def head(self, num_rows: int) -> pa.Table:
        """The first ``num_rows`` rows."""
        return self.to_table().slice(0, num_rows)

    def explain_plan(self, verbose: bool = False) -> str:
        """The plan in pylance's words: ``ANNSubIndex`` / ``ANNIvfPartition`` when the index is used,
        ``KNNVectorDistance`` for exact distances (flat search, refine, unindexed fragments)."""
        segs, metric, covered = self._index()
        rest = [f for f in self._frags() if f.id not in covered]
        return explain(self._query, self._opts, segs, metric, covered, rest, self._ctx.store.uri("data"),
                       self._prefilter)
