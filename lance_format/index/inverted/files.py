"""The files of an INVERTED segment (``rust/lance-index/src/scalar/inverted/builder.rs``, ``index.rs``).

* ``metadata.lance``: one row, ``deleted_fragments`` (a portable roaring bitmap of fragments the
  segment still holds but the dataset dropped, pruned at search time), and schema metadata
  ``params`` (the analyzer, JSON), ``partitions`` (JSON list of partition ids),
  ``format_version``, ``token_set_format``, ``posting_block_size``, ``posting_tail_codec`` and,
  with positions, ``positions_layout`` / ``positions_codec``.
* per partition ``N``: ``part_N_tokens.lance`` (the fst token map, the token count and the
  tokens' total byte length), ``part_N_docs.lance`` (``_rowid`` and ``_num_tokens`` of every
  document with at least one token, metadata ``total_tokens``) and ``part_N_invert.lance``
  (one row per token id: the posting list, see :mod:`lance_format.index.inverted.postings`).

A posting's doc id is the document's row number in ``part_N_docs.lance``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyroaring import BitMap

from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.file.reader import LanceFileReader
from lance_format.index.inverted import fst
from lance_format.index.inverted.blocks import PostingBlocks, decode_lists, positions_flat
from lance_format.index.inverted.postings import U32
from lance_format.index.inverted.tokenizer import AnalyzerParams
from lance_format.index.store import IndexDir
from lance_format.session import CacheKind

U64 = npt.NDArray[np.uint64]
METADATA = "metadata.lance"


def tokens_file(part: int) -> str:
    """Name of a partition's token file."""
    return f"part_{part}_tokens.lance"


def docs_file(part: int) -> str:
    """Name of a partition's document file."""
    return f"part_{part}_docs.lance"


def invert_file(part: int) -> str:
    """Name of a partition's posting-list file."""
    return f"part_{part}_invert.lance"


