"""INVERTED: pylance's full-text index (:mod:`lance_format.index.inverted`).

A text-family kind: scans never use it for value predicates; ``full_text_query=`` reads it
through :mod:`lance_format.search.fulltext`. Builds tokenize per task on the runner and write
one partition; ``optimize_indices`` extends the segment with a new partition over the new
fragments, as pylance does (a new segment holding the old partitions' files and ``part_N``,
``partitions`` metadata extended). Remap rewrites every partition with translated row ids,
dropping rows the compaction removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError, UnsupportedIndexTypeError
from lance_format.index.codec import wire
from lance_format.index.inverted import builder, files
from lance_format.index.inverted.builder import TokenChunk
from lance_format.index.inverted.tokenizer import Analyzer, AnalyzerParams, is_text_type
from lance_format.index.inverted.tokens_filter import TokensReader, accelerates_tokens
from lance_format.index.kind import BuildContext, IndexKind, TrainingData
from lance_format.index.predicates import IndexQuery, TokensContains
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


@dataclass(frozen=True)
class ExistingPartitions:
    """The model of an incremental build: the segment whose partitions the new one keeps."""

    src: IndexDir
    params: AnalyzerParams
    partitions: tuple[int, ...]
    deleted_fragments: frozenset[int]


#: ``tantivy::tokenizer::Language`` variants, the ``language`` values pylance 14.0.2 accepts.
LANGUAGES = frozenset({"Arabic", "Danish", "Dutch", "English", "Finnish", "French", "German", "Greek", "Hungarian",
                       "Italian", "Norwegian", "Portuguese", "Romanian", "Russian", "Spanish", "Swedish", "Tamil",
                       "Turkish"})
#: pylance's code-analyzer flags (``analyzer="code"`` only).
_CODE_FLAGS = ("split_identifiers", "split_on_numerics", "preserve_original", "index_operators")


def _enum_value(value: Any) -> Any:
    return getattr(value, "value", value)  # pylance passes DocumentGranularity members


def build_options(column: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` without pylance 14.0.2's build-only INVERTED options, once each is checked.

    These shape how pylance builds or lays out the index but are not tokenizer parameters:
    ``memory_limit`` / ``num_workers`` (build resources; ours writes one partition whatever
    they are, which queries answer alike), ``block_size`` and ``format_version`` (the posting
    layout: we write 128-document blocks, format 2), ``analyzer`` (``"text"``; pylance's
    ``"code"`` analyzer and its flags are not reproduced) and ``document_granularity``
    (``"row"``; one document per list element is not supported).

    Raises:
        NotSupportedError: an option value pylance accepts that we cannot build exactly.
        InvalidInputError: a value pylance refuses too.
    """
    out = dict(given)
    where = f"INVERTED index on column {column!r}"
    for name in ("memory_limit", "num_workers"):
        value = out.pop(name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise InvalidInputError(f"{where}: {name} must be a positive integer, got {value!r}")
    block = out.pop("block_size", None)
    if block is not None and block != 128:
        if block == 256:
            raise NotSupportedError(f"{where}: block_size=256 (pylance's experimental format-3 posting blocks) is "
                                    "not supported; use the default block_size=128")
        raise InvalidInputError(f"{where}: block_size must be 128 or 256, got {block!r}")
    version = out.pop("format_version", None)
    if version is not None and str(version).lower().removeprefix("v") != "2":
        raise NotSupportedError(f"{where}: format_version={version!r} is not supported; only format 2 (the "
                                "default for the text analyzer) is written")
    analyzer = _enum_value(out.pop("analyzer", None))
    if analyzer == "code":
        raise NotSupportedError(f"{where}: analyzer='code' (pylance's source-code analyzer) is not supported; "
                                "only analyzer='text' is reproduced exactly")
    if analyzer not in (None, "text"):
        raise InvalidInputError(f"{where}: unknown analyzer {analyzer!r}, expected 'text' or 'code'")
    for flag in _CODE_FLAGS:
        if out.pop(flag, False):
            raise InvalidInputError(f"{where}: {flag} is a flag of analyzer='code', which is not supported")
    granularity = _enum_value(out.pop("document_granularity", None))
    if granularity == "list_element":
        raise NotSupportedError(f"{where}: document_granularity=LIST_ELEMENT (one document per list element) is "
                                "not supported; the default ROW granularity indexes each row as one document")
    if granularity not in (None, "row"):
        raise InvalidInputError(f"{where}: unknown document_granularity {granularity!r}, expected 'row' or "
                                "'list_element'")
    return out


def _params(ctx_params: Mapping[str, Any]) -> AnalyzerParams:
    return AnalyzerParams.from_mapping(ctx_params)


def details_bytes(p: AnalyzerParams) -> bytes:
    """``InvertedIndexDetails`` as pylance 14.0.2 serializes it (``protos/table.proto``).

    Fields 12 (posting block size, 128) and 15 (format version, 2) are newer than our proto
    copy; pylance writes them and so do we.
    """
    out = [wire.len_field(1, p.base_tokenizer.encode()), wire.len_field(2, f'"{p.language}"'.encode())]
    if p.with_position:
        out.append(wire.varint_field(3, 1))
    if p.max_token_length is not None:
        out.append(wire.varint_field(4, p.max_token_length))
    for num, flag in ((5, p.lower_case), (6, p.stem), (7, p.remove_stop_words), (8, p.ascii_folding)):
        if flag:
            out.append(wire.varint_field(num, 1))
    for num, value in ((9, p.min_ngram_length), (10, p.max_ngram_length), (11, int(p.prefix_only))):
        if value:
            out.append(wire.varint_field(num, value))
    out += [wire.varint_field(12, 128), wire.varint_field(15, 2)]
    return b"".join(out)


def _copy(src: IndexDir, out: IndexDir, name: str) -> IndexFile:
    data = src.store.read(src.key(name))
    out.store.write(out.key(name), data)
    out.written.append(out.key(name))
    return IndexFile(name, len(data))


class InvertedKind(IndexKind):
    """pylance's ``InvertedIndexDetails`` (``rust/lance-index/src/scalar/inverted/``)."""

    name: ClassVar[str] = "INVERTED"
    aliases: ClassVar[tuple[str, ...]] = ("FTS",)
    details: ClassVar[str] = "InvertedIndexDetails"
    display: ClassVar[str] = "Inverted"
    family: ClassVar[Any] = "text"
    supported_version: ClassVar[int] = 2
    buildable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    incremental: ClassVar[bool] = True
    delta_absorbs_older: ClassVar[bool] = True
    # scans ask it only contains_tokens(), and only when the segment suits it (tokens_filter.py)
    queryable: ClassVar[bool] = True
    exact: ClassVar[bool] = False
    defaults: ClassVar[Mapping[str, Any]] = {
        "with_position": False, "base_tokenizer": "simple", "language": "English", "max_token_length": 40,
        "lower_case": True, "stem": True, "remove_stop_words": True, "custom_stop_words": None,
        "ascii_folding": True, "min_ngram_length": 3, "max_ngram_length": 3, "prefix_only": False,
    }

    def index_version(self, stable_row_ids: bool) -> int:
        return 2

    def params(self, column: str, given: Mapping[str, Any]) -> dict[str, Any]:
        out = super().params(column, build_options(column, given))
        if out["language"] not in LANGUAGES:
            raise InvalidInputError(f"INVERTED index on column {column!r}: unknown language {out['language']!r} "
                                    f"(one of {', '.join(sorted(LANGUAGES))})")
        if out["base_tokenizer"] == "ngram":
            # pylance 14.0.2 never stems or drops stop words from n-grams and records it so.
            out["stem"] = out["remove_stop_words"] = False
        Analyzer(_params(out))  # refuses tokenizers we cannot reproduce, before anything is read
        if out["min_ngram_length"] > out["max_ngram_length"] or out["min_ngram_length"] < 1:
            raise InvalidInputError(f"INVERTED index on column {column!r}: ngram lengths must satisfy "
                                    f"1 <= min_ngram_length <= max_ngram_length, got {out['min_ngram_length']}, "
                                    f"{out['max_ngram_length']}")
        return out

    def details_value(self, ctx: BuildContext, model: Any) -> bytes:
        if isinstance(model, ExistingPartitions):
            return details_bytes(model.params)
        return details_bytes(_params(ctx.params))

    def rebuild_request(self, src: IndexDir, meta: IndexMetadata) -> tuple[str, dict[str, Any]]:
        p = files.read_params(src)[0]
        keep = {k: getattr(p, k) for k in self.defaults}
        if keep["custom_stop_words"] is not None:
            keep["custom_stop_words"] = list(keep["custom_stop_words"])
        return self.name, keep

    def answers(self, query: IndexQuery) -> bool:
        """``contains_tokens(column, 'words')`` only (see :mod:`lance_format.index.inverted.tokens_filter`)."""
        return isinstance(query, TokensContains)

    def answers_filters(self, meta: IndexMetadata) -> bool:
        """``contains_tokens()`` filters, when the segment's analyzer suits them, as pylance's."""
        return accelerates_tokens(meta)

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> TokensReader:
        return TokensReader(files.cached_segment(src), src.store.uri(src.prefix))

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if not is_text_type(typ):
            raise UnsupportedIndexTypeError(f"an INVERTED index needs a string or list-of-string column; "
                                            f"column {column!r} is of type {typ}")

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> TokenChunk:
        params = model.params if isinstance(model, ExistingPartitions) else _params(ctx.params)
        return builder.tokenize(data.values, data.ids, params)

    def load_model(self, src: IndexDir, meta: IndexMetadata) -> ExistingPartitions:
        params, _, deleted, parts = files.read_params(src)
        return ExistingPartitions(src, params, tuple(parts), deleted)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        written: list[IndexFile] = []
        parts: list[int] = []
        deleted: frozenset[int] = frozenset()
        if isinstance(model, ExistingPartitions):
            params = model.params
            for part in model.partitions:
                for name in (files.invert_file(part), files.tokens_file(part), files.docs_file(part)):
                    written.append(_copy(model.src, out, name))
            parts = list(model.partitions)
            deleted = model.deleted_fragments
        else:
            params = _params(ctx.params)
        merged = builder.merge_chunks(list(chunks), params.with_position)
        new_part = max(parts, default=-1) + 1
        if len(merged.row_ids) or not parts:
            written += builder.write_partition(out, new_part, merged, params.with_position)
            parts.append(new_part)
        written.append(builder.write_metadata(out, params, parts, deleted))
        return tuple(written)

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        params, _, deleted, parts = files.read_params(src)
        written: list[IndexFile] = []
        for part in parts:
            p = files.read_partition(src, part)
            written += builder.write_partition(out, part, _remapped(p, amap), params.with_position)
        written.append(builder.write_metadata(out, params, parts, deleted))
        return tuple(written)

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        seg = files.read_segment(src)
        return {"num_partitions": len(seg.partitions), "num_docs": seg.num_docs,
                "num_tokens": sum(int(p.lengths.size) for p in seg.partitions)}


def _remapped(part: files.Partition, amap: RowAddressMap) -> TokenChunk:
    """A partition's documents as one chunk, row ids translated; rows the compaction dropped go."""
    new_ids, keep = amap.translate(part.row_ids)
    keep = np.asarray(keep, dtype=bool)
    new_doc = np.full(part.num_docs, -1, dtype=np.int64)
    new_doc[keep] = np.arange(int(keep.sum()))
    if not part.has_positions:
        return _remapped_bulk(part, new_ids, keep, new_doc)
    tokens = sorted(part.tokens, key=part.tokens.__getitem__)
    docs: list[npt.NDArray[np.uint32]] = []
    toks: list[npt.NDArray[np.uint32]] = []
    freqs: list[npt.NDArray[np.uint32]] = []
    pos: list[npt.NDArray[np.uint32]] = []
    kept: list[str] = []
    for tok in tokens:
        got = part.posting(tok)
        assert got is not None
        d, f = got
        nd = new_doc[d]
        live = nd >= 0
        if not live.any():
            continue  # every document of the token was removed: the partition no longer holds it
        docs.append(nd[live].astype(np.uint32))
        toks.append(np.full(int(live.sum()), len(kept), dtype=np.uint32))
        kept.append(tok)
        freqs.append(f[live])
        if part.has_positions:
            plist = part.token_positions(tok)
            pos.extend(p for p, ok in zip(plist, live.tolist(), strict=True) if ok)
    # Pairs by token, then document (a chunk's order), the positions alongside.
    doc_arr = np.concatenate(docs) if docs else np.zeros(0, np.uint32)
    tok_arr = np.concatenate(toks) if toks else np.zeros(0, np.uint32)
    freq_arr = np.concatenate(freqs) if freqs else np.zeros(0, np.uint32)
    positions = None
    if part.has_positions:
        positions = np.concatenate(pos).astype(np.uint32) if pos else np.zeros(0, np.uint32)
    return TokenChunk(np.asarray(new_ids, dtype=np.uint64), part.num_tokens[keep], kept,
                      doc_arr, tok_arr, freq_arr, positions)



def _remapped_bulk(part: files.Partition, new_ids: npt.NDArray[np.uint64], keep: npt.NDArray[np.bool_],
                   new_doc: npt.NDArray[np.int64]) -> TokenChunk:
    """:func:`_remapped` without positions: every posting list decoded and renumbered at once."""
    tok, doc, freq = part.all_postings()
    nd = new_doc[doc]
    live = nd >= 0
    tok, nd, freq = tok[live], nd[live], freq[live]
    # Tokens left without documents go; the others keep their order (by old token id).
    kept_ids = np.unique(tok)
    names: list[str] = [""] * int(part.lengths.size)
    for name, tid in part.tokens.items():
        names[tid] = name
    # Every token kept: ids are unchanged, so the partition's token map is reused as it is.
    same = kept_ids.size == len(names)
    return TokenChunk(np.asarray(new_ids, dtype=np.uint64), part.num_tokens[keep],
                      names if same else [names[i] for i in kept_ids.tolist()], nd.astype(np.uint32),
                      tok.astype(np.uint32) if same else np.searchsorted(kept_ids, tok).astype(np.uint32), freq,
                      None, part.token_bytes if same else None)


KIND = InvertedKind()
