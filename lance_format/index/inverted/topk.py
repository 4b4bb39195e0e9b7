"""Top-k BM25 matches by block-max pruning: only the posting blocks that can reach the top are decoded.

Every posting block stores the best weight among its documents (written with its partition's
statistics, see :mod:`lance_format.index.inverted.blocks`). Rescaled to the query's statistics
that is a bound on what any document of the block can score for that token: with ``idf`` and
``avgdl`` of the whole index instead of the partition's, a weight grows by at most
``idf / idf_part * max(1, avgdl / avgdl_part)`` (the length norm shrinks by at most the ratio of
the averages). The blocks of all query tokens cut each partition's doc-id range into intervals
lying inside one block per token; an interval's bound is the sum of those blocks' bounds.

The search scores the best-bounded intervals exactly first, which sets a threshold (the k-th
best score so far), then scores every interval whose bound reaches it. No interval left out can
hold a document scoring at or above the final k-th score, so the top k (and every document tied
with the k-th) are exactly the exhaustive search's, with the same float32 sums
(``rust/lance-index/src/scalar/inverted/wand.rs`` prunes by the same block bounds, one document
at a time; numpy prefers whole intervals).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lance_format.index.inverted.blocks import PostingBlocks, positions_flat
from lance_format.index.inverted.bm25 import Corpus, Hits, add, doc_weight, idf
from lance_format.index.inverted.files import Partition

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
#: Relative margin on every bound: the stored maxima are float32 values another formula order produced.
_SLACK = 1e-4
#: Intervals scored before the threshold is first taken (at least the limit).
_FIRST_ROUND = 8


@dataclass
class _Term:
    """One query token in one partition."""

    slot: int  # the token's place in the query (repeats count again)
    tid: int
    blocks: PostingBlocks
    weight: np.float32  # idf over the whole index
    bound: F32  # per block: no document of the block scores above this


@dataclass
class _Part:
    part: Partition
    terms: list[_Term]
    edges: I64  # interval starts (sorted doc ids)
    block_of: list[I64]  # per term: its block holding each interval (-1: none)
    bound: F32  # per interval


def _parts(corpus: Corpus, tokens: list[str], boost: float) -> list[_Part] | None:
    out: list[_Part] = []
    avgdl = corpus.avgdl
    weights = [idf(n, corpus.num_docs) if (n := corpus.doc_freq(t)) else np.float32(0.0) for t in tokens]
    for part in corpus.index.partitions:
        terms = []
        n_p = part.num_docs
        avg_p = np.float32(part.total_tokens) / np.float32(n_p) if n_p else np.float32(1.0)
        stretch = max(1.0, float(avgdl) / float(avg_p)) if avg_p > 0 else 1.0
        for slot, tok in enumerate(tokens):
            tid = part.token_id(tok)
            if tid is None:
                continue
            blocks = part.blocks(tid)
            local = float(idf(int(part.lengths[tid]), n_p))
            if local <= 0.0:
                return None  # a bound cannot be rescaled from a zero weight
            scale = float(weights[slot]) / local * stretch * boost * (1.0 + _SLACK)
            terms.append(_Term(slot, tid, blocks, weights[slot], (blocks.max_score.astype(np.float64) * scale
                                                              ).astype(np.float32)))
        if not terms:
            continue
        edges = np.unique(np.concatenate([t.blocks.first_doc.astype(np.int64) for t in terms]))
        block_of = [np.searchsorted(t.blocks.first_doc.astype(np.int64), edges, side="right") - 1 for t in terms]
        bound = np.zeros(edges.size, np.float64)
        for t, b in zip(terms, block_of, strict=True):
            bound += np.where(b >= 0, t.bound[np.maximum(b, 0)], 0.0)
        out.append(_Part(part, terms, edges, block_of, bound.astype(np.float32)))
    return out


def _score(p: _Part, chosen: npt.NDArray[np.bool_], corpus: Corpus, boost: float) -> tuple[I64, F32] | None:
    """Exact scores of the documents in the chosen intervals of one partition (None: a bound was wrong)."""
    docs: list[I64] = []
    scores: list[F32] = []
    lens_all = p.part.num_tokens
    for t, b in zip(p.terms, p.block_of, strict=True):
        need = np.unique(b[chosen & (b >= 0)])
        if need.size == 0:
            continue
        ids, freqs, owner = t.blocks.decode(need)
        d = ids.astype(np.int64)
        s = (t.weight * doc_weight(freqs, lens_all[d], corpus.avgdl)).astype(np.float32)
        if boost != 1.0:
            s = (s * np.float32(boost)).astype(np.float32)
        if s.size and bool((s > t.bound[owner]).any()):
            return None
        keep = chosen[np.searchsorted(p.edges, d, side="right") - 1]
        docs.append(d[keep])
        scores.append(s[keep])
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    summed = add([Hits(d.astype(np.uint64), s) for d, s in zip(docs, scores, strict=True)])
    return summed.ids.astype(np.int64), summed.scores


def _kth(scores: list[F32], k: int) -> float:
    allv = np.concatenate(scores) if scores else np.zeros(0, np.float32)
    if allv.size < k:
        return -np.inf
    return float(np.partition(allv, allv.size - k)[allv.size - k])


def _term_scores(t: _Term, ids: U32, freqs: U32, lens: U32, corpus: Corpus, boost: float) -> F32:
    s = (t.weight * doc_weight(freqs, lens, corpus.avgdl)).astype(np.float32)
    if boost != 1.0:
        s = (s * np.float32(boost)).astype(np.float32)
    return s


def _essential(p: _Part, theta: float, k: int, corpus: Corpus, boost: float) -> tuple[I64, F32] | None:
    """MaxScore over one partition: only documents holding an essential token can reach ``theta``.

    The tokens with the smallest bounds whose bounds sum below ``theta`` are non-essential: a
    document holding none of the others scores below ``theta``. Every document of the essential
    tokens is scored on those; one whose score plus the non-essential tokens' block bounds at it
    still reaches ``theta`` is scored exactly. None when the essential tokens hold most blocks
    (the interval search is then cheaper) or a bound proved wrong.
    """
    tmax = np.array([float(t.bound.max()) if t.bound.size else 0.0 for t in p.terms])
    order = np.argsort(tmax, kind="stable")
    below = np.cumsum(tmax[order]) < theta
    optional = set(order[below].tolist())
    essential = [i for i in range(len(p.terms)) if i not in optional]
    if not essential:  # no document of the partition can reach ``theta``
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    total = sum(t.blocks.num_blocks for t in p.terms)
    if not optional or 2 * sum(p.terms[i].blocks.num_blocks for i in essential) > total:
        return None
    lens_all = p.part.num_tokens
    decoded: dict[int, tuple[I64, F32]] = {}
    for i in essential:
        t = p.terms[i]
        ids, freqs, owner = t.blocks.decode(np.arange(t.blocks.num_blocks, dtype=np.int64))
        s = _term_scores(t, ids, freqs, lens_all[ids], corpus, boost)
        if s.size and bool((s > t.bound[owner]).any()):
            return None
        decoded[i] = (ids.astype(np.int64), s)
    cand = np.unique(np.concatenate([decoded[i][0] for i in essential]))
    partial = np.zeros(cand.size, np.float64)
    for i in essential:
        d, s = decoded[i]
        partial[np.searchsorted(cand, d)] += s
    room = np.zeros(cand.size, np.float64)
    for i in optional:
        t = p.terms[i]
        b = np.searchsorted(t.blocks.first_doc.astype(np.int64), cand, side="right") - 1
        room += np.where(b >= 0, t.bound[np.maximum(b, 0)], 0.0)
    ub = (partial + room) * (1.0 + 1e-6)  # partial sums in float64; the exact ones add in float32
    # The best-bounded candidates scored first raise the threshold before the rest are cut.
    first = cand[np.argsort(-ub, kind="stable")[:max(4 * k, 64)]]
    got = _exact(p, np.sort(first), decoded, corpus, boost)
    if got is None:
        return None
    theta = max(theta, _kth([got[1]], k))
    return _exact(p, cand[ub >= theta], decoded, corpus, boost)


def _exact(p: _Part, cand: I64, decoded: dict[int, tuple[I64, F32]], corpus: Corpus,
           boost: float) -> tuple[I64, F32] | None:
    """Exact scores of the documents ``cand`` (sorted); ``decoded``: tokens already scored in full."""
    lens_all = p.part.num_tokens
    parts: list[Hits] = []
    for i, t in enumerate(p.terms):
        if i in decoded:
            d, s = decoded[i]
            keep = np.isin(d, cand, assume_unique=True)
            parts.append(Hits(d[keep].astype(np.uint64), s[keep]))
            continue
        b = np.searchsorted(t.blocks.first_doc.astype(np.int64), cand, side="right") - 1
        need = np.unique(b[b >= 0])
        if need.size == 0:
            continue
        ids, freqs, owner = t.blocks.decode(need)
        keep = np.isin(ids, cand.astype(np.uint32), assume_unique=True)
        ids, freqs, owner = ids[keep], freqs[keep], owner[keep]
        s = _term_scores(t, ids, freqs, lens_all[ids], corpus, boost)
        if s.size and bool((s > t.bound[owner]).any()):
            return None
        parts.append(Hits(ids.astype(np.uint64), s))
    # ``add`` sums in part order: the terms are in query order, as the exhaustive search sums them.
    summed = add(parts)
    return summed.ids.astype(np.int64), summed.scores


def match_topk(corpus: Corpus, tokens: list[str], boost: float, k: int) -> Hits | None:
    """The documents matching any of ``tokens`` that rank in the top ``k`` (and all tied with the k-th).

    Scores are those of ``Corpus.term`` summed as ``bm25.add`` sums them. Returns None when the
    pruned search does not apply (the caller then scores every posting).
    """
    if k <= 0 or boost <= 0 or not tokens:
        return None
    parts = _parts(corpus, tokens, boost)
    if parts is None:
        return None
    flat = add([corpus.flat_term(t, boost) for t in tokens])
    bounds = np.concatenate([p.bound for p in parts]) if parts else np.zeros(0, np.float32)
    theta = -np.inf
    if bounds.size:
        theta = float(np.sort(bounds)[::-1][min(bounds.size, max(k, _FIRST_ROUND)) - 1])
    # Round one: the best-bounded intervals, scored exactly, give a k-th score no final one is below.
    results: list[tuple[I64, F32]] = []
    for p in parts:
        got = _score(p, p.bound >= theta, corpus, boost)
        if got is None:
            return None
        results.append(got)
    kth = _kth([s for _, s in results] + [flat.scores], k)
    if kth < theta:
        # Round two: every interval that may reach that score; per partition by MaxScore when
        # few documents hold the tokens that can reach it on their own.
        results = []
        for p in parts:
            got = _essential(p, kth, k, corpus, boost) if kth > -np.inf else None
            if got is None:
                got = _score(p, p.bound >= kth, corpus, boost)
            if got is None:
                return None
            results.append(got)
        kth = _kth([s for _, s in results] + [flat.scores], k)
    ids: list[U64] = [flat.ids[flat.scores >= kth]]
    scores: list[F32] = [flat.scores[flat.scores >= kth]]
    for p, (d, s) in zip(parts, results, strict=True):
        keep = s >= kth
        ids.append(p.part.rows_of(d[keep]))
        scores.append(s[keep])
    return Hits(np.concatenate(ids).astype(np.uint64), np.concatenate(scores).astype(np.float32))


def _intersect_part(p: _Part, corpus: Corpus) -> tuple[I64, F32, list[tuple[U32, U32, I64]]] | None:
    """Documents of one partition holding every token, their scores, and per token the decoded blocks.

    The token with the fewest blocks is decoded whole; of the others only the blocks that may
    hold one of its documents.
    """
    if len(p.terms) != len({t.slot for t in p.terms}) or not p.terms:
        return None
    lens_all = p.part.num_tokens
    rare = min(range(len(p.terms)), key=lambda i: p.terms[i].blocks.num_blocks)
    decoded: list[tuple[U32, U32, I64] | None] = [None] * len(p.terms)
    whole = p.terms[rare].blocks.decode(np.arange(p.terms[rare].blocks.num_blocks, dtype=np.int64))
    decoded[rare] = whole
    cand = whole[0].astype(np.int64)
    for i, t in enumerate(p.terms):
        if i == rare:
            continue
        b = np.searchsorted(t.blocks.first_doc.astype(np.int64), cand, side="right") - 1
        some = t.blocks.decode(np.unique(b[b >= 0]))
        decoded[i] = some
        cand = np.intersect1d(cand, some[0].astype(np.int64), assume_unique=True)
    parts: list[Hits] = []
    for t, dec in zip(p.terms, decoded, strict=True):
        assert dec is not None
        ids, freqs, _ = dec
        keep = np.isin(ids, cand.astype(np.uint32), assume_unique=True)
        s = (t.weight * doc_weight(freqs[keep], lens_all[ids[keep]], corpus.avgdl)).astype(np.float32)
        parts.append(Hits(ids[keep].astype(np.uint64), s))
    summed = add(parts)
    return summed.ids.astype(np.int64), summed.scores, [g for g in decoded if g is not None]


def _doc_positions(p: _Part, i: int, got: tuple[U32, U32, I64], docs: I64) -> dict[int, U32]:
    """Positions of term ``i`` in each of ``docs`` (which all hold it), decoding only their blocks."""
    t = p.terms[i]
    ids, freqs, owner = got
    stream, offsets = p.part.position_source(int(t.tid))
    where = np.searchsorted(ids, docs.astype(np.uint32))
    blocks = np.unique(owner[where])
    sel = np.flatnonzero(np.isin(owner, blocks))
    allpos, start = positions_flat(stream, offsets[blocks], freqs[sel], f"{p.part.where} token id {t.tid}")
    at = np.searchsorted(ids[sel], docs.astype(np.uint32))
    a, b = start[at].tolist(), start[at + 1].tolist()
    return {d: allpos[x:y] for d, x, y in zip(docs.tolist(), a, b, strict=True)}


def phrase_topk(corpus: Corpus, tokens: list[str], offsets: list[int], slop: int, k: int,
                matches: Callable[[list[U32], list[int], int], bool]) -> Hits | None:
    """The top ``k`` documents holding the phrase (and all tied with the k-th), best scores checked first.

    A phrase match scores as the sum of its distinct tokens' weights, so the documents holding
    every token are ranked first and their positions read and checked (``matches``, pylance's
    walk) in rank order, batch after batch, until ``k`` matches are found and the next
    candidate scores below the k-th. Only the posting and position blocks of checked documents
    are decoded, besides the rarest token's list. Returns None when this does not apply.
    """
    distinct = list(dict.fromkeys(tokens))
    if k <= 0 or corpus.flat is not None or len(distinct) < 2:
        return None
    parts = _parts(corpus, distinct, 1.0)
    if parts is None:
        return None
    found: list[tuple[_Part, I64, F32, list[tuple[U32, U32, I64]]]] = []
    for p in parts:
        if len(p.terms) != len(distinct):
            continue  # a token the partition lacks: no document of it holds the phrase
        got = _intersect_part(p, corpus)
        if got is None:
            return None
        found.append((p, *got))
    if not found:
        return Hits.empty()
    owner = np.concatenate([np.full(d.size, j, np.int64) for j, (_, d, _, _) in enumerate(found)])
    docs = np.concatenate([d for _, d, _, _ in found])
    scores = np.concatenate([s for _, _, s, _ in found])
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    slot_of = {tok: i for i, tok in enumerate(distinct)}
    hit = np.zeros(order.size, bool)
    done = 0
    batch = max(4 * k, 32)
    while done < order.size:
        stop = min(order.size, done + batch)
        while stop < order.size and scores[order[stop]] == scores[order[stop - 1]]:
            stop += 1  # a tie group is checked whole
        for j, (p, _, _, dec) in enumerate(found):
            sel = order[done:stop][owner[order[done:stop]] == j]
            if sel.size == 0:
                continue
            want = np.sort(docs[sel])
            term_of = {t.slot: i for i, t in enumerate(p.terms)}
            pos = [_doc_positions(p, term_of[s], dec[term_of[s]], want) for s in range(len(distinct))]
            for g in sel.tolist():
                d = int(docs[g])
                hit[g] = matches([pos[slot_of[tok]][d] for tok in tokens], offsets, slop)
        done = stop
        matched = scores[order[:done]][hit[order[:done]]]
        if matched.size >= k:
            kth = float(np.sort(matched)[::-1][k - 1])
            if done >= order.size or float(scores[order[done]]) < kth:
                break
        batch *= 2
    sel = np.flatnonzero(hit)
    if sel.size >= k:
        kth = float(np.sort(scores[sel])[::-1][k - 1])
        sel = sel[scores[sel] >= kth]
    ids = np.zeros(sel.size, np.uint64)
    for j, (p, _, _, _) in enumerate(found):
        mine = owner[sel] == j
        if mine.any():
            ids[mine] = p.part.rows_of(docs[sel[mine]])
    return Hits(ids, scores[sel].astype(np.float32))