def _meta(table: pa.Table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


_LOCK = threading.Lock()
#: Decoded posting lists a partition keeps (the most recently used), bounding a cached segment.
_POSTING_CACHE = 256


@dataclass
class Partition:
    """One opened partition: its token statistics; documents and posting lists read on demand.

    Opening reads the token map's bytes, the ``_length`` / ``_max_score`` columns and the
    document file's footer. The documents' row ids and token counts are decoded when a query
    first needs them (once: the opened segment lives in the session's index cache); a query
    reads (and keeps) only the posting rows of its own tokens, and decodes only the posting
    blocks it scores (:mod:`lance_format.index.inverted.topk`).
    """

    id: int
    doc_count: int
    total_tokens: int
    lengths: U32
    max_scores: npt.NDArray[np.float32]
    has_positions: bool
    tail_codec: str
    where: str
    src: IndexDir
    token_bytes: bytes
    _row_ids: U64 | None = None
    _num_tokens: U32 | None = None
    _docs_reader: LanceFileReader | None = None
    _tokens: dict[str, int] | None = None
    _postings: pa.ListArray | None = None
    _positions: pa.Table | None = None
    _cache: dict[int, tuple[U32, U32]] = field(default_factory=dict)
    _raw: dict[int, PostingBlocks] = field(default_factory=dict)
    _ids: dict[str, int | None] = field(default_factory=dict)
    _pos_cache: dict[int, list[U32]] = field(default_factory=dict)
    _pos_raw: dict[int, tuple[bytes, npt.NDArray[np.int64]]] = field(default_factory=dict)

    @property
    def num_docs(self) -> int:
        """Documents (rows with at least one token) in the partition."""
        return self.doc_count

    def _load_docs(self, column: str) -> npt.NDArray[Any]:
        """One column of the document file, decoded whole (each is loaded on first need only)."""
        reader = self.src.reader(docs_file(self.id), columns=[column])
        docs = reader.read_all(batch_size=max(1, reader.num_rows)).to_table()
        if docs.num_rows != self.doc_count:
            raise CorruptFileError(f"{self.where}: document file holds {docs.num_rows} rows, "
                                   f"its footer said {self.doc_count}")
        return np.asarray(docs.column(0).combine_chunks().to_numpy())

    @property
    def row_ids(self) -> U64:
        """``_rowid`` of every document (decoded on first use)."""
        if self._row_ids is None:
            self._row_ids = self._load_docs("_rowid").astype(np.uint64)
        return self._row_ids

    @property
    def num_tokens(self) -> U32:
        """Token count of every document (decoded on first use)."""
        if self._num_tokens is None:
            self._num_tokens = self._load_docs("_num_tokens").astype(np.uint32)
        return self._num_tokens

    def rows_of(self, doc_ids: npt.NDArray[np.integer]) -> U64:
        """``_rowid`` of some documents; a few are read from the document file if not yet decoded."""
        if self._row_ids is not None or doc_ids.size > 4096:
            return np.asarray(self.row_ids[doc_ids], dtype=np.uint64)
        if doc_ids.size == 0:
            return np.zeros(0, np.uint64)
        order = np.argsort(doc_ids, kind="stable")
        reader = self._docs_reader
        if reader is None:  # kept: its page plans make the next query's take a read of a few chunks
            reader = self._docs_reader = self.src.reader(docs_file(self.id), columns=["_rowid"])
        got = reader.take_rows(doc_ids[order].tolist()).to_table()
        out = np.empty(doc_ids.size, np.uint64)
        out[order] = got.column(0).combine_chunks().to_numpy().astype(np.uint64)
        return out

    def with_row_ids(self, row_ids: U64) -> Partition:
        """A copy whose documents have other row ids (a remap); the cached partition stays as read."""
        return dataclasses.replace(self, _row_ids=row_ids, _num_tokens=self.num_tokens)

    @property
    def tokens(self) -> dict[str, int]:
        """Every ``token -> id`` (the whole token map, decoded once)."""
        if self._tokens is None:
            self._tokens = fst.read_map(self.token_bytes, self.src.store.uri(self.src.key(tokens_file(self.id))))
        return self._tokens

    def token_id(self, token: str) -> int | None:
        """The id of ``token`` (``None`` when the partition lacks it), without decoding the whole map."""
        if self._tokens is not None:
            return self._tokens.get(token)
        held = self._ids.get(token, -1)
        if held != -1:
            return held
        tid = fst.lookup(self.token_bytes, token)
        if len(self._ids) > 4 * _POSTING_CACHE:
            self._ids.clear()
        self._ids[token] = tid
        return tid

    def doc_freq(self, token: str) -> int:
        """How many of the partition's documents hold ``token``."""
        tid = self.token_id(token)
        return 0 if tid is None else int(self.lengths[tid])

    def preload(self) -> None:
        """Read every posting list at once (a remap visits them all)."""
        if self._postings is None:
            cols = ["_posting"] + (["_compressed_position", "_position_block_offset"] if self.has_positions else [])
            inv = self.src.reader(invert_file(self.id), columns=cols).read_all().to_table()
            self._postings = inv.column("_posting").combine_chunks()
            if self.has_positions:
                self._positions = inv.select(cols[1:]).combine_chunks()

    def all_postings(self) -> tuple[npt.NDArray[np.int64], U32, U32]:
        """``(token id, doc id, frequency)`` of every posting, all decoded at once (a remap's read)."""
        self.preload()
        assert self._postings is not None
        return decode_lists(self._postings, self.lengths, self.tail_codec, self.where)

    def _row(self, tid: int, columns: list[str]) -> pa.Table:
        return self.src.reader(invert_file(self.id), columns=columns).take_rows([tid]).to_table()

    def prefetch(self, tokens: list[str], positions: bool = False) -> None:
        """Read the posting rows (and positions) of ``tokens`` not yet held, in one read of the file."""
        if self._postings is not None:
            return
        tids = {t: i for t in dict.fromkeys(tokens) if (i := self.token_id(t)) is not None}
        want_pos = positions and self.has_positions
        need = sorted({i for i in tids.values() if (i not in self._raw and i not in self._cache)
                       or (want_pos and i not in self._pos_cache and i not in self._pos_raw)})
        if not need:
            return
        cols = ["_posting"] + (["_compressed_position", "_position_block_offset"] if want_pos else [])
        rows = self.src.reader(invert_file(self.id), columns=cols).take_rows(need).to_table().combine_chunks()
        for k, tid in enumerate(need):
            self._remember(self._raw, tid, self._blocks_of(rows.column(0)[k].values, tid))
            if len(cols) > 1:
                stream = rows.column(1)[k].as_py()
                offsets = rows.column(2)[k].values.to_numpy().astype(np.int64)
                self._remember(self._pos_raw, tid, (stream, offsets))

    def _blocks_of(self, blocks: pa.Array, tid: int) -> PostingBlocks:
        return PostingBlocks.read(blocks, int(self.lengths[tid]), self.tail_codec, f"{self.where} token id {tid}")

    @staticmethod
    def _remember(cache: dict[int, Any], tid: int, value: Any) -> None:
        # A cached segment may serve queries on several threads at once.
        with _LOCK:
            while len(cache) >= _POSTING_CACHE:
                cache.pop(next(iter(cache)))
            cache[tid] = value

    def blocks(self, tid: int) -> PostingBlocks:
        """The posting blocks of token id ``tid``, not decoded (read when not prefetched)."""
        got = self._raw.get(tid)
        if got is None:
            if self._postings is not None:
                raw = self._postings[tid].values
            else:
                raw = self._row(tid, ["_posting"]).column(0).combine_chunks()[0].values
            got = self._blocks_of(raw, tid)
            self._remember(self._raw, tid, got)
        return got

    def posting(self, token: str) -> tuple[U32, U32] | None:
        """Doc ids and frequencies of ``token`` (``None`` when the partition lacks it)."""
        tid = self.token_id(token)
        if tid is None:
            return None
        got = self._cache.get(tid)
        if got is None:
            got = self.blocks(tid).decode_all()
            self._remember(self._cache, tid, got)
        return got

    def position_source(self, tid: int) -> tuple[bytes, npt.NDArray[np.int64]]:
        """The position stream of token id ``tid`` and the offset of every posting block's run in it."""
        if not self.has_positions:
            raise NotSupportedError("phrase queries need an INVERTED index built with with_position=True")
        got = self._pos_raw.get(tid)
        if got is None:
            if self._positions is not None:
                row = self._positions.slice(tid, 1)
            else:
                row = self._row(tid, ["_compressed_position", "_position_block_offset"])
            got = (row.column(0)[0].as_py(), row.column(1)[0].values.to_numpy().astype(np.int64))
            self._remember(self._pos_raw, tid, got)
        return got

    def token_positions(self, token: str) -> list[U32]:
        """Positions of ``token`` in each document of its posting list (same order)."""
        tid = self.token_id(token)
        got = self.posting(token)
        if tid is None or got is None:
            return []
        held = self._pos_cache.get(tid)
        if held is not None:
            return held
        stream, offsets = self.position_source(tid)
        allpos, start = positions_flat(stream, offsets, got[1], f"{self.where} token {token!r}")
        bounds = start.tolist()
        out = [allpos[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        self._remember(self._pos_cache, tid, out)
        return out

    def nbytes(self) -> int:
        """Rough bytes held (for the session's index cache)."""
        # The document arrays (12 bytes a document) are counted whether or not decoded yet.
        return int(12 * self.doc_count + self.lengths.nbytes + self.max_scores.nbytes + len(self.token_bytes)) + 4096


@dataclass
class InvertedFiles:
    """An opened INVERTED segment."""

    params: AnalyzerParams
    partitions: list[Partition]
    deleted_fragments: frozenset[int]
    metadata: dict[str, str]

    @property
    def num_docs(self) -> int:
        """Documents over every partition (BM25's ``N``)."""
        return sum(p.num_docs for p in self.partitions)

    @property
    def total_tokens(self) -> int:
        """Tokens over every partition (``avgdl = total_tokens / num_docs``)."""
        return sum(p.total_tokens for p in self.partitions)

    def doc_freq(self, token: str) -> int:
        """How many documents of the segment hold ``token``."""
        return sum(p.doc_freq(token) for p in self.partitions)


def read_params(src: IndexDir) -> tuple[AnalyzerParams, dict[str, str], frozenset[int], list[int]]:
    """The analyzer parameters, metadata, deleted fragments and partition ids of a segment."""
    table = src.reader(METADATA).read_all().to_table()
    meta = _meta(table)
    if meta.get("token_set_format", "arrow") != "fst":
        raise NotSupportedError(
            f"INVERTED index {src.uuid}: token set format {meta.get('token_set_format', 'arrow')!r} is not "
            "supported (fst is; optimize the index with pylance to rewrite it)")
    try:
        params = AnalyzerParams.from_json(meta.get("params", "{}"))
        parts = [int(p) for p in json.loads(meta.get("partitions", "[]"))]
        raw = table.column("deleted_fragments")[0].as_py() if table.num_rows else None
        deleted = frozenset(BitMap.deserialize(raw)) if raw else frozenset()
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptFileError(f"{src.store.uri(src.key(METADATA))}: unreadable INVERTED metadata: {exc}") from exc
    return params, meta, deleted, parts


def open_partition(src: IndexDir, part: int) -> Partition:
    """Open partition ``part`` of a segment (documents and posting lists are read when first asked for)."""
    where = src.store.uri(src.key(invert_file(part)))
    tok = src.reader(tokens_file(part)).read_all().to_table()
    token_bytes = tok.column("_token_fst_bytes")[0].as_py()
    docs = src.reader(docs_file(part))
    reader = src.reader(invert_file(part), columns=["_length", "_max_score"])
    inv = reader.read_all(batch_size=max(1, reader.num_rows)).to_table()
    meta = _meta(inv)
    codec = meta.get("posting_tail_codec", "fixed32_v1")
    if codec not in ("fixed32_v1", "varint_delta_v1"):
        raise NotSupportedError(f"{where}: posting tail codec {codec!r} is not supported")
    if int(meta.get("posting_block_size", "128")) != 128:
        raise NotSupportedError(f"{where}: posting blocks of {meta['posting_block_size']} documents are not supported")
    full_schema = src.reader(invert_file(part)).schema
    has_pos = "_compressed_position" in full_schema.names
    if has_pos and meta.get("positions_codec", "packed_delta_v1") != "packed_delta_v1":
        raise NotSupportedError(f"{where}: positions codec {meta.get('positions_codec')!r} is not supported")
    count = fst.key_count(token_bytes, src.store.uri(src.key(tokens_file(part))))
    if inv.num_rows != count:
        raise CorruptFileError(f"{where}: {inv.num_rows} posting lists for {count} tokens")
    doc_meta = {k.decode(): v.decode() for k, v in (docs.schema.metadata or {}).items()}
    return Partition(
        id=part,
        doc_count=docs.num_rows,
        total_tokens=int(doc_meta.get("total_tokens", "0")),
        lengths=inv.column("_length").combine_chunks().to_numpy().astype(np.uint32),
        max_scores=inv.column("_max_score").combine_chunks().to_numpy().astype(np.float32),
        has_positions=has_pos,
        tail_codec=codec,
        where=where,
        src=src,
        token_bytes=token_bytes,
    )


def read_partition(src: IndexDir, part: int) -> Partition:
    """Open partition ``part`` with every posting list and the whole token map read."""
    p = open_partition(src, part)
    p.preload()
    _ = p.row_ids
    _ = p.tokens
    return p


def read_segment(src: IndexDir) -> InvertedFiles:
    """Open every partition of an INVERTED segment (posting lists read on demand)."""
    params, meta, deleted, parts = read_params(src)
    return InvertedFiles(params, [open_partition(src, p) for p in parts], deleted, meta)


#: Opened segments in the store's session, by the segment directory's URI (segments are immutable).
SEGMENT: CacheKind[InvertedFiles] = CacheKind("inverted_segment")


def cached_segment(src: IndexDir) -> InvertedFiles:
    """:func:`read_segment` through the session's index cache, so repeated queries read nothing again."""
    cache = src.store.session.index_cache
    key = src.store.uri(src.prefix)
    got = cache.get(SEGMENT, key)
    if got is None:
        got = read_segment(src)
        # Room for the decoded posting lists each partition may keep.
        cache.put(SEGMENT, key, got, sum(p.nbytes() for p in got.partitions) + len(got.partitions) * (1 << 20))
    return got


def describe(files: InvertedFiles) -> dict[str, Any]:
    """Statistics keys of a segment (``num_partitions``, ``num_docs``, ``num_tokens``)."""
    return {"num_partitions": len(files.partitions), "num_docs": files.num_docs,
            "num_tokens": sum(int(p.lengths.size) for p in files.partitions), "params": files.params.to_json()}
