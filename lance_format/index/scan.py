"""Using scalar indices in a scan, and saying so in ``explain_plan``.

For a SQL filter, :func:`index_plan` asks the indices for candidate row addresses
(:mod:`lance_format.index.query`), remaps them through ``__lance_frag_reuse`` when a
compaction deferred remapping, and turns stable row ids into addresses. Fragments
every used index covers are then read only at those rows (deleted rows dropped, the
full filter applied to what is fetched: first on the filter's own columns, then the other
projected columns are taken at the rows it keeps); every other fragment is scanned as usual.

A damaged index file must not answer other rows: each segment checks what a query reads
(``btree`` / ``bitmap``: pages against their lookup, ids against the rows the segment
covers), and every fetched candidate must hold a value the index said it holds (an index
row is a copy of the row's value): a row an index claims for ``a = 3`` that holds 4 is a
damaged index, refused with a ``CorruptFileError`` naming its file. Rows missing from a
damaged index can only be caught where the damage breaks such a rule.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import CorruptFileError
from lance_format.index import frag_reuse, registry
from lance_format.index._compat import manifest_indices
from lance_format.index.btree import arrow_ints, ints, same_values
from lance_format.index.candidate_scan import (
    dense_spans,  # noqa: F401  # re-exported (tests)
    indexed_batches,
    live_candidates,
)
from lance_format.index.fastplan import FastAnd, FastExpr, FastLeaf, Unknown, plan_simple, plan_whole
from lance_format.index.kind import ColumnIndex, IndexedColumns, ValueReader
from lance_format.index.models import FRAG_REUSE_INDEX
from lance_format.index.predicates import Range
from lance_format.index.range_scan import (
    TAKE_SCAN,  # noqa: F401  # re-exported: the cache kind of kept readers
    count_ranges,
    live_rows,
)
from lance_format.index.registry import stores_addresses
from lance_format.index.row_ranges import RowRanges, combine
from lance_format.index.rowset import RowDomain, fragment_of, offset_of
from lance_format.index.store import IndexDir
from lance_format.index.zonemap import intersect_ranges
from lance_format.session import CacheKind
from lance_format.table.index_metadata import IndexMetadata

if TYPE_CHECKING:
    # lance_format.index.query imports sqlglot (~0.3-0.5 s): a scan without a filter never needs it
    from lance_format.index.query import IndexExpr, Leaf
    from lance_format.table.read import ReadContext
    from lance_format.table.scan import Scan

U64 = npt.NDArray[np.uint64]
_OPENED: weakref.WeakKeyDictionary[Any, dict[str, ValueReader]] = weakref.WeakKeyDictionary()
#: Per read context: its live fragment ids and decoded ``__lance_frag_reuse`` entry (see :class:`_Evaluator`).
_VERSION_STATE: weakref.WeakKeyDictionary[Any, tuple[Any, frozenset[int], tuple[Any, ...]]] = weakref.WeakKeyDictionary()
#: Opened segments by (dataset URI, segment directory URI, dataset version), in the session's index cache.
OPENED_SEGMENT: CacheKind[ValueReader] = CacheKind("scalar_segment")
#: :func:`usable_indices` by (dataset URI, version), with the manifest they were found in: every
#: handle on a version shares its manifest (the session's), and a long-lived process opens one
#: per request (~5% of a warm indexed query); a dataset recreated in place has a new manifest.
USABLE_INDICES: CacheKind[Any] = CacheKind("usable_indices")


@dataclass(frozen=True)
class Claim:
    """Rows one segment returned for one predicate, with the value it holds for each."""

    leaf: Leaf | FastLeaf
    where: str  # the segment's file, for the error
    addrs: U64  # sorted row addresses
    values: pa.Array  # the index's value of each row (aligned with ``addrs``)


@dataclass(frozen=True)
class IndexPlan:
    """Index answer for one scan: fragments it covers and the candidate rows in them."""

    expr: IndexExpr | FastExpr
    covered: frozenset[int]
    addrs: U64  # sorted row addresses inside ``covered``
    claims: tuple[Claim, ...] = ()
    hit: frozenset[int] = frozenset()  # the fragments holding at least one candidate
    #: The candidates as row ranges instead of ``addrs`` (indices answering in zones: ZONEMAP, BLOOMFILTER)
    ranges: RowRanges | None = None

    def offsets(self, frag_id: int) -> npt.NDArray[np.uint32]:
        """Candidate row offsets of fragment ``frag_id`` (sorted)."""
        key = np.uint64(frag_id) << np.uint64(32)
        if self.ranges is not None:
            lo, hi = self.ranges.of_fragment(frag_id)
            return offset_of(RowRanges(lo.astype(np.uint64) + key, hi.astype(np.uint64) + key).addresses())
        lo, hi = np.searchsorted(self.addrs, [key, key + np.uint64(1 << 32)])
        return offset_of(self.addrs[lo:hi])

    def check(self, batch: pa.RecordBatch, addrs: U64) -> None:
        """Refuse fetched candidate rows (``batch``, at ``addrs``) whose values an index misstated.

        An index row is a copy of its row's value, so a fetched row must hold exactly the value
        the segment returned it with (equal, both null, or both NaN).

        Raises:
            CorruptFileError: a row holds another value than the segment says.
        """
        for claim in self.claims:
            if claim.addrs.size == 0 or claim.leaf.column not in batch.schema.names:
                continue
            pos = np.minimum(np.searchsorted(claim.addrs, addrs), claim.addrs.size - 1)
            mine = claim.addrs[pos] == addrs
            if not mine.any():
                continue
            if _same_integers(batch.column(claim.leaf.column), claim.values, mine, pos):
                continue  # the common case in numpy: Arrow's filter/take cost ~30 us a call
            actual = batch.column(claim.leaf.column).take(arrow_ints(np.flatnonzero(mine)))  # no pandas import
            said = claim.values.take(arrow_ints(pos[mine]))
            ok = same_values(actual, said)
            if not ok.all():
                bad = int(np.flatnonzero(~ok)[0])
                addr = int(addrs[np.flatnonzero(mine)[bad]])
                raise CorruptFileError(
                    f"{claim.where}: the index returned row {addr >> 32}:{addr & 0xFFFFFFFF} for "
                    f"{claim.leaf.query.describe(claim.leaf.column)} as holding {said[bad].as_py()!r}, "
                    f"but the row holds {actual[bad].as_py()!r}")


def _same_integers(column: pa.Array, said: pa.Array, mine: npt.NDArray[np.bool_], pos: npt.NDArray[np.intp]) -> bool:
    """Whether integer ``column`` rows ``mine`` hold ``said[pos[mine]]`` (False: not such columns, or a
    difference, which :meth:`IndexPlan.check` then reports)."""
    if column.type != said.type or not pa.types.is_integer(column.type) or column.null_count or said.null_count:
        return False
    actual = ints(column)  # to_numpy would import pandas on a first query
    return bool((actual[mine] == ints(said)[pos[mine]]).all())


def usable_indices(ctx: ReadContext) -> IndexedColumns:
    """Indices answering scan filters, by column: segments of a queryable scalar kind we can read."""
    key = (ctx.store.uri(""), ctx.manifest.version)
    cache = ctx.store.session.index_cache
    found = cache.get(USABLE_INDICES, key)
    if found is not None and found[0]() is ctx.manifest:
        out: IndexedColumns = found[1]
        return out
    out = _usable_indices(ctx)
    cache.put(USABLE_INDICES, key, (weakref.ref(ctx.manifest), out), 1024 + 512 * len(ctx.manifest.indices or ()))
    return out


def _usable_indices(ctx: ReadContext) -> IndexedColumns:
    by_name: dict[str, list[IndexMetadata]] = {}
    for m in manifest_indices(ctx.manifest):
        if registry.family_of(m) not in ("scalar", "text"):
            continue  # vector and system segments never answer a filter: their kinds stay unimported
        kind = registry.for_segment(m)
        # value kinds answer filters; a text kind (INVERTED) contains_tokens() when its analyzer suits it
        if kind is not None and kind.answers_filters(m) \
                and kind.queryable and kind.understands(m) and len(m.fields) == 1 and m.fragment_bitmap is not None:
            by_name.setdefault(m.name, []).append(m)
    found: dict[str, list[ColumnIndex]] = {}
    for name, segs in sorted(by_name.items()):
        field_id = segs[0].fields[0]
        col = next((f.name for f in ctx.schema.fields if f.id == field_id), None)
        kind = registry.for_segment(segs[0])
        if col is not None and kind is not None and all(registry.for_segment(s) is kind for s in segs):
            found.setdefault(col, []).append(ColumnIndex(name, kind, tuple(segs)))
    # Exact kinds first: a value predicate goes to a BTREE before a ZONEMAP on the same column.
    return {col: tuple(sorted(choices, key=lambda c: not c.kind.exact)) for col, choices in found.items()}


def row_domain(manifest: Any, meta: IndexMetadata,
               reuse: tuple[frag_reuse.ReuseVersion, ...] = ()) -> RowDomain:
    """The ids segment ``meta`` may hold in the dataset version of ``manifest``.

    A compaction that deferred remapping leaves the segment's addresses in the fragments it
    rewrote (``reuse``, the ``__lance_frag_reuse`` entry), while pylance already moves the
    fragment bitmap to the new fragments: those old fragments count as covered too.
    """
    rows = {f.id: f.physical_rows for f in manifest.fragments}
    stable = manifest.uses_stable_row_ids
    covered = meta.fragment_bitmap
    if covered is not None and reuse:
        covered = covered | frozenset(f.id for v in reuse if v.dataset_version >= meta.dataset_version
                                      for g in v.groups for f in g.old_fragments)
    if stores_addresses(meta, stable):
        return RowDomain(covered, rows.get)
    return RowDomain(covered, rows.get, next_row_id=int(manifest.next_row_id))


def _open(ctx: ReadContext, meta: IndexMetadata,
          reuse: tuple[frag_reuse.ReuseVersion, ...] = ()) -> ValueReader:
    """The opened segment ``meta`` for the dataset version of ``ctx``.

    Cached per read context, and in the session's index cache by (segment directory, dataset
    version) for readers that report their size (``nbytes``): another handle on the same
    version, as a long-lived process opens for each request, skips reading and checking the
    segment's lookup again. The version is part of the key because the rows a segment may
    hold (its :class:`RowDomain`) come from the manifest.
    """
    cache = _OPENED.setdefault(ctx, {})
    found = cache.get(meta.uuid)
    if found is not None:
        return found
    store = ctx.store if meta.base_id is None else ctx._base_store(meta.base_id, "")
    index_dir = IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()})
    # the dataset's own root too: branches number their versions apart and may share a segment
    key = (ctx.store.uri(""), store.uri(index_dir.prefix), ctx.manifest.version)
    shared = store.session.index_cache
    found = shared.get(OPENED_SEGMENT, key)
    if found is None:
        kind = registry.for_segment(meta)
        assert kind is not None  # usable_indices only lists known kinds
        found = cast("ValueReader", kind.open(index_dir, meta, row_domain(ctx.manifest, meta, reuse)))
        size = getattr(found, "nbytes", None)
        if isinstance(size, int):  # other kinds' readers may hold data of unknown size
            shared.put(OPENED_SEGMENT, key, found, size)
    cache[meta.uuid] = found
    return found


class _Evaluator:
    def __init__(self, ctx: ReadContext, indexed: IndexedColumns):
        self.ctx = ctx
        self.indexed = indexed
        known = _VERSION_STATE.get(ctx)
        if known is None or known[0] is not ctx.manifest:  # the same for every query on the version
            reuse = [m for m in manifest_indices(ctx.manifest) if m.name == FRAG_REUSE_INDEX]
            known = (ctx.manifest, frozenset(f.id for f in ctx.manifest.fragments),
                     tuple(frag_reuse.decode_details(reuse[-1], ctx.store)) if reuse else ())
            _VERSION_STATE[ctx] = known
        _, self.live, self.reuse = known
        self.claims: list[Claim] = []

    def to_addresses(self, ids: U64) -> tuple[U64, npt.NDArray[np.bool_]]:
        """Stable row ids → row addresses (identity without stable row ids).

        Returns:
            ``(addresses, found)``: addresses of the ids still in the dataset, in input order,
            and which inputs those are.
        """
        if not self.ctx.manifest.uses_stable_row_ids:
            return ids, np.ones(ids.size, dtype=bool)
        k, v = self.ctx.stable_address_map()
        pos = np.searchsorted(k, ids)
        pos_c = np.minimum(pos, max(k.size - 1, 0))
        found = (pos < k.size) & (k[pos_c] == ids) if k.size else np.zeros(ids.size, bool)
        out: U64 = v[pos_c[found]]
        return out, found

    def leaf(self, leaf: Leaf | FastLeaf) -> tuple[frozenset[int], U64 | RowRanges]:
        covered: set[int] = set()
        parts: list[U64] = []
        spans: list[RowRanges] = []
        choice = next(c for c in self.indexed[leaf.column] if c.name == leaf.index_name)
        # a compaction's deferred remap moves rows one by one: such segments answer addresses
        remapped = bool(self.reuse) and not self.ctx.manifest.uses_stable_row_ids
        for seg in choice.segments:
            assert seg.fragment_bitmap is not None
            index = _open(self.ctx, seg, tuple(self.reuse))
            search_ranges = getattr(index, "search_ranges", None)
            if search_ranges is not None and not remapped and not choice.kind.exact:
                spans.append(search_ranges(leaf.query))  # zones as row ranges: no address per row
                covered |= seg.fragment_bitmap
                continue
            addrs, values = index.search_values(leaf.query)  # sorted, unique
            moved = False
            if not stores_addresses(seg, self.ctx.manifest.uses_stable_row_ids):
                addrs, keep = self.to_addresses(addrs)
                values, moved = values.take(arrow_ints(np.flatnonzero(keep))), True
            cov = seg.fragment_bitmap
            if self.reuse and not self.ctx.manifest.uses_stable_row_ids:
                addrs, keep = frag_reuse.remap_through(addrs, self.reuse, seg.dataset_version)
                values, moved = values.take(arrow_ints(np.flatnonzero(keep))), True
                cov = frag_reuse.covered_after(cov, self.reuse, seg.dataset_version)
            if moved:
                order = np.argsort(addrs, kind="stable")
                addrs, values = addrs[order], values.take(arrow_ints(order))
            covered |= cov
            parts.append(addrs)
            if choice.kind.exact:  # an inexact kind's candidates carry no values to check rows against
                self.claims.append(Claim(leaf, index.path, addrs, values))
        if spans:
            if parts:  # not expected (one kind per index): every segment as addresses then
                parts.extend(r.addresses() for r in spans)
            else:
                return frozenset(covered) & self.live, combine(spans, all_of=False)
        if len(parts) == 1:
            return frozenset(covered) & self.live, parts[0]
        return frozenset(covered) & self.live, np.unique(np.concatenate(parts)) if parts else np.empty(0, np.uint64)

    def _merged_ranges(self, children: Any) -> list[Any]:
        """Ranges ANDed on one column of an inexact kind (ZONEMAP) as one leaf: one zone pass, no intersection."""
        out: list[Any] = []
        at: dict[tuple[str, str], int] = {}
        for c in children:
            key = (getattr(c, "column", ""), getattr(c, "index_name", ""))
            if not (isinstance(getattr(c, "query", None), Range) and not self._exact(c)):
                out.append(c)
            elif key in at:
                out[at[key]] = dataclasses.replace(out[at[key]], query=intersect_ranges(out[at[key]].query, c.query))
            else:
                at[key] = len(out)
                out.append(c)
        return out

    def _exact(self, leaf: Any) -> bool:
        return bool(next(c for c in self.indexed[leaf.column] if c.name == leaf.index_name).kind.exact)

    def eval(self, expr: IndexExpr | FastExpr) -> tuple[frozenset[int], U64 | RowRanges]:
        if isinstance(expr, FastLeaf):
            return self.leaf(expr)
        if isinstance(expr, FastAnd):
            conjunction = True
        else:  # a plan of the full parser: its module is loaded already
            from lance_format.index.query import AndExpr, Leaf

            if isinstance(expr, Leaf):
                return self.leaf(expr)
            conjunction = isinstance(expr, AndExpr)
        children = self._merged_ranges(expr.children) if conjunction else expr.children
        results = [self.eval(c) for c in children]
        if len(results) == 1:  # ranges merged into one leaf: its rows stand (callers drop uncovered ones)
            return results[0]
        covered = frozenset.intersection(*(r[0] for r in results))
        ranged = [r[1].within(covered) for r in results if isinstance(r[1], RowRanges)]
        listed = [r[1] for r in results if not isinstance(r[1], RowRanges)]
        if not listed:  # zones and zones: combined as ranges
            return covered, combine(ranged, all_of=conjunction)
        if not conjunction:
            listed.extend(r.addresses() for r in ranged)
        keep = [a[np.isin(fragment_of(a), np.fromiter(covered, np.uint64, len(covered)))] for a in listed]
        if conjunction:
            out = keep[0]
            for k in keep[1:]:
                out = np.intersect1d(out, k, assume_unique=True)
            for r in ranged:  # rows also inside the zones of the inexact terms
                out = out[r.contains(out)]
            return covered, out
        return covered, np.unique(np.concatenate(keep))


def index_plan(ctx: ReadContext, filter_sql: str | None) -> IndexPlan | None:
    """Candidate rows for ``filter_sql`` from the dataset's indices, or ``None`` if none apply."""
    if not filter_sql or not ctx.manifest.indices:
        return None
    indexed = usable_indices(ctx)
    expr: IndexExpr | FastExpr | None | Unknown = plan_simple(filter_sql, ctx.arrow_schema, indexed)
    if isinstance(expr, Unknown):  # beyond the common shapes: the full parser (imports sqlglot)
        from lance_format.index.query import parse_index_expr

        expr = parse_index_expr(filter_sql, ctx.arrow_schema, indexed)
    if expr is None:
        return None
    return _evaluate(ctx, expr, indexed)


