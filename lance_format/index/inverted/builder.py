"""Writing INVERTED segments in pylance 14.0.2's layout (``rust/lance-index/src/scalar/inverted/builder.rs``).

A build tokenizes each task's rows into a :class:`TokenChunk` (runs on any ``Runner``), then
the driver merges the chunks into one partition: token ids in order of first appearance, the
documents (rows with at least one token) in row order, one posting list per token with block
max scores computed with the partition's own BM25 statistics, impacts and, with positions,
the shared position stream. See :mod:`lance_format.index.inverted.files` for the files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyroaring import BitMap

from lance_format.index.inverted import bulk, encode, fst
from lance_format.index.inverted.bm25 import doc_weight, idf
from lance_format.index.inverted.files import METADATA, docs_file, invert_file, tokens_file
from lance_format.index.inverted.postings import BLOCK
from lance_format.index.inverted.tokenizer import Analyzer, AnalyzerParams, document_texts
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile

U64 = npt.NDArray[np.uint64]
U32 = npt.NDArray[np.uint32]


@dataclass(frozen=True)
class TokenChunk:
    """One task's tokenized rows (picklable).

    Attributes:
        row_ids: Rows with at least one token, in scan order.
        num_tokens: Their token counts.
        tokens: The chunk's distinct tokens, in order of first appearance.
        pair_doc, pair_tok, pair_freq: One entry per (document, token) pair, by token, then document.
        positions: Every pair's positions, concatenated (``None`` without positions).
        token_map: The serialized FST of ``tokens`` (token -> its index) when it is known already
            (a remap that kept every token: the old partition's map); ``None``: built on writing.
    """

    row_ids: U64
    num_tokens: U32
    tokens: list[str]
    pair_doc: U32
    pair_tok: U32
    pair_freq: U32
    positions: U32 | None
    token_map: bytes | None = None


def tokenize(values: pa.Array, ids: U64, params: AnalyzerParams) -> TokenChunk:
    """Tokenize one task's texts (nulls and texts without tokens are not documents).

    ``values`` may be strings or lists of strings (see :func:`document_texts`).
    """
    stream = bulk.tokenize_column(document_texts(values), Analyzer(params))
    rows, counts, pdoc, ptok, pfreq, pos = bulk.doc_pairs(stream)
    return TokenChunk(np.asarray(ids, dtype=np.uint64)[rows], counts, stream.tokens, pdoc, ptok, pfreq,
                      pos if params.with_position else None)


def merge_chunks(chunks: Sequence[TokenChunk], with_position: bool) -> TokenChunk:
    """The chunks as one (token ids renumbered in order of first appearance, pairs by token, then document).

    Chunks hold consecutive documents, so a token's merged posting list is its lists of the
    chunks one after the other: each pair's place follows from per-token counts, without a sort.
    """
    vocab: dict[str, int] = {}
    remaps = [np.array([vocab.setdefault(t, len(vocab)) for t in c.tokens], dtype=np.int64) for c in chunks]
    if len(chunks) == 1 and bool(np.all(remaps[0] == np.arange(remaps[0].size))):
        c = chunks[0]
        return TokenChunk(c.row_ids, c.num_tokens, list(vocab), c.pair_doc, c.pair_tok, c.pair_freq,
                          c.positions if with_position else None)
    ntok = len(vocab)
    new_tok = [r[c.pair_tok.astype(np.int64)] for r, c in zip(remaps, chunks, strict=True)]
    counts = np.array([np.bincount(t, minlength=ntok) for t in new_tok], dtype=np.int64).reshape(len(chunks), ntok)
    token_start = np.r_[0, np.cumsum(counts.sum(axis=0))[:-1]]
    before = np.cumsum(counts, axis=0) - counts  # pairs of the same token in earlier chunks
    dest_parts = []
    for k, t in enumerate(new_tok):
        # Within a chunk a token's pairs are one run (token-major): rank = index - run start.
        run_start = np.flatnonzero(np.r_[True, t[1:] != t[:-1]]) if t.size else np.zeros(0, np.int64)
        starts = np.repeat(run_start, np.diff(np.r_[run_start, t.size]))
        dest_parts.append(token_start[t] + before[k][t] + (np.arange(t.size) - starts))
    dest = np.concatenate(dest_parts) if dest_parts else np.zeros(0, np.int64)
    order = np.empty_like(dest)
    order[dest] = np.arange(dest.size)
    offsets = np.cumsum([0] + [len(c.row_ids) for c in chunks])
    doc = np.concatenate([c.pair_doc.astype(np.int64) + o for c, o in zip(chunks, offsets, strict=False)])
    tok = np.concatenate(new_tok)
    freq = np.concatenate([c.pair_freq for c in chunks]).astype(np.uint32)
    positions = None
    if with_position:
        pos = np.concatenate([c.positions for c in chunks if c.positions is not None]).astype(np.uint32)
        positions = _gather_runs(pos, freq.astype(np.int64), order)
    return TokenChunk(np.concatenate([c.row_ids for c in chunks]).astype(np.uint64),
                      np.concatenate([c.num_tokens for c in chunks]).astype(np.uint32), list(vocab),
                      doc[order].astype(np.uint32), tok[order].astype(np.uint32), freq[order], positions)


def _gather_runs(values: U32, lengths: npt.NDArray[np.int64], order: npt.NDArray[np.int64]) -> U32:
    """``values`` cut into runs of ``lengths``, the runs taken in ``order``."""
    starts = np.cumsum(lengths) - lengths
    ls = lengths[order]
    within = np.arange(int(ls.sum()), dtype=np.int64) - np.repeat(np.cumsum(ls) - ls, ls)
    return values[np.repeat(starts[order], ls) + within]


def _posting_schema(with_position: bool) -> pa.Schema:
    fields = [pa.field("_posting", pa.list_(pa.large_binary()), nullable=False),
              pa.field("_max_score", pa.float32(), nullable=False),
              pa.field("_length", pa.uint32(), nullable=False),
              pa.field("_impacts", pa.list_(pa.large_binary()), nullable=False)]
    if with_position:
        fields += [pa.field("_compressed_position", pa.large_binary(), nullable=False),
                   pa.field("_position_block_offset", pa.list_(pa.uint32()), nullable=False)]
    return pa.schema(fields)


def _posting_metadata(with_position: bool) -> dict[str, str]:
    meta = {"posting_tail_codec": "varint_delta_v1", "posting_block_size": str(BLOCK), "format_version": "2"}
    if with_position:
        meta |= {"positions_layout": "shared_stream_v2", "positions_codec": "packed_delta_v1"}
    return meta


def write_partition(out: IndexDir, part: int, data: TokenChunk, with_position: bool) -> list[IndexFile]:
    """Write ``part_{part}_*.lance`` from one merged chunk."""
    n = len(data.row_ids)
    total = int(data.num_tokens.sum())
    avgdl = np.float32(total) / np.float32(n) if n else np.float32(1.0)
    key = data.pair_tok.astype(np.int64) * max(n, 1) + data.pair_doc
    if key.size and not bool(np.all(key[1:] > key[:-1])):  # chunks come token-major; others are sorted here
        order = np.argsort(key)
        data = TokenChunk(data.row_ids, data.num_tokens, data.tokens, data.pair_doc[order], data.pair_tok[order],
                          data.pair_freq[order], None if data.positions is None else
                          _gather_runs(data.positions, data.pair_freq.astype(np.int64), order),
                          data.token_map)
    tok = data.pair_tok.astype(np.int64)
    doc = data.pair_doc
    freq = data.pair_freq
    positions = data.positions if with_position else None
    bounds = np.searchsorted(tok, np.arange(len(data.tokens) + 1))
    lens = data.num_tokens[doc]
    # Each token's weight with the scalar float32 formula, then one float32 product per pair.
    weights = np.array([idf(int(c), n) for c in np.diff(bounds).tolist()], dtype=np.float32)
    scores = (weights[tok] * doc_weight(freq, lens, avgdl)).astype(np.float32)
    postings, max_scores, impacts, streams, offs = encode.encode_partition(
        tok, bounds.astype(np.int64), doc, freq, lens, scores, positions)
    lengths = np.diff(bounds).astype(np.uint32)
    offsets = [o.tolist() for o in offs]
    cols: list[pa.Array] = [pa.array(postings, pa.list_(pa.large_binary())), pa.array(max_scores, pa.float32()),
                            pa.array(lengths, pa.uint32()), pa.array(impacts, pa.list_(pa.large_binary()))]
    if with_position:
        cols += [pa.array(streams, pa.large_binary()), pa.array(offsets, pa.list_(pa.uint32()))]
    invert = pa.Table.from_arrays(cols, schema=_posting_schema(with_position))
    token_map = data.token_map if data.token_map is not None else \
        fst.write_map((t, i) for i, t in enumerate(data.tokens))
    tokens = pa.Table.from_arrays(
        [pa.array([token_map], pa.large_binary()), pa.array([len(data.tokens)], pa.uint32()),
         pa.array([sum(len(t.encode()) for t in data.tokens)], pa.uint64())],
        schema=pa.schema([pa.field("_token_fst_bytes", pa.large_binary(), nullable=False),
                          pa.field("_token_next_id", pa.uint32(), nullable=False),
                          pa.field("_token_total_length", pa.uint64(), nullable=False)]))
    docs = pa.Table.from_arrays(
        [pa.array(data.row_ids, pa.uint64()), pa.array(data.num_tokens, pa.uint32())],
        schema=pa.schema([pa.field("_rowid", pa.uint64(), nullable=False),
                          pa.field("_num_tokens", pa.uint32(), nullable=False)]))
    return [out.write(invert_file(part), invert, _posting_metadata(with_position)),
            out.write(tokens_file(part), tokens),
            out.write(docs_file(part), docs, {"total_tokens": str(total)})]


def write_metadata(out: IndexDir, params: AnalyzerParams, partitions: Sequence[int],
                   deleted_fragments: frozenset[int] = frozenset()) -> IndexFile:
    """Write ``metadata.lance``: the analyzer, the partition list and the deleted fragments."""
    meta = {"partitions": json.dumps(list(partitions), separators=(",", ":")), "params": params.to_json(),
            "token_set_format": "fst", **_posting_metadata(params.with_position)}
    bitmap = BitMap(sorted(deleted_fragments)).serialize()
    table = pa.Table.from_arrays([pa.array([bitmap], pa.binary())],
                                 schema=pa.schema([pa.field("deleted_fragments", pa.binary(), nullable=False)]))
    return out.write(METADATA, table, meta)
