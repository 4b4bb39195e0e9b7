"""``full_text_query=``: BM25 search over pylance's INVERTED indices, merged with a flat search.

The plan pylance 14.0.2 runs (its ``explain_plan``: ``MatchQuery`` over the index unioned with a
``FlatMatchQuery`` over the fragments the index does not cover, sorted by ``_score``):

1. every column the query names needs an INVERTED index; its segments give the analyzer,
   the BM25 statistics and the posting lists (:mod:`lance_format.index.inverted`);
2. rows of live fragments outside the index are read, tokenized and scored with the index's
   statistics (:class:`~lance_format.index.inverted.bm25.FlatDocs`);
3. deleted rows and rows of fragments the index lists as deleted never match; a ``filter=``
   restricts the candidates first (``prefilter=True``) or the top rows afterwards;
4. rows sort by ``_score`` descending (ties by row id ascending), ``limit`` keeps the best, and the
   requested columns are read for those rows only, with ``_score`` (float32) last.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.index import frag_reuse, registry
from lance_format.index._compat import manifest_indices
from lance_format.index.inverted import bm25, topk
from lance_format.index.inverted.bm25 import Corpus, FlatDocs, Hits
from lance_format.index.inverted.files import InvertedFiles, cached_segment
from lance_format.index.inverted.tokenizer import Analyzer, document_texts
from lance_format.index.inverted.unreadable import unreadable_inverted
from lance_format.index.store import IndexDir
from lance_format.scanner import LanceScanner
from lance_format.search import fts_query as q
from lance_format.search.placement import placed
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.read import ROW_ID, FragmentScan, ReadContext
from lance_format.table.scan import ScanOptions

U64 = npt.NDArray[np.uint64]
SCORE = "_score"


def _is_text(meta: IndexMetadata) -> bool:
    kind = registry.for_segment(meta)  # the full-text kinds (INVERTED) are the registry's "text" family
    return kind is not None and kind.family == "text" and kind.understands(meta)


def inverted_segments(ctx: ReadContext, column: str) -> list[IndexMetadata]:
    """The INVERTED segments of ``column`` (all segments of the first such index by name)."""
    field = next((f for f in ctx.schema.fields if f.name == column), None)
    if field is None:
        return []
    segs = [m for m in manifest_indices(ctx.manifest)
            if _is_text(m) and tuple(m.fields) == (field.id,)]
    if not segs:
        return []
    name = segs[0].name
    return [m for m in segs if m.name == name]


def _open(ctx: ReadContext, meta: IndexMetadata) -> InvertedFiles:
    store = ctx.store if meta.base_id is None else ctx._base_store(meta.base_id, "")
    return cached_segment(IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()}))


def _merge(files: list[InvertedFiles]) -> InvertedFiles:
    if len(files) == 1:
        return files[0]
    return InvertedFiles(files[0].params, [p for f in files for p in f.partitions],
                         frozenset().union(*(f.deleted_fragments for f in files)), files[0].metadata)


class FullTextSearch:
    """A ``full_text_query`` scan of one dataset version (``to_table``, ``to_batches``, ``explain_plan``).

    Args:
        ctx: The version's read context.
        query: Any accepted ``full_text_query`` value (see :func:`fts_query.normalize`).
        opts: The scan's columns, filter, limit, offset, fragments and row-id flags.
        prefilter: Apply ``filter`` before ranking (else to the ranked rows).
        fast_search: Search only indexed fragments.
        order: Output column order when ``columns=`` named ``_score`` (see :mod:`.placement`).
    """

    def __init__(self, ctx: ReadContext, query: Any, opts: ScanOptions, *, prefilter: bool = False,
                 fast_search: bool = False, order: Sequence[str] | None = None):
        self._ctx = ctx
        self._opts = opts
        self._prefilter = prefilter
        self._fast = fast_search
        indexed = [c for c in (f.name for f in ctx.schema.fields) if inverted_segments(ctx, c)]
        default = indexed[0] if len(indexed) == 1 else None
        if isinstance(query, str) and len(indexed) > 1:
            query = {"query": query, "columns": indexed}  # pylance: every indexed column
        self.query = q.normalize(query, default)
        cols = q.columns_of(self.query)
        if any(c is None for c in cols):
            why = None if indexed else next(filter(None, (unreadable_inverted(ctx, f.name) for f in ctx.schema.fields)),
                                            None)
            if why is not None:
                raise NotSupportedError(f"full_text_query names no column: {why}")
            raise InvalidInputError(
                "full_text_query names no column and the dataset has "
                f"{'no INVERTED index' if not indexed else 'several: ' + ', '.join(indexed)}; pass columns=")
        self.columns = [c for c in dict.fromkeys(cols) if c is not None]
        for c in self.columns:
            if c not in ctx.arrow_schema.names:
                raise InvalidInputError(f"full_text_query column {c!r} is not in the dataset")
            if not inverted_segments(ctx, c):
                why = unreadable_inverted(ctx, c)
                if why is not None:
                    raise NotSupportedError(f"full-text search on column {c!r}: {why}")
                raise NotSupportedError(f"full-text search on column {c!r} needs an INVERTED index (none found)")
        out_cols = list(opts.columns)
        fields = [ctx.arrow_schema.field(c) for c in out_cols]
        if opts.with_row_id:
            fields.append(pa.field(ROW_ID, pa.uint64()))
        fields.append(pa.field(SCORE, pa.float32()))
        self.schema = placed(pa.schema(fields), order)  # _score where columns= named it

    # -- planning --------------------------------------------------------------------------
    def _fragments(self) -> list[Any]:
        return list(self._opts.fragments) if self._opts.fragments is not None else list(self._ctx.manifest.fragments)

    def _corpus(self, column: str) -> Corpus:
        segs = inverted_segments(self._ctx, column)
        opened = [_open(self._ctx, m) for m in segs]
        reuse = self._reuse()
        stable = self._ctx.manifest.uses_stable_row_ids
        covered: set[int] = set()
        for i, (m, seg) in enumerate(zip(segs, opened, strict=True)):
            bitmap = m.fragment_bitmap or frozenset()
            if reuse and not stable:
                # A compaction that deferred its remap left the index's addresses in the old
                # fragments: move them as readers of ``__lance_frag_reuse`` do; rows deleted
                # before the compaction get an id no live row has.
                bitmap = frag_reuse.covered_after(bitmap, reuse, m.dataset_version)
                parts = []
                for part in seg.partitions:
                    moved, keep = frag_reuse.remap_through(part.row_ids, reuse, m.dataset_version)
                    ids = np.full(part.row_ids.size, np.iinfo(np.uint64).max, dtype=np.uint64)
                    ids[keep] = moved
                    parts.append(part.with_row_ids(ids))
                seg = dataclasses.replace(seg, partitions=parts)
                opened[i] = seg
            covered |= set(bitmap)
        files = _merge(opened)
        analyzer = Analyzer(files.params)
        live = {f.id for f in self._ctx.manifest.fragments}
        flat = None
        missing = [f for f in self._fragments() if f.id not in covered]
        if missing and not self._fast:
            ids, texts = self._read_column(missing, column)
            flat = FlatDocs.build(analyzer, ids, texts, files.params.with_position)
        gone = frozenset((covered - live) | set(files.deleted_fragments))
        return Corpus(files, analyzer, flat, gone, self._ctx.manifest.uses_stable_row_ids)

    def _reuse(self) -> tuple[frag_reuse.ReuseVersion, ...]:
        entry = frag_reuse.current_entry(manifest_indices(self._ctx.manifest))
        return frag_reuse.decode_details(entry, self._ctx.store) if entry is not None else ()

    def _read_column(self, frags: list[Any], column: str) -> tuple[U64, pa.Array]:
        opts = ScanOptions([column], with_row_id=True, fragments=frags)
        table = LanceScanner(self._ctx, opts).to_table()
        return table.column(ROW_ID).to_numpy().astype(np.uint64), document_texts(table.column(column))

    def _needs_live_check(self) -> bool:
        """Whether hits may name rows that are gone: deletion vectors, or stable row ids."""
        return self._ctx.manifest.uses_stable_row_ids or any(
            f.deletion_file is not None for f in self._fragments())

    def _allowed(self, use_filter: bool) -> U64:
        """Row ids of live rows (matching the filter when ``use_filter``)."""
        opts = ScanOptions([], filter=self._opts.filter if use_filter else None, with_row_id=True,
                           fragments=self._opts.fragments, filter_sql=self._opts.filter_sql if use_filter else None)
        table = LanceScanner(self._ctx, opts).to_table()
        return np.sort(table.column(ROW_ID).to_numpy().astype(np.uint64))

    # -- evaluation ------------------------------------------------------------------------
    def _eval(self, query: q.FullTextQuery, corpora: dict[str, Corpus]) -> Hits:
        if isinstance(query, q.MatchQuery):
            corpus = corpora[str(query.column)]
            # A repeated query token counts each time (pylance 14.0.2: "fox fox" weighs fox twice).
            tokens = corpus.analyzer.tokens(query.query)
            corpus.prefetch(tokens)
            if query.fuzziness:  # pylance 14.0.2 treats fuzziness=None as exact, like 0
                # Expansions come from the index's tokens only; un-indexed rows match the query's
                # own tokens (observed: pylance's flat search does not expand).
                expanded = _expand(tokens, corpus.index_vocabulary(), query.fuzziness, query.prefix_length,
                                   query.max_expansions)
                parts = [corpus.term(t, query.boost, flat=False) for t in expanded]
                parts += [corpus.term(t, query.boost, indexed=False) for t in tokens]
            else:
                parts = [corpus.term(t, query.boost) for t in tokens]
            if query.operator == q.FullTextOperator.AND:
                if any(p.ids.size == 0 for p in parts):
                    return Hits.empty()
                return bm25.intersect(parts)
            return bm25.add(parts)
        if isinstance(query, q.PhraseQuery):
            return self._phrase(query, corpora[str(query.column)])
        if isinstance(query, q.MultiMatchQuery):
            boosts = query.boosts or [1.0] * len(query.columns)
            # pylance keeps each row's best column (Elasticsearch's best_fields).
            return bm25.best([self._eval(q.MatchQuery(query.query, c, b, operator=query.operator), corpora)
                              for c, b in zip(query.columns, boosts, strict=True)])
        if isinstance(query, q.BoostQuery):
            pos = self._eval(query.positive, corpora)
            neg = self._eval(query.negative, corpora)
            # pylance subtracts the boosted negative score: ``positive - negative_boost * negative``.
            neg_of = dict(zip(neg.ids.tolist(), neg.scores.tolist(), strict=True))
            minus = np.array([neg_of.get(i, 0.0) for i in pos.ids.tolist()], dtype=np.float32)
            return Hits(pos.ids, (pos.scores - np.float32(query.negative_boost) * minus).astype(np.float32))
        if isinstance(query, q.BooleanQuery):
            must = [self._eval(s, corpora) for o, s in query.queries if o == q.Occur.MUST]
            should = [self._eval(s, corpora) for o, s in query.queries if o == q.Occur.SHOULD]
            must_not = [self._eval(s, corpora) for o, s in query.queries if o == q.Occur.MUST_NOT]
            if must:
                base = bm25.intersect(must)
                hits = bm25.add([base] + [bm25.restrict(s, base.ids) for s in should])
            else:
                hits = bm25.add(should)
            for n in must_not:
                keep = ~np.isin(hits.ids, n.ids)
                hits = Hits(hits.ids[keep], hits.scores[keep])
            return hits
        raise NotSupportedError(f"full-text query {type(query).__name__} is not supported")

    def _phrase(self, query: q.PhraseQuery, corpus: Corpus) -> Hits:
        pairs = corpus.analyzer.tokens_with_positions(query.query)
        if not pairs:
            return Hits.empty()
        tokens = [t for t, _ in pairs]
        corpus.prefetch(tokens, positions=True)
        base = bm25.intersect([corpus.term(t) for t in dict.fromkeys(tokens)])
        if base.ids.size == 0 or len(tokens) == 1:
            return base
        offs = [p - pairs[0][1] for _, p in pairs]
        if query.slop == 0:
            # Rows holding the exact phrase; the walk below accepts no other row (it only says yes
            # on a real match) and, for two tokens, accepts all of them (it is then a leapfrog join).
            base = bm25.restrict(base, _exact_phrase(corpus, tokens, offs, base.ids))
            if len(tokens) == 2 or base.ids.size == 0:
                return base
        pos = {t: corpus.positions(t) for t in dict.fromkeys(tokens)}
        keep = []
        for r in base.ids.tolist():
            lists = [pos[t][r] for t in tokens]
            keep.append(_phrase_at(lists, offs, query.slop))
        mask = np.array(keep, dtype=bool)
        return Hits(base.ids[mask], base.scores[mask])

    def _pruned(self, corpora: dict[str, Corpus]) -> Hits | None:
        """The top rows of a plain match query by block-max pruning (None when it does not apply).

        Pruning ranks before rows are removed, so it needs every hit to be a live row of a
        searched fragment: no deletion vector, stable row ids, prefilter, fragment subset or
        dropped fragment (a postfilter applies to the ranked rows anyway).
        """
        query = self.query
        plain = isinstance(query, q.MatchQuery) and not query.fuzziness and query.operator == q.FullTextOperator.OR
        if (self._opts.limit is None or not (plain or isinstance(query, q.PhraseQuery))
                or self._opts.fragments is not None or (self._opts.filter is not None and self._prefilter)
                or self._needs_live_check()):
            return None
        assert isinstance(query, (q.MatchQuery, q.PhraseQuery))
        corpus = corpora[str(query.column)]
        if corpus.excluded_fragments:
            return None
        k = self._opts.limit + self._opts.offset
        if isinstance(query, q.PhraseQuery):
            pairs = corpus.analyzer.tokens_with_positions(query.query)
            tokens = [t for t, _ in pairs]
            corpus.prefetch(tokens, positions=True)
            offs = [p - pairs[0][1] for _, p in pairs] if pairs else []
            return topk.phrase_topk(corpus, tokens, offs, query.slop, k, _phrase_at)
        assert isinstance(query, q.MatchQuery)
        tokens = corpus.analyzer.tokens(query.query)
        corpus.prefetch(tokens)
        return topk.match_topk(corpus, tokens, float(query.boost), k)

    def _ranked(self) -> Hits:
        corpora = {c: self._corpus(c) for c in self.columns}
        pruned = self._pruned(corpora)
        hits = self._eval(self.query, corpora) if pruned is None else pruned
        has_filter = self._opts.filter is not None
        if (has_filter and self._prefilter) or self._needs_live_check():
            hits = bm25.restrict(hits, self._allowed(has_filter and self._prefilter))
        else:  # every hit is a live row of a searched fragment: skip reading the row ids
            frags = np.fromiter((f.id for f in self._fragments()), np.uint64)
            keep = np.isin(hits.ids >> np.uint64(32), frags)
            hits = Hits(hits.ids[keep], hits.scores[keep])
        keep_n = None if self._opts.limit is None else self._opts.limit + self._opts.offset
        hits = _sorted(hits, keep_n)
        if has_filter and not self._prefilter:
            limit = self._opts.limit
            top = hits if limit is None else Hits(hits.ids[:limit + self._opts.offset], hits.scores[:limit + self._opts.offset])
            hits = bm25.restrict(top, self._allowed(True))
            order = np.lexsort((hits.ids, -hits.scores.astype(np.float64)))
            hits = Hits(hits.ids[order], hits.scores[order])
        stop = None if self._opts.limit is None else self._opts.offset + self._opts.limit
        return Hits(hits.ids[self._opts.offset:stop], hits.scores[self._opts.offset:stop])

    # -- output ----------------------------------------------------------------------------
    def _rows(self, ids: U64) -> pa.Table:
        cols = list(self._opts.columns)
        empty = pa.schema([self._ctx.arrow_schema.field(c) for c in cols]).empty_table()
        if ids.size == 0:
            return empty
        if not cols:
            return pa.table({"_": pa.nulls(ids.size)}).drop(["_"])
        frags = {f.id: f for f in self._ctx.manifest.fragments}
        if self._ctx.manifest.uses_stable_row_ids:
            addr_of: dict[int, int] = {}
            for f in frags.values():
                rid = self._ctx.row_ids(f)
                if rid is not None:
                    addr_of.update(zip(rid.tolist(), ((f.id << 32) + np.arange(len(rid))).tolist(), strict=True))
            addrs = np.array([addr_of[int(i)] for i in ids], dtype=np.uint64)
        else:
            addrs = ids
        pieces: list[pa.Table] = []
        positions: list[npt.NDArray[np.int64]] = []
        frag_of = (addrs >> np.uint64(32)).astype(np.int64)
        for fid in np.unique(frag_of).tolist():
            sel = np.flatnonzero(frag_of == fid)
            offs = (addrs[sel] & np.uint64(0xFFFFFFFF)).astype(np.uint64)
            order = np.argsort(offs, kind="stable")
            batch = _fragment_scan(self._ctx, frags[fid], cols).take(offs[order])
            pieces.append(pa.Table.from_batches([batch]))
            positions.append(sel[order])
        table = pa.concat_tables(pieces)
        inverse = np.empty(ids.size, dtype=np.int64)
        inverse[np.concatenate(positions)] = np.arange(ids.size)
        return table.take(pa.array(inverse))

    def to_table(self) -> pa.Table:
        """Ranked rows with ``_score``."""
        hits = self._ranked()
        table = self._rows(hits.ids)
        arrays = [table.column(c) for c in self._opts.columns]
        if self._opts.with_row_id:
            arrays.append(pa.chunked_array([pa.array(hits.ids, pa.uint64())]))
        arrays.append(pa.chunked_array([pa.array(hits.scores, pa.float32())]))
        names = [*self._opts.columns, *([ROW_ID] if self._opts.with_row_id else []), SCORE]
        return pa.Table.from_arrays(arrays, names=names).select(self.schema.names).cast(self.schema)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The result as record batches."""
        yield from self.to_table().to_batches(max_chunksize=max(1, self._opts.batch_size))

    def to_reader(self) -> pa.RecordBatchReader:
        """The result as a ``RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def count_rows(self) -> int:
        """Number of rows the search returns."""
        return int(self.to_table().num_rows)

    def explain_plan(self, verbose: bool = False) -> str:
        """The plan, naming the INVERTED index used and the flat part."""
        lines = [f"ProjectionExec: expr=[{', '.join([*self._opts.columns, SCORE])}]",
                 f"  SortExec: expr=[{SCORE} DESC]"]
        for c in self.columns:
            segs = inverted_segments(self._ctx, c)
            lines.append(f"    FullTextIndexSearch: index={segs[0].name} (Inverted), column={c}, "
                         f"fragments={sorted(set().union(*(m.fragment_bitmap or () for m in segs)))}")
        lines.append(f"      {q.describe(self.query)}")
        lines.append(f"    FlatMatchQuery: unindexed fragments scanned{' (skipped: fast_search)' if self._fast else ''}")
        if self._opts.filter is not None:
            lines.append(f"  {'Prefilter' if self._prefilter else 'Postfilter'}: {self._opts.filter}")
        return "\n".join(lines)


#: Per dataset version (dropped with it): the fragment readers result rows were last taken through.
_SCANS: weakref.WeakKeyDictionary[ReadContext, dict[tuple[int, tuple[str, ...]], FragmentScan]] = \
    weakref.WeakKeyDictionary()
_SCANS_LOCK = threading.Lock()
#: Fragment readers kept per dataset version (each holds its files' page plans).
_SCANS_KEPT = 64


def _fragment_scan(ctx: ReadContext, frag: Any, cols: list[str]) -> FragmentScan:
    """A reader of ``cols`` of ``frag``, kept for the next query of the same dataset version.

    Taking the few result rows is most of a warm query: a kept reader has its files open and its
    pages' chunk plans read, so the next take reads only the rows' chunks.
    """
    key = (int(frag.id), tuple(cols))
    with _SCANS_LOCK:
        held = _SCANS.setdefault(ctx, {})
        scan = held.get(key)
        if scan is None:
            if len(held) >= _SCANS_KEPT:
                held.pop(next(iter(held)))
            scan = held[key] = FragmentScan(ctx, frag, cols)
    return scan


def _exact_phrase(corpus: Corpus, tokens: list[str], offs: list[int], candidates: U64) -> U64:
    """Rows where every token occurs at one start plus its offset (an exact phrase, slop 0).

    The tokens' sets of ``position - offset`` must share a value: intersect
    ``(row, position - offset)`` keys. pylance's greedy walk (:func:`_phrase_at`) accepts only
    such rows, and with two tokens all of them; with more it may miss some, so callers still walk
    the rows this returns.
    """
    ids = np.sort(candidates)
    got = [corpus.position_pairs(t, ids) for t in tokens]
    span = 1 + max((int(at.max()) for _, at in got if at.size), default=0)
    keys: npt.NDArray[np.int64] | None = None
    for (rows, at), off in zip(got, offs, strict=True):
        rel = at - off
        ok = rel >= 0
        k = np.unique(np.searchsorted(ids, rows[ok]).astype(np.int64) * span + rel[ok])
        keys = k if keys is None else np.intersect1d(keys, k, assume_unique=True)
    if keys is None or keys.size == 0:
        return np.zeros(0, np.uint64)
    return ids[np.unique(keys // span)]


def _sorted(hits: Hits, top: int | None) -> Hits:
    """Hits by score descending, ties by row id ascending; only the best ``top`` (ties kept) when given.

    pylance 14.0.2's top-k keeps the lowest row ids of a tie at the cut (observed: its WAND walk
    admits a document only above the running k-th score, in row order); upstream later made
    ``(score desc, row id asc)`` its order (``index/tests/topk_tiebreak.rs``).
    """
    scores = hits.scores
    if top is not None and 0 < top < scores.size:
        # Partition first: only the candidates at or above the top-th score need a full sort.
        kth = np.partition(scores, scores.size - top)[scores.size - top]
        keep = scores >= kth
        hits = Hits(hits.ids[keep], scores[keep])
    order = np.lexsort((hits.ids, -hits.scores.astype(np.float64)))
    return Hits(hits.ids[order], hits.scores[order])


def _levenshtein(a: str, b: str, limit: int) -> int:
    """Edit distance of ``a`` and ``b`` (insert, delete, substitute), capped at ``limit + 1``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > limit:
            return limit + 1
        prev = cur
    return prev[-1]