def _evaluate(ctx: ReadContext, expr: IndexExpr | FastExpr, indexed: IndexedColumns) -> IndexPlan:
    evaluator = _Evaluator(ctx, indexed)
    covered, found = evaluator.eval(expr)
    if isinstance(found, RowRanges):
        ranges = found.within(covered)
        return IndexPlan(expr, covered, np.empty(0, np.uint64), tuple(evaluator.claims),
                         frozenset(ranges.fragments()), ranges)
    addrs = found
    if addrs.size > 1 and not bool((addrs[1:] >= addrs[:-1]).all()):  # leaves answer in order already
        addrs = np.sort(addrs)
    # sorted: each fragment's candidates are one run, so membership is checked once per fragment
    frags = fragment_of(addrs)
    present = frags[np.flatnonzero(np.concatenate(([True], frags[1:] != frags[:-1])))].tolist() \
        if frags.size else []
    outside = [f for f in present if f not in covered]
    if outside:
        addrs = addrs[~np.isin(frags, np.array(outside, np.uint64))]
    return IndexPlan(expr, covered, addrs, tuple(evaluator.claims), frozenset(present) - frozenset(outside))


def count_from_index(scanner: Scan, frags: list[Any]) -> int | None:
    """Rows of ``frags`` matching the scan's SQL filter, counted without reading indexed rows.

    When exact indices (BTREE, BITMAP…) answer every term of the filter: their rows are
    then the matching rows, so a covered fragment counts its live candidates; fragments no
    segment covers are scanned with the filter. When the index answers in row ranges (ZONEMAP,
    BLOOMFILTER), each covered fragment's ranges are read on the filter's columns only and
    counted. ``None`` (read the rows) for anything else: a term no index answers, other inexact
    kinds (their candidates must be re-checked), a row range.

    Raises:
        CorruptFileError: an index names a row past the end of its fragment.
    """
    ctx, opts = scanner._ctx, scanner._opts
    if not opts.filter_sql or opts.row_range is not None or not ctx.manifest.indices:
        return None
    indexed = usable_indices(ctx)
    expr = plan_whole(opts.filter_sql, ctx.arrow_schema, indexed)
    leaves = () if expr is None else expr.children if isinstance(expr, FastAnd) else (expr,)
    if expr is None or not all(_counts_exactly(indexed, leaf, ctx.arrow_schema.field(leaf.column).type)
                               for leaf in leaves):
        return _count_ranges(scanner, frags)
    plan = _evaluate(ctx, expr, indexed)
    total = 0
    rest: list[Any] = []
    for frag in frags:
        if frag.id not in plan.covered:
            rest.append(frag)
            continue
        if frag.id not in plan.hit:
            continue
        offsets = live_candidates(ctx, frag, plan)
        total += int(offsets.size)
    if rest:
        total += sum(b.num_rows for b in _plain(scanner, rest))
    return total


