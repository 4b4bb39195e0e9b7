"""BM25 as pylance scores it (``rust/lance-index/src/scalar/inverted/scorer.rs``).

``score(doc) = sum over query tokens of idf(token) * (K1 + 1) * f / (f + K1 * (1 - B + B * dl / avgdl))``
in float32, with ``K1 = 1.2``, ``B = 0.75``, ``idf = ln((N - n + 0.5) / (n + 0.5) + 1)``, where ``N``
is the index's document count, ``n`` the documents holding the token and ``avgdl`` the index's
tokens per document, summed over every partition. Deleted rows stay in these statistics (the
index is not rewritten by a delete), and rows of fragments the index does not cover are scored
with the index's statistics too (observed on pylance 14.0.2: appending rows leaves the scores of
indexed rows unchanged).

A :class:`Corpus` is one column's documents: the index's partitions plus, optionally, the
un-indexed rows tokenized on the fly (:class:`FlatDocs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.index.inverted import bulk
from lance_format.index.inverted.files import InvertedFiles
from lance_format.index.inverted.tokenizer import Analyzer

U64 = npt.NDArray[np.uint64]
U32 = npt.NDArray[np.uint32]
F32 = npt.NDArray[np.float32]
K1 = np.float32(1.2)
B = np.float32(0.75)


def idf(doc_freq: int, num_docs: int) -> np.float32:
    """pylance's inverse document frequency (float32).

    The argument is formed in float32 as pylance forms it; its logarithm is taken in float64 and
    rounded once, as Rust's ``f32::ln`` (libm ``logf``, correctly rounded) does. numpy's float32
    ``log`` can be one ulp off (seen: 1.6432374 for pylance's 1.6432375 with 19,335 of 100,000
    documents), which moves every score of that token.
    """
    n = np.float32(num_docs)
    d = np.float32(doc_freq)
    arg = np.float32((n - d + np.float32(0.5)) / (d + np.float32(0.5)) + np.float32(1.0))
    return np.float32(np.log(np.float64(arg)))


def doc_weight(freqs: U32, lengths: U32, avgdl: np.float32) -> F32:
    """The per-document factor of a token's BM25 score (float32, pylance's order of operations)."""
    f = freqs.astype(np.float32)
    dl = lengths.astype(np.float32)
    norm = K1 * (np.float32(1.0) - B + B * dl / avgdl)
    return ((K1 + np.float32(1.0)) * f / (f + norm)).astype(np.float32)


@dataclass
class FlatDocs:
    """Rows the index does not cover, tokenized: an in-memory inverted list."""

    row_ids: U64
    lengths: U32
    postings: dict[str, tuple[U32, U32]]
    positions: dict[str, list[U32]] = field(default_factory=dict)

    @classmethod
    def build(cls, analyzer: Analyzer, row_ids: U64, texts: pa.Array, with_positions: bool) -> FlatDocs:
        """Tokenize ``texts`` (a null is an empty document) in bulk."""
        stream = bulk.tokenize_column(texts, analyzer)
        lengths = np.bincount(stream.rows, minlength=len(texts)).astype(np.uint32)
        doc_rows, _, pdoc, ptok, pfreq, pos = bulk.doc_pairs(stream)
        order = np.argsort(ptok, kind="stable")  # per token, documents stay in order
        docs = doc_rows[pdoc[order]].astype(np.uint32)
        freqs = pfreq[order]
        cuts = np.flatnonzero(np.diff(ptok[order].astype(np.int64))) + 1
        names = [stream.tokens[t] for t in ptok[order][np.r_[0, cuts]].tolist()] if order.size else []
        postings = dict(zip(names, zip(np.split(docs, cuts), np.split(freqs, cuts), strict=True), strict=True))
        positions: dict[str, list[U32]] = {}
        if with_positions and order.size:
            f = pfreq.astype(np.int64)
            per_pair = np.split(pos, np.cumsum(f)[:-1])
            ordered = [per_pair[i] for i in order.tolist()]
            bounds = np.r_[0, cuts, order.size].tolist()
            positions = {n: ordered[bounds[k]:bounds[k + 1]] for k, n in enumerate(names)}
        return cls(row_ids, lengths, postings, positions)


@dataclass
class Hits:
    """Matching rows and their scores (row ids unique, any order)."""

    ids: U64
    scores: F32

    @classmethod
    def empty(cls) -> Hits:
        """No rows."""
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.float32))


def add(parts: list[Hits]) -> Hits:
    """Union of hits, scores of the same row summed."""
    parts = [p for p in parts if p.ids.size]
    if not parts:
        return Hits.empty()
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p.ids for p in parts])
    scores = np.concatenate([p.scores for p in parts]).astype(np.float32)
    # Each part is usually sorted by row: a stable sort merges the runs and keeps a row's scores
    # in part order. pylance adds a document's term scores one by one in float32, in query
    # order (``score += ...`` over its lead postings, ``rust/lance-index/src/scalar/inverted/wand.rs``);
    # a float64 sum can round differently (seen: 12.591864 for its 12.591863).
    order = np.argsort(ids, kind="stable")
    ids, scores = ids[order], scores[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    counts = np.diff(np.r_[starts, ids.size])
    group = np.repeat(np.arange(starts.size), counts)
    rank = np.arange(ids.size) - starts[group]
    sums = scores[starts].copy()
    for k in range(1, int(counts.max())):
        at = np.flatnonzero(rank == k)
        sums[group[at]] = sums[group[at]] + scores[at]
    return Hits(ids[starts], sums)


def best(parts: list[Hits]) -> Hits:
    """Union of hits, each row keeping its highest score."""
    parts = [p for p in parts if p.ids.size]
    if not parts:
        return Hits.empty()
    ids = np.concatenate([p.ids for p in parts])
    scores = np.concatenate([p.scores for p in parts])
    order = np.lexsort((-scores.astype(np.float64), ids))
    ids, scores = ids[order], scores[order]
    first = np.r_[True, ids[1:] != ids[:-1]]
    return Hits(ids[first], scores[first])


def intersect(parts: list[Hits]) -> Hits:
    """Rows in every part, scores summed."""
    if not parts:
        return Hits.empty()
    keep = parts[0].ids
    for p in parts[1:]:
        keep = np.intersect1d(keep, p.ids, assume_unique=True)
    return add([restrict(p, keep) for p in parts]) if keep.size else Hits.empty()


def restrict(hits: Hits, ids: U64) -> Hits:
    """The hits whose row is in ``ids``."""
    mask = np.isin(hits.ids, ids)
    return Hits(hits.ids[mask], hits.scores[mask])


class Corpus:
    """One indexed column: the index's partitions, the flat rows, and the index's statistics."""

    def __init__(self, index: InvertedFiles, analyzer: Analyzer, flat: FlatDocs | None = None,
                 excluded_fragments: frozenset[int] = frozenset(), stable_row_ids: bool = False):
        self.index = index
        self.analyzer = analyzer
        self.flat = flat
        self.num_docs = index.num_docs
        self.avgdl = (np.float32(index.total_tokens) / np.float32(index.num_docs)
                      if index.num_docs else np.float32(1.0))
        self._excluded = excluded_fragments
        self._stable = stable_row_ids

    @property
    def excluded_fragments(self) -> frozenset[int]:
        """Fragments whose indexed rows never match (none with stable row ids: those do not name fragments)."""
        return frozenset() if self._stable else self._excluded

    def index_vocabulary(self) -> set[str]:
        """Every token of the index."""
        out: set[str] = set()
        for p in self.index.partitions:
            out.update(p.tokens)
        return out

    def prefetch(self, tokens: list[str], positions: bool = False) -> None:
        """Read the index's posting lists (and positions) of ``tokens`` together."""
        for p in self.index.partitions:
            p.prefetch(tokens, positions)

    def doc_freq(self, token: str) -> int:
        """Documents of the index holding ``token`` (BM25's ``n``)."""
        return self.index.doc_freq(token)

    def _keep(self, row_ids: U64) -> npt.NDArray[np.bool_]:
        if not self._excluded or self._stable:
            return np.ones(len(row_ids), dtype=bool)
        frags = (row_ids >> np.uint64(32)).astype(np.int64)
        return ~np.isin(frags, np.fromiter(self._excluded, dtype=np.int64))

    def postings(self, token: str) -> list[tuple[U64, U32, U32, list[U32] | None, int, object]]:
        """``(row ids, freqs, doc lengths, None, source index, source)`` of every source holding ``token``."""
        out: list[tuple[U64, U32, U32, list[U32] | None, int, object]] = []
        for i, part in enumerate(self.index.partitions):
            got = part.posting(token)
            if got is None:
                continue
            doc_ids, freqs = got
            rows = part.row_ids[doc_ids]
            out.append((rows, freqs, part.num_tokens[doc_ids], None, i, part))
        if self.flat is not None and token in self.flat.postings:
            d, f = self.flat.postings[token]
            out.append((self.flat.row_ids[d], f, self.flat.lengths[d], None, -1, self.flat))
        return out

    def term(self, token: str, boost: float = 1.0, *, indexed: bool = True, flat: bool = True) -> Hits:
        """Every document holding ``token`` and its BM25 contribution (of the index, the flat rows or both)."""
        n = self.doc_freq(token)
        if n == 0 and (self.flat is None or token not in self.flat.postings):
            return Hits.empty()
        w = idf(n, self.num_docs) if n else np.float32(0.0)
        fw, favg = self._flat_stats(token)
        parts = []
        for rows, freqs, lens, _, src, _ in self.postings(token):
            if (src < 0 and not flat) or (src >= 0 and not indexed):
                continue
            keep = self._keep(rows)
            if src < 0:
                s = (fw * doc_weight(freqs, lens, favg)).astype(np.float32)
            else:
                s = (w * doc_weight(freqs, lens, self.avgdl)).astype(np.float32)
            if boost != 1.0:
                s = (s * np.float32(boost)).astype(np.float32)
            parts.append(Hits(rows[keep], s[keep]))
        return add(parts)

    def flat_term(self, token: str, boost: float = 1.0) -> Hits:
        """The flat rows holding ``token`` and their BM25 contribution (the index's rows left out)."""
        if self.flat is None or token not in self.flat.postings:
            return Hits.empty()
        fw, favg = self._flat_stats(token)
        d, f = self.flat.postings[token]
        s = (fw * doc_weight(f, self.flat.lengths[d], favg)).astype(np.float32)
        if boost != 1.0:
            s = (s * np.float32(boost)).astype(np.float32)
        return Hits(self.flat.row_ids[d], s)

    def _flat_stats(self, token: str) -> tuple[np.float32, np.float32]:
        """Query weight and avgdl for the flat rows: the index's statistics plus the flat rows'."""
        if self.flat is None:
            return np.float32(0.0), self.avgdl
        n = self.num_docs + int(np.count_nonzero(self.flat.lengths))
        total = self.index.total_tokens + int(self.flat.lengths.sum())
        got = self.flat.postings.get(token)
        df = self.doc_freq(token) + (0 if got is None else len(got[0]))
        return (idf(df, n) if df else np.float32(0.0)), np.float32(total) / np.float32(max(n, 1))

    def position_pairs(self, token: str, rows: U64) -> tuple[U64, npt.NDArray[np.int64]]:
        """``(row id, position)`` of every occurrence of ``token`` in the documents ``rows``."""
        out_rows: list[U64] = []
        out_pos: list[npt.NDArray[np.int64]] = []

        def take(row_ids: U64, plists: list[U32]) -> None:
            sel = np.flatnonzero(np.isin(row_ids, rows))
            if sel.size:
                chosen = [plists[i] for i in sel.tolist()]
                out_rows.append(np.repeat(row_ids[sel], [len(p) for p in chosen]))
                out_pos.append(np.concatenate(chosen).astype(np.int64))

        for part in self.index.partitions:
            got = part.posting(token)
            if got is not None:
                take(part.row_ids[got[0]], part.token_positions(token))
        if self.flat is not None and token in self.flat.positions:
            d, _ = self.flat.postings[token]
            take(self.flat.row_ids[d], self.flat.positions[token])
        if not out_rows:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        return np.concatenate(out_rows), np.concatenate(out_pos)

    def positions(self, token: str) -> dict[int, U32]:
        """``row id -> positions`` of ``token`` in every document holding it."""
        out: dict[int, U32] = {}
        for part in self.index.partitions:
            got = part.posting(token)
            if got is None:
                continue
            pos = part.token_positions(token)
            for r, p in zip(part.row_ids[got[0]].tolist(), pos, strict=True):
                out[r] = p
        if self.flat is not None and token in self.flat.positions:
            d, _ = self.flat.postings[token]
            for r, p in zip(self.flat.row_ids[d].tolist(), self.flat.positions[token], strict=True):
                out[r] = p
        return out