def _expand(tokens: list[str], vocabulary: set[str], fuzziness: int, prefix_length: int,
            max_expansions: int) -> list[str]:
    """Each query token replaced by the index tokens within its edit distance (fuzzy match)."""
    out: list[str] = []
    for tok in tokens:
        dist = fuzziness
        prefix = tok[:prefix_length]
        near = sorted(v for v in vocabulary if v.startswith(prefix) and _levenshtein(tok, v, dist) <= dist)
        out.extend(near[:max_expansions])
    return out


def _phrase_at(lists: list[Any], offs: list[int], slop: int) -> bool:
    """pylance's phrase check (``check_positions``, ``rust/lance-index/src/scalar/inverted/wand.rs``).

    Token ``i`` (query position ``offs[i]``) is tracked by its *relative* position
    ``position - offs[i]``, each token starting at its first occurrence. The phrase holds when
    consecutive relative positions never go down and rise by at most ``slop``; otherwise every
    token moves to its first relative position at or after the furthest point the failed
    comparisons allow, until one runs out. This is a greedy walk, not an exhaustive search:
    pylance 14.0.2 misses some sloppy matches it could make and so must we (a token whose
    first occurrence precedes the phrase can push the others past their only match).
    """
    rel = [np.asarray(p, dtype=np.int64) - o for p, o in zip(lists, offs, strict=True)]
    idx = [0] * len(rel)
    while True:
        cur = [int(r[i]) if i < len(r) else None for r, i in zip(rel, idx, strict=True)]
        most: int | None = None
        ok = True
        for last, nxt in zip(cur[:-1], cur[1:], strict=True):
            if last is None or nxt is None:
                return False
            move_to = last if last > nxt else max(last + 1, nxt - slop)
            most = move_to if most is None else max(most, move_to)
            if not (last <= nxt <= last + slop):
                ok = False
                break
        if ok:
            return True
        assert most is not None
        idx = [int(np.searchsorted(r, most, side="left")) for r in rel]


__all__ = ["SCORE", "FullTextSearch", "inverted_segments"]