def _count_ranges(scanner: Scan, frags: list[Any]) -> int | None:
    """:func:`count_from_index` for an index answering in row ranges; ``None`` for any other plan."""
    counted = _count_whole_zones(scanner, frags)
    if counted is not None:
        return counted
    if any(not c.kind.exact for cs in usable_indices(scanner._ctx).values() for c in cs):
        plan = index_plan(scanner._ctx, scanner._opts.filter_sql)  # only inexact kinds answer in ranges
    else:
        plan = None
    if plan is None or plan.ranges is None:
        return None
    total = 0
    rest: list[Any] = []
    for frag in frags:
        if frag.id not in plan.covered:
            rest.append(frag)
        elif frag.id in plan.hit:
            total += count_ranges(scanner, frag, plan.ranges)
    if rest:
        total += sum(b.num_rows for b in _plain(scanner, rest))
    return total


def _count_whole_zones(scanner: Scan, frags: list[Any]) -> int | None:
    """A count whose whole filter is one range on a ZONEMAP column: zones lying inside the range
    with no null or NaN count their live rows unread; only the others are read. ``None`` otherwise."""
    ctx, opts = scanner._ctx, scanner._opts
    indexed = usable_indices(ctx)
    expr = plan_whole(opts.filter_sql or "", ctx.arrow_schema, indexed)
    leaves = () if expr is None else expr.children if isinstance(expr, FastAnd) else (expr,)
    if not leaves or not all(isinstance(x, FastLeaf) and isinstance(x.query, Range) for x in leaves) \
            or len({(x.column, x.index_name) for x in leaves}) != 1:
        return None
    evaluator = _Evaluator(ctx, indexed)
    if evaluator.reuse and not ctx.manifest.uses_stable_row_ids:
        return None  # segments awaiting a deferred remap answer row by row
    leaf = evaluator._merged_ranges(leaves)[0]
    choice = next(c for c in indexed[leaf.column] if c.name == leaf.index_name)
    sure: list[RowRanges] = []
    unsure: list[RowRanges] = []
    covered: set[int] = set()
    for seg in choice.segments:
        assert seg.fragment_bitmap is not None
        split = getattr(_open(ctx, seg, tuple(evaluator.reuse)), "search_split", None)
        found = split(leaf.query) if split is not None else None
        if found is None:
            return None
        sure.append(found[0])
        unsure.append(found[1])
        covered |= seg.fragment_bitmap
    live = frozenset(covered) & evaluator.live
    whole, rest_ranges = combine(sure, all_of=False).within(live), combine(unsure, all_of=False).within(live)
    if whole.size and (len(choice.segments) > 1 or rest_ranges.size) \
            and combine([whole, rest_ranges], all_of=True).size:
        return None  # zones overlapping each other (not as written): no row may count twice
    total = 0
    rest: list[Any] = []
    inside, hit = frozenset(whole.fragments()), frozenset(rest_ranges.fragments())
    for frag in frags:
        if frag.id not in live:
            rest.append(frag)
            continue
        if frag.id in inside:
            total += live_rows(ctx, frag, whole)
        if frag.id in hit:
            total += count_ranges(scanner, frag, rest_ranges)
    if rest:
        total += sum(b.num_rows for b in _plain(scanner, rest))
    return total


