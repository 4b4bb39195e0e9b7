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

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyroaring import BitMap

from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.index.inverted import fst
from lance_format.index.inverted.postings import U32, decode_positions, decode_posting
from lance_format.index.inverted.tokenizer import AnalyzerParams
from lance_format.index.store import IndexDir

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


@dataclass
class Partition:
    """One opened partition: its documents, tokens and (lazily decoded) posting lists."""

    id: int
    row_ids: U64
    num_tokens: U32
    total_tokens: int
    tokens: dict[str, int]
    postings: pa.ListArray
    lengths: U32
    max_scores: npt.NDArray[np.float32]
    positions: pa.Array | None
    position_offsets: pa.ListArray | None
    tail_codec: str
    where: str
    _cache: dict[int, tuple[U32, U32]] = field(default_factory=dict)

    @property
    def num_docs(self) -> int:
        """Documents (rows with at least one token) in the partition."""
        return len(self.row_ids)

    def doc_freq(self, token: str) -> int:
        """How many of the partition's documents hold ``token``."""
        tid = self.tokens.get(token)
        return 0 if tid is None else int(self.lengths[tid])

    def posting(self, token: str) -> tuple[U32, U32] | None:
        """Doc ids and frequencies of ``token`` (``None`` when the partition lacks it)."""
        tid = self.tokens.get(token)
        if tid is None:
            return None
        got = self._cache.get(tid)
        if got is None:
            blocks = self.postings[tid].values.to_pylist()
            got = decode_posting(blocks, int(self.lengths[tid]), self.tail_codec, f"{self.where} token {token!r}")
            self._cache[tid] = got
        return got

    def token_positions(self, token: str) -> list[U32]:
        """Positions of ``token`` in each document of its posting list (same order)."""
        tid = self.tokens.get(token)
        got = self.posting(token)
        if tid is None or got is None:
            return []
        if self.positions is None or self.position_offsets is None:
            raise NotSupportedError("phrase queries need an INVERTED index built with with_position=True")
        stream = self.positions[tid].as_py()
        offsets = self.position_offsets[tid].values.to_numpy()
        return decode_positions(stream, offsets, got[1], f"{self.where} token {token!r}")


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


def read_partition(src: IndexDir, part: int) -> Partition:
    """Open partition ``part`` of a segment."""
    where = src.store.uri(src.key(invert_file(part)))
    tok = src.reader(tokens_file(part)).read_all().to_table()
    tokens = fst.read_map(tok.column("_token_fst_bytes")[0].as_py(), src.store.uri(src.key(tokens_file(part))))
    docs = src.reader(docs_file(part)).read_all().to_table()
    inv = src.reader(invert_file(part)).read_all().to_table()
    meta = _meta(inv)
    codec = meta.get("posting_tail_codec", "fixed32_v1")
    if codec not in ("fixed32_v1", "varint_delta_v1"):
        raise NotSupportedError(f"{where}: posting tail codec {codec!r} is not supported")
    if int(meta.get("posting_block_size", "128")) != 128:
        raise NotSupportedError(f"{where}: posting blocks of {meta['posting_block_size']} documents are not supported")
    has_pos = "_compressed_position" in inv.column_names
    if has_pos and meta.get("positions_codec", "packed_delta_v1") != "packed_delta_v1":
        raise NotSupportedError(f"{where}: positions codec {meta.get('positions_codec')!r} is not supported")
    if inv.num_rows != len(tokens):
        raise CorruptFileError(f"{where}: {inv.num_rows} posting lists for {len(tokens)} tokens")
    return Partition(
        id=part,
        row_ids=docs.column("_rowid").to_numpy().astype(np.uint64),
        num_tokens=docs.column("_num_tokens").to_numpy().astype(np.uint32),
        total_tokens=int(_meta(docs).get("total_tokens", "0")),
        tokens=tokens,
        postings=inv.column("_posting").combine_chunks(),
        lengths=inv.column("_length").to_numpy().astype(np.uint32),
        max_scores=inv.column("_max_score").to_numpy().astype(np.float32),
        positions=inv.column("_compressed_position").combine_chunks() if has_pos else None,
        position_offsets=inv.column("_position_block_offset").combine_chunks() if has_pos else None,
        tail_codec=codec,
        where=where,
    )


def read_segment(src: IndexDir) -> InvertedFiles:
    """Open every partition of an INVERTED segment."""
    params, meta, deleted, parts = read_params(src)
    return InvertedFiles(params, [read_partition(src, p) for p in parts], deleted, meta)


def describe(files: InvertedFiles) -> dict[str, Any]:
    """Statistics keys of a segment (``num_partitions``, ``num_docs``, ``num_tokens``)."""
    return {"num_partitions": len(files.partitions), "num_docs": files.num_docs,
            "num_tokens": sum(len(p.tokens) for p in files.partitions), "params": files.params.to_json()}
