"""``contains_tokens`` filters answered by an INVERTED index, as pylance 14.0.2 answers them.

pylance hands ``contains_tokens(column, 'words')`` to an INVERTED index only when the index
splits text the way the SQL function does (``can_accelerate_queries`` in
``rust/lance-index/src/scalar/inverted.rs``): the ``simple`` base tokenizer, no
``max_token_length``, language English and no stemming. Lowercasing, stop-word removal and
ASCII folding may be on: the index then returns a superset of the rows (a document holding
"Hello" is a candidate for "hello") and the scan checks each candidate with the SQL function.

The query goes through the index's own analyzer and a row is a candidate when its document
holds every resulting token. A query with no token left (empty, punctuation only, or only stop
words when the index drops them) has no candidates, so on indexed fragments such a filter keeps
nothing, while pylance's flat function keeps every non-NULL row there; rows of fragments the
index does not cover are filtered flat. Only a ``contains_tokens`` in positive position reaches
the index (under ``NOT`` pylance re-checks every row, as our planner does for any ``NOT``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index.codec import wire
from lance_format.index.inverted.files import InvertedFiles
from lance_format.index.inverted.tokenizer import Analyzer
from lance_format.index.predicates import IndexQuery, TokensContains
from lance_format.table.index_metadata import IndexMetadata

__all__ = ["TokensReader", "accelerates_tokens"]

U64 = npt.NDArray[np.uint64]


def accelerates_tokens(meta: IndexMetadata) -> bool:
    """Whether pylance answers ``contains_tokens`` with INVERTED segment ``meta`` (see the module doc)."""
    raw = meta.index_details.value if meta.index_details is not None else b""
    found = wire.field_map(raw, f"index {meta.name!r} details")
    if found is None:
        return False
    # field 1 base_tokenizer, 2 language (JSON text), 4 max_token_length, 6 stem (protos/index_old.proto)
    return found.get(1) == b"simple" and found.get(2) == b'"English"' and 4 not in found and not found.get(6)


class TokensReader:
    """An opened INVERTED segment as the scan asks it: ``contains_tokens`` candidates (inexact)."""

    exact = False

    def __init__(self, segment: InvertedFiles, path: str):
        self.segment = segment
        self._path = path
        self._analyzer = Analyzer(segment.params)

    @property
    def path(self) -> str:
        """The segment's directory (named in errors)."""
        return self._path

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Rows whose document holds every index token of the query, sorted, with null values.

        Raises:
            UnsupportedIndexTypeError: not a ``contains_tokens`` query (the planner hands over
                only those :meth:`InvertedKind.answers` accepts).
        """
        if not isinstance(query, TokensContains):
            raise UnsupportedIndexTypeError(f"{self.path}: an INVERTED index cannot answer {query.describe('column')}")
        tokens = list(dict.fromkeys(self._analyzer.tokens(query.text)))
        parts: list[U64] = []
        if tokens:
            for part in self.segment.partitions:
                docs: npt.NDArray[np.uint32] | None = None
                for tok in tokens:
                    got = part.posting(tok)
                    if got is None:
                        docs = None
                        break
                    docs = got[0] if docs is None else np.intersect1d(docs, got[0], assume_unique=True)
                    if docs.size == 0:
                        break
                if docs is not None and docs.size:
                    # all row ids decoded once and kept with the cached segment: later filters index them
                    parts.append(np.asarray(part.row_ids[docs.astype(np.int64)], dtype=np.uint64))
        rows = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
        return rows.astype(np.uint64), pa.nulls(rows.size, pa.string())
