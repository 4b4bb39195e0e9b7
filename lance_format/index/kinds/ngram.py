"""NGRAM: trigram posting lists for ``contains()`` (:mod:`lance_format.index.ngram`).

Inexact (candidates are re-checked by the scan). Holds row ids as the dataset hands them
out (stable row ids, or row addresses, which a compaction remaps as upstream's ``remap``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index import ngram
from lance_format.index.kind import BuildContext, IndexKind, TrainingData
from lance_format.index.predicates import Contains, IndexQuery
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap

U64 = npt.NDArray[np.uint64]
U32 = npt.NDArray[np.uint32]


@dataclass(frozen=True)
class NGramChunk:
    """One build task's distinct ``(token, row id)`` pairs, sorted."""

    tokens: U32
    ids: U64


class NGramReader:
    """An opened NGRAM segment as the scan asks it: ``contains`` candidates, no values (inexact)."""

    exact = False

    def __init__(self, index: ngram.NGramIndex):
        self.index = index

    @property
    def path(self) -> str:
        """The segment's file."""
        return self.index.path

    @property
    def nbytes(self) -> int:
        """Memory held at most (token list and cached posting lists), for the session's index cache."""
        return self.index.nbytes

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Candidate rows for ``contains``, each with a null value.

        Raises:
            UnsupportedIndexTypeError: not a ``contains`` query, or one without a trigram
                (the planner only hands over those :meth:`NGramKind.answers` accepts).
        """
        rows = self.index.search_contains(query.substring) if isinstance(query, Contains) else None
        if rows is None:
            raise UnsupportedIndexTypeError(f"{self.path}: an NGRAM index cannot answer {query.describe('column')}")
        return rows, pa.nulls(rows.size, pa.string())


class NGramKind(IndexKind):
    """pylance's ``NGramIndexDetails`` (``rust/lance-index/src/scalar/ngram.rs``)."""

    name: ClassVar[str] = "NGRAM"
    details: ClassVar[str] = "NGramIndexDetails"
    display: ClassVar[str] = "NGram"
    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    exact: ClassVar[bool] = False

    def answers(self, query: IndexQuery) -> bool:
        """``contains(column, s)`` where ``s`` has an alphanumeric trigram of ASCII characters."""
        return isinstance(query, Contains) and ngram.query_tokens(query.substring) is not None

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            raise UnsupportedIndexTypeError(
                f"an NGRAM index needs a string column; column {column!r} is of type {typ}")

    def encode(self, data: TrainingData, model: Any, ctx: BuildContext) -> NGramChunk:
        return NGramChunk(*ngram.tokenize(data.values, data.ids))

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        # tasks hold distinct rows: no pair repeats across them
        tokens, ids = ngram.merge_sorted_pairs([(c.tokens, c.ids) for c in chunks])
        return ngram.write_ngram(out, *ngram.group_postings(tokens, ids))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> NGramReader:
        return NGramReader(ngram.NGramIndex(src, domain))

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        tokens, postings = ngram.NGramIndex(src).read_all()
        flat_tok = np.repeat(tokens, [p.size for p in postings])
        flat_ids = np.concatenate(postings) if postings else np.empty(0, np.uint64)
        new, keep = amap.translate(flat_ids)
        flat_tok = flat_tok[keep]
        order = np.lexsort((new, flat_tok))
        return ngram.write_ngram(out, *ngram.group_postings(flat_tok[order], new[order]))

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        return {"num_ngrams": ngram.NGramIndex(src).num_ngrams}


KIND = NGramKind()