def _counts_exactly(indexed: IndexedColumns, leaf: FastLeaf, typ: pa.DataType) -> bool:
    """Whether ``leaf``'s candidates are exactly its matching rows: an exact kind on a column whose
    values compare as in SQL (not floats: a float BTREE hands NaN rows to the filter)."""
    t = pa.types
    plain = t.is_integer(typ) or t.is_string(typ) or t.is_large_string(typ) or t.is_date(typ) \
        or t.is_timestamp(typ) or t.is_boolean(typ)
    return plain and bool(next(c for c in indexed[leaf.column] if c.name == leaf.index_name).kind.exact)


def scan_batches(scanner: Scan, frags: list[Any]) -> Iterator[pa.RecordBatch]:
    """The scan's batches, fragment by fragment, using the index where it covers a fragment."""
    plan = index_plan(scanner._ctx, scanner._opts.filter_sql)
    run: list[Any] = []
    for frag in frags:
        if plan is None or frag.id not in plan.covered:
            run.append(frag)
            continue
        if frag.id not in plan.hit:  # most fragments of a selective query: nothing to look up or read
            continue
        if run:
            yield from _plain(scanner, run)
            run = []
        yield from indexed_batches(scanner, frag, plan)
    if run:
        yield from _plain(scanner, run)


def _plain(scanner: Scan, frags: list[Any]) -> Iterator[pa.RecordBatch]:
    for prepared in scanner._prefetch(frags):
        yield from scanner._fragment_batches(prepared)


def explain(scanner: Scan) -> str:
    """A plan description in pylance's words: ``ScalarIndexQuery`` when an index is used."""
    ctx, opts = scanner._ctx, scanner._opts
    frags = opts.fragments if opts.fragments is not None else list(ctx.manifest.fragments)
    cols = ", ".join(scanner._read_columns())
    head = (f"LanceRead: uri={ctx.store.uri('data')}, projection=[{cols}], num_fragments={len(frags)}, "
            f"row_id={str(opts.with_row_id).lower()}, row_addr={str(opts.with_row_address).lower()}, "
            f"full_filter={opts.filter_sql or (str(opts.filter) if opts.filter is not None else '--')}")
    plan = index_plan(ctx, opts.filter_sql)
    if plan is None:
        return head + "\n  (no scalar index used)\n"
    indexed = sum(1 for f in frags if f.id in plan.covered)
    return (head + f", refine_filter={opts.filter_sql}\n  ScalarIndexQuery: query={plan.expr.describe()}\n"
            f"  indexed_fragments={indexed}, unindexed_fragments_scanned={len(frags) - indexed}\n")
