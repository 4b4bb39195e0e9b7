"""``nearest=`` scans: k nearest neighbours of a query vector, as pylance 14.0.2 answers them.

What runs (``docs/formats/vector-indices.md`` §8; pylance's plans, checked with ``explain_plan``):

* **ANN** over every segment of the column's vector index (when ``use_index`` and the metric is
  the index's): the probed partitions' rows are scored from the index storage
  (:mod:`lance_format.index.vector.search`); deleted rows, rows a ``prefilter=True`` filter
  rejects and rows of fragments no longer in the dataset are never candidates. IVF_RQ codes get
  pylance's estimates (l2, cosine); on dot its probed rows are scored exactly from the data. Segment row ids
  are moved to current row addresses first: through ``__lance_frag_reuse`` after a compaction
  that deferred the remap, and from stable row ids to addresses on stable-row-id datasets.
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

import math
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index import frag_reuse, registry
from lance_format.index._compat import manifest_indices
from lance_format.index.codec.vector import decode_vector_details
from lance_format.index.models import FRAG_REUSE_INDEX
from lance_format.index.store import IndexDir
from lance_format.index.vector.distance import F32, Metric, distances, metric_name
from lance_format.index.vector.layout import IvfSegment, RQStorage, read_segment
from lance_format.index.vector.search import Probe, Scorer, search_segment, top_k
from lance_format.scanner import LanceScanner
from lance_format.search import multivector
from lance_format.search.metrics import check_metric, default_metric
from lance_format.search.placement import placed
from lance_format.search.prefilter import RowMask, prefilter_mask
from lance_format.search.rows import take_addresses
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.read import ROW_ADDR, ROW_ID, ReadContext
from lance_format.table.scan import Scan, ScanOptions, apply_filter, referenced_columns

U64 = npt.NDArray[np.uint64]
DISTANCE = "_distance"
_KEYS = {"column", "q", "k", "nprobes", "minimum_nprobes", "maximum_nprobes", "refine_factor", "metric", "ef",
         "use_index", "distance_range", "query_parallelism", "approx_mode", "search_effort"}
_FLOATS = (pa.float16(), pa.float32(), pa.float64())
_SEGMENTS: dict[tuple[str, str], IvfSegment] = {}
_SEGMENT_CACHE = 32


@dataclass
class _VersionState:
    """What repeated searches of one dataset version (one ``ReadContext``) share.

    Everything here follows from the immutable manifest, so it is computed once per version:
    each segment's row addresses with the rows still usable (live, in a covered fragment), and
    the deferred-remap entries. (The result rows' readers are kept by :mod:`.rows`.)
    """

    usable: dict[tuple[str, tuple[int, ...]], tuple[U64, npt.NDArray[np.bool_]]] = field(default_factory=dict)
    positions: dict[tuple[str, tuple[int, ...]], npt.NDArray[np.int64]] = field(default_factory=dict)
    plans: dict[tuple[str, bool, Metric | None], tuple[list[IndexMetadata], Metric, frozenset[int]]] = \
        field(default_factory=dict)
    reuse: tuple[frag_reuse.ReuseVersion, ...] | None = None


_STATES: weakref.WeakKeyDictionary[ReadContext, _VersionState] = weakref.WeakKeyDictionary()


def _state(ctx: ReadContext) -> _VersionState:
    st = _STATES.get(ctx)
    if st is None:
        st = _STATES[ctx] = _VersionState()
    return st


@dataclass(frozen=True)
class NearestQuery:
    """A validated ``nearest=`` argument."""

    column: str
    q: npt.NDArray[Any]
    k: int
    metric: Metric | None
    probe: Probe
    refine_factor: int | None
    use_index: bool
    ef: int | None
    distance_range: tuple[float | None, float | None]
    #: A multivector column: ``q`` holds ``[m, dim]`` query vectors (:mod:`.multivector`).
    multi: bool = False


def _int(d: Mapping[str, Any], key: str, minimum: int) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise InvalidInputError(f"nearest[{key!r}] must be an integer, got {v!r}")
    if int(v) < minimum:
        raise InvalidInputError(f"nearest[{key!r}] must be >= {minimum}, got {v}")
    return int(v)


def _effort(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(v)) or not 0.0 <= float(v) <= 1.0:
        raise InvalidInputError(f"nearest['search_effort'] must be finite and in [0, 1], got {v!r}")
    return float(v)


def parse_nearest(nearest: Mapping[str, Any], schema: pa.Schema) -> NearestQuery:
    """Check ``nearest=`` as pylance's ``_build_vector_search_query`` does.

    Raises:
        InvalidInputError: unknown keys, a missing or non-vector column, a query of another
            dimension, ``k``/``nprobes``/``refine_factor``/``ef`` out of range.
        NotSupportedError: batch queries, unsupported element types.
    """
    if not isinstance(nearest, Mapping):
        raise InvalidInputError(f"nearest= must be a dict, got {type(nearest).__name__}")
    unknown = sorted(set(nearest) - _KEYS)
    if unknown:
        raise InvalidInputError(f"nearest= has unknown key(s) {unknown} (accepted: {sorted(_KEYS)})")
    column = nearest.get("column")
    if not isinstance(column, str) or column not in schema.names:
        raise InvalidInputError(f"nearest column {column!r} is not in the dataset (columns: {schema.names})")
    typ = schema.field(column).type
    multi = multivector.is_multivector(typ)
    if multi:
        typ = typ.value_type  # the vectors inside each row
    elif not pa.types.is_fixed_size_list(typ):
        raise InvalidInputError(f"nearest column {column!r} must be a vector (fixed_size_list), got {typ}")
    elem, dim = typ.value_type, typ.list_size
    if elem not in _FLOATS and elem != pa.uint8():
        raise NotSupportedError(f"nearest= on {column!r}: vectors of {elem} are not supported "
                                "(float16, float32, float64 and uint8 are)")
    q = nearest.get("q")
    if q is None:
        raise InvalidInputError("nearest= needs a query vector 'q'")
    if isinstance(q, (pa.Array, pa.ChunkedArray)):
        q = q.to_numpy(zero_copy_only=False)
    qa = multivector.parse_query(q, column, dim) if multi else np.asarray(q)
    if not multi and qa.ndim != 1:
        raise NotSupportedError(f"nearest= with a {qa.ndim}-D query (batch queries) is not supported")
    if not multi and qa.size != dim:
        raise InvalidInputError(f"query vector size {qa.size} does not match index column size {dim} ({column!r})")
    k = _int(nearest, "k", 1)
    effort = _effort(nearest.get("search_effort"))
    nprobes = _int(nearest, "nprobes", 1 if effort is None else 0)  # ignored when search_effort is given
    lo_p, hi_p = _int(nearest, "minimum_nprobes", 0), _int(nearest, "maximum_nprobes", 0)
    if lo_p is not None and hi_p is not None and lo_p > hi_p:
        raise InvalidInputError("minimum_nprobes must be <= maximum_nprobes")
    # As pylance: nprobes fixes the count unless search_effort is given, which ignores nprobes;
    # otherwise the first round is pylance's Auto count (lance_format.index.vector.probes).
    k = 10 if k is None else k
    probe = Probe(nprobes, nprobes, exact=True, k=k) if nprobes is not None and effort is None \
        else Probe(lo_p or 1, hi_p, effort=effort, k=k)
    metric = nearest.get("metric")
    rng = nearest.get("distance_range")
    if rng is not None and len(rng) != 2:
        raise InvalidInputError("distance_range must be a tuple of (lower_bound, upper_bound)")
    lo, hi = (None, None) if rng is None else rng
    return NearestQuery(column, qa, k, None if metric is None else metric_name(metric), probe,
                        _int(nearest, "refine_factor", 1), bool(nearest.get("use_index", True)), _int(nearest, "ef", 1),
                        (None if lo is None else float(lo), None if hi is None else float(hi)), multi)


def _vector_segments(ctx: ReadContext, column: str) -> list[IndexMetadata]:
    """Segments of a vector kind on ``column`` we can read (newer index versions are left alone,
    as pylance's ``retain_supported_indices`` does)."""
    field_id = ctx.schema.field(column).id
    out = []
    for m in manifest_indices(ctx.manifest):
        kind = registry.for_segment(m)
        if kind is not None and kind.family == "vector" and kind.understands(m) \
                and m.fields[:1] == (field_id,) and m.fragment_bitmap is not None:
            out.append(m)
    return out


def _segment(ctx: ReadContext, meta: IndexMetadata) -> IvfSegment:
    store = ctx.store if meta.base_id is None else ctx._base_store(meta.base_id, "")
    key = (store.uri(""), meta.uuid)
    seg = _SEGMENTS.get(key)
    if seg is None:  # segments are immutable: one read per process serves every version
        seg = read_segment(IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()}),
                           graph=False,  # scored exhaustively (index/vector/search.py): no graph walk
                           lazy=True)  # codes read per partition as queries probe them
        if len(_SEGMENTS) >= _SEGMENT_CACHE:
            _SEGMENTS.pop(next(iter(_SEGMENTS)))
        _SEGMENTS[key] = seg
    return seg


