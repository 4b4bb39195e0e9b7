"""Tokenizing a whole column at once (the build's and the flat search's hot path).

Per-row Python tokenizing costs microseconds per word; here the column is split by one Arrow
kernel (``split_pattern_regex``), the pieces are dictionary-encoded, and the analyzer's
filters (length limit, lower case, stemming, stop words, folding) run once per *distinct*
piece. Only the ``simple`` base tokenizer (pylance's default) takes this path; the others go
through :meth:`Analyzer.tokens_with_positions` row by row, with the same result.

The ``simple`` tokenizer keeps runs of alphanumeric characters; the separator pattern is the
same one :class:`~lance_format.index.inverted.tokenizer.Analyzer` uses for query strings, so
queries, builds and flat searches split text alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.index.inverted.tokenizer import SEPARATOR, Analyzer

I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]


@dataclass(frozen=True)
class TokenStream:
    """Every kept token of a column, in text order.

    Attributes:
        rows: The input row (index into the column) of each token, non-decreasing.
        token_ids: Each token's id; ids number the distinct tokens in order of first appearance.
        positions: Each token's position in its row (removed tokens still take a position).
        tokens: The distinct tokens, ``tokens[id]``.
    """

    rows: I64
    token_ids: I64
    positions: I64
    tokens: list[str]


def _run_starts(keys: I64) -> I64:
    """For each element of a non-decreasing array, the index where its run of equal keys starts."""
    idx = np.arange(keys.size, dtype=np.int64)
    new = np.r_[True, keys[1:] != keys[:-1]] if keys.size else np.zeros(0, dtype=bool)
    return np.maximum.accumulate(np.where(new, idx, 0)) if keys.size else idx


def _pieces(values: pa.Array, analyzer: Analyzer) -> tuple[I64, npt.NDArray[np.bool_], pa.Array] | None:
    """Row of every raw piece, which pieces are non-empty, and the pieces (``None``: no bulk path)."""
    if analyzer.params.base_tokenizer != "simple":
        return None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_large_string(values.type):
        values = values.cast(pa.string()) if values.nbytes < 2**31 - 1 else values
    lists = pc.split_pattern_regex(values, SEPARATOR)
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
    width = 8 if pa.types.is_large_string(flat.type) else 4
    offs = np.frombuffer(flat.buffers()[1], dtype=np.int64 if width == 8 else np.int32,
                         count=len(flat) + 1, offset=flat.offset * width)
    return parents, np.diff(offs) > 0, flat


def tokenize_column(values: pa.Array, analyzer: Analyzer) -> TokenStream:
    """The analyzer's tokens of every row of ``values`` (nulls and empty texts give none)."""
    got = _pieces(values, analyzer)
    if got is None:
        return _per_row(values, analyzer)
    parents, nonempty, flat = got
    rows = parents[nonempty]
    # A piece's position is its rank among its row's non-empty pieces.
    positions = np.arange(rows.size, dtype=np.int64) - _run_starts(rows)
    if rows.size == 0:
        return TokenStream(rows, rows.copy(), positions, [])
    # Empty pieces (between adjacent separators) are encoded too, cheaper than copying the rest out.
    enc = pc.dictionary_encode(flat)
    codes = enc.indices.to_numpy().astype(np.int64)[nonempty]
    # The analyzer's filters, once per distinct piece; ``-1`` marks a removed piece.
    final: dict[str, int] = {}
    mapped = np.fromiter(
        (-1 if not raw or (t := analyzer.filter(raw)) is None else final.setdefault(t, len(final))
         for raw in enc.dictionary.to_pylist()), dtype=np.int64, count=len(enc.dictionary))
    tid = mapped[codes]
    kept = tid >= 0
    # Arrow's dictionary holds the pieces in order of first appearance, and ``final`` numbers the
    # tokens as the dictionary is walked: the ids are already in order of first appearance.
    return TokenStream(rows[kept], tid[kept], positions[kept], list(final))


def _per_row(values: pa.Array, analyzer: Analyzer) -> TokenStream:
    rows: list[int] = []
    names: dict[str, int] = {}
    tids: list[int] = []
    pos: list[int] = []
    for row, text in enumerate(values.to_pylist()):
        if not text:
            continue
        for tok, p in analyzer.tokens_with_positions(text):
            rows.append(row)
            tids.append(names.setdefault(tok, len(names)))
            pos.append(p)
    return TokenStream(np.array(rows, dtype=np.int64), np.array(tids, dtype=np.int64),
                       np.array(pos, dtype=np.int64), list(names))


def doc_pairs(stream: TokenStream) -> tuple[I64, U32, U32, U32, U32, U32]:
    """Documents and their (document, token) pairs from a token stream.

    Returns:
        ``(doc_rows, num_tokens, pair_doc, pair_tok, pair_freq, positions)``: the input rows with
        at least one token and their token counts; one pair per distinct token of a document,
        documents in order and tokens by id within one; every pair's positions, ascending,
        concatenated in pair order.
    """
    rows = stream.rows  # non-decreasing: documents are runs
    new_doc = np.r_[True, rows[1:] != rows[:-1]] if rows.size else np.zeros(0, dtype=bool)
    doc_rows = rows[new_doc]
    doc_of = np.cumsum(new_doc) - 1
    counts = np.diff(np.r_[np.flatnonzero(new_doc), rows.size])
    # The stream runs by document and position: a stable sort by token id alone gives (token,
    # document, position) order; numpy sorts 16-bit keys stably by radix, in linear time.
    if stream.token_ids.size and int(stream.token_ids.max()) < 2**16:
        order = np.argsort(stream.token_ids.astype(np.uint16), kind="stable")
    else:
        order = np.argsort(stream.token_ids * max(int(doc_rows.size), 1) + doc_of, kind="stable")
    d = doc_of[order]
    t = stream.token_ids[order]
    starts = np.flatnonzero(np.r_[True, (d[1:] != d[:-1]) | (t[1:] != t[:-1])]) if d.size else np.zeros(0, np.int64)
    freq = np.diff(np.r_[starts, d.size])
    return (doc_rows.astype(np.int64), counts.astype(np.uint32), d[starts].astype(np.uint32),
            t[starts].astype(np.uint32), freq.astype(np.uint32), stream.positions[order].astype(np.uint32))