def _addresses(ctx: ReadContext, ids: U64) -> tuple[U64, npt.NDArray[np.bool_]]:
    """Stable row ids → current row addresses (with which ids still exist)."""
    keys, vals = [], []
    for f in ctx.manifest.fragments:
        rid = ctx.row_ids(f)
        if rid is not None:
            keys.append(rid.astype(np.uint64))
            vals.append((np.uint64(f.id) << np.uint64(32)) | np.arange(rid.size, dtype=np.uint64))
    k = np.concatenate(keys) if keys else np.empty(0, np.uint64)
    v = np.concatenate(vals) if vals else np.empty(0, np.uint64)
    order = np.argsort(k, kind="stable")
    k, v = k[order], v[order]
    pos = np.minimum(np.searchsorted(k, ids), max(k.size - 1, 0))
    found = (k[pos] == ids) if k.size else np.zeros(ids.size, bool)
    return np.where(found, v[pos] if k.size else ids, 0).astype(np.uint64), found


def _stable_ids(ctx: ReadContext, addrs: U64) -> U64:
    """The stable row id of each row address."""
    out = np.zeros(addrs.size, np.uint64)
    frag_of = addrs >> np.uint64(32)
    for fid in np.unique(frag_of).tolist():
        frag = ctx.manifest.fragment(int(fid))
        ids = None if frag is None else ctx.row_ids(frag)
        if ids is not None:
            hit = frag_of == fid
            out[hit] = ids[(addrs[hit] & np.uint64(0xFFFFFFFF)).astype(np.int64)]
    return out


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
        cache = _state(self._ctx).plans
        key = (query.column, query.use_index, query.metric)
        hit = cache.get(key)
        if hit is None:
            hit = self._plan_index()
            check_metric(hit[1], self._element, query.column)  # before a row is read, and never cached
            cache[key] = hit
        return hit

    def _plan_index(self) -> tuple[list[IndexMetadata], Metric, frozenset[int]]:
        query = self._query
        segs = _vector_segments(self._ctx, query.column) if query.use_index else []
        if segs:
            index_metric = decode_vector_details(segs[0].index_details.value).metric \
                if segs[0].index_details is not None else "l2"
            if query.metric is not None and query.metric != index_metric:
                segs = []  # pylance falls back to a brute-force search for another metric
            else:
                live = frozenset(f.id for f in self._ctx.manifest.fragments)
                reuse = self._reuse()
                covered: set[int] = set()
                for m in segs:
                    assert m.fragment_bitmap is not None
                    bitmap = m.fragment_bitmap
                    if reuse and not self._ctx.manifest.uses_stable_row_ids:
                        bitmap = frag_reuse.covered_after(bitmap, reuse, m.dataset_version)
                    covered |= bitmap
                return segs, index_metric, frozenset(covered) & live
        return [], query.metric or default_metric(self._element), frozenset()

    def _reuse(self) -> tuple[frag_reuse.ReuseVersion, ...]:
        st = _state(self._ctx)
        if st.reuse is None:
            entries = [m for m in manifest_indices(self._ctx.manifest) if m.name == FRAG_REUSE_INDEX]
            st.reuse = frag_reuse.decode_details(entries[-1], self._ctx.store) if entries else ()
        return st.reuse

    def _frags(self) -> list[Any]:
        return self._opts.fragments if self._opts.fragments is not None else list(self._ctx.manifest.fragments)

    def _live(self, addrs: U64, frags: list[Any]) -> npt.NDArray[np.bool_]:
        """Which addresses are live rows of ``frags``."""
        ids = np.fromiter((f.id for f in frags), np.uint64, len(frags))
        ok = np.isin(addrs >> np.uint64(32), ids)
        dead = [(np.uint64(f.id) << np.uint64(32)) | self._ctx.deleted_offsets(f).astype(np.uint64) for f in frags]
        if dead:
            ok &= ~np.isin(addrs, np.concatenate(dead))
        return ok

    def _segment_rows(self, meta: IndexMetadata, seg: IvfSegment, frags: list[Any]) -> tuple[U64, npt.NDArray[np.bool_]]:
        """The segment's rows as current row addresses, and which of them are live rows of ``frags``
        (computed once per dataset version and segment: it depends only on the manifest)."""
        cache = _state(self._ctx).usable
        key = (meta.uuid, tuple(f.id for f in frags))
        hit = cache.get(key)
        if hit is not None:
            return hit
        reuse = self._reuse()
        if not registry.stores_addresses(meta, self._ctx.manifest.uses_stable_row_ids):
            addrs, ok = _addresses(self._ctx, seg.row_ids)
        elif reuse:
            moved, keep = frag_reuse.remap_through(seg.row_ids, reuse, meta.dataset_version)
            addrs, ok = np.zeros(seg.row_ids.size, np.uint64), keep
            addrs[keep] = moved
        else:
            addrs, ok = seg.row_ids, np.ones(seg.row_ids.size, bool)
        ok = ok & self._live(addrs, frags)
        ok.flags.writeable = False  # shared by later queries
        cache[key] = (addrs, ok)
        return addrs, ok

    def _positions(self, meta: IndexMetadata, addrs: U64, mask: RowMask) -> npt.NDArray[np.int64]:
        """Where each segment row sits in a prefilter mask's layout (once per version and segment)."""
        cache = _state(self._ctx).positions
        key = (meta.uuid, mask.fragments)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = mask.positions(addrs)
        return hit

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
        mask = None  # the rows the prefilter keeps, evaluated once per fragment and version
        if self._prefilter and self._opts.filter is not None:
            mask = prefilter_mask(self._ctx, frags, self._opts.filter, self._opts.filter_sql)
        opened = []
        for meta in segs:
            seg = _segment(self._ctx, meta)
            addrs, ok = self._segment_rows(meta, seg, frags)
            if mask is not None:  # rows outside ``frags`` (position -1) are not ``ok`` already
                ok = ok & mask.flags[np.maximum(self._positions(meta, addrs, mask), 0)]
            exact = isinstance(seg.storage, RQStorage) and seg.metric == "dot"  # no dot estimate (search.py)
            opened.append((seg, addrs, ok, self._exact_scorer(addrs, ok) if exact else None))
        out = []
        for q in queries:
            out_a, out_d = [], []
            for seg, addrs, ok, score in opened:
                rows, dist = search_segment(seg, q, k, query.probe, ok.__getitem__, query.distance_range, score,
                                            best_per_row=query.multi and "HNSW" in seg.index_type)
                out_a.append(addrs[rows])
                out_d.append(dist)
            a = np.concatenate(out_a) if out_a else np.empty(0, np.uint64)
            d = np.concatenate(out_d) if out_d else np.empty(0, np.float32)
            pick = top_k(d, a, k)
            out.append((a[pick], d[pick]))
        return out

    def _exact_scorer(self, addrs: U64, ok: npt.NDArray[np.bool_]) -> Scorer:
        """Exact distances read from the data, for storage we cannot score (IVF_RQ's RaBitQ codes:
        their packed layout is not implemented). The probed partitions still decide the candidates,
        so results are those of an exact re-rank of every probed row."""
        metric = self._metric

        def score(parts: npt.NDArray[np.int64], rows: list[npt.NDArray[np.int64]]) -> F32:
            flat_rows = np.concatenate(rows) if rows else np.empty(0, np.int64)
            out = np.full(flat_rows.size, np.nan, np.float32)
            live = ok[flat_rows]
            out[live] = self._exact(addrs[flat_rows[live]], metric)
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
            a = batch.column(ROW_ADDR).to_numpy().astype(np.uint64)
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
        table = table.append_column(pa.field(DISTANCE, pa.float32()), pa.array(dist, pa.float32()))
        ids = _stable_ids(self._ctx, addrs) if self._ctx.manifest.uses_stable_row_ids else addrs
        if ids.size > 1:  # ties are ordered by _rowid, as pylance's TopK
            order = np.lexsort((ids, dist))
            if (np.diff(order) != 1).any():  # usually in order already (not with stable row ids)
                table, ids, addrs = table.take(pa.array(order)), ids[order], addrs[order]
        table = table.append_column(ROW_ID, pa.array(ids, pa.uint64())).append_column(
            ROW_ADDR, pa.array(addrs, pa.uint64()))
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
        query, opts = self._query, self._opts
        segs, metric, covered = self._index()
        rest = [f for f in self._frags() if f.id not in covered]
        k, uri = query.k, self._ctx.store.uri("data")
        filt = None if opts.filter is None else (opts.filter_sql or str(opts.filter))
        topk = "SortExec: TopK(fetch={}), expr=[_distance ASC NULLS LAST, _rowid ASC NULLS LAST]"
        lines: list[tuple[int, str]] = []

        def ann(depth: int, fetch: int) -> None:
            if query.multi:  # one index search per query vector, scored together (search/multivector.py)
                lines.append((depth, topk.format(fetch)))
                lines.append((depth + 1, f"MultivectorScoring: k={k}"))
                for _ in range(len(query.q)):
                    ann_one(depth + 2, multivector.per_query_k(k))
            else:
                ann_one(depth, fetch)

        def ann_one(depth: int, fetch: int) -> None:
            name = segs[0].name
            lines.append((depth, topk.format(fetch)))
            lines.append((depth + 1, f"ANNSubIndex: name={name}, k={fetch}, deltas={len(segs)}, metric={metric.upper()}"))
            p = query.probe
            lines.append((depth + 2, f"ANNIvfPartition: uuid={segs[0].uuid}, minimum_nprobes={p.minimum}, "
                                     f"maximum_nprobes={p.maximum}, deltas={len(segs)}"))
            if self._prefilter and filt is not None:
                lines.append((depth + 2, f"LanceRead: uri={uri}, projection=[], num_fragments={len(covered)}, "
                                         f"row_id=true, full_filter={filt}"))

        def flat(depth: int, frags: int) -> None:
            lines.append((depth, f"KNNVectorDistance: metric={metric}"))
            pre = filt if (self._prefilter and filt is not None) else "--"
            lines.append((depth + 1, f"LanceRead: uri={uri}, projection=[{query.column}], num_fragments={frags}, "
                                     f"row_id=true, full_filter={pre}"))

        proj = ", ".join([*opts.columns, DISTANCE])
        lines.append((0, f"ProjectionExec: expr=[{proj}]"))
        depth = 1
        if opts.limit is not None or opts.offset:
            lines.append((depth, f"GlobalLimitExec: skip={opts.offset}, fetch={opts.limit}"))
            depth += 1
        if filt is not None and not self._prefilter:
            lines.append((depth, f"FilterExec: {filt}"))
            depth += 1
        lines.append((depth, f"LanceRead: uri={uri}, projection=[{', '.join(opts.columns)}], source=stream(_rowid)"))
        depth += 1
        if not segs:
            lines.append((depth, topk.format(k)))
            flat(depth + 1, len(rest))
        elif query.refine_factor is None and not rest:
            ann(depth, k)
        else:
            lines.append((depth, topk.format(k)))
            lines.append((depth + 1, f"KNNVectorDistance: metric={metric}"))
            if rest:
                lines.append((depth + 2, "UnionExec"))
                flat(depth + 3, len(rest))
                ann(depth + 3, k * (query.refine_factor or 1))
            else:
                lines.append((depth + 2, f"LanceRead: uri={uri}, projection=[{query.column}], source=stream(_rowid)"))
                ann(depth + 3, k * query.refine_factor)  # type: ignore[operator]
        return "\n".join("  " * d + text for d, text in lines) + "\n"

