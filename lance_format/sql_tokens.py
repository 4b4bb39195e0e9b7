"""``contains_tokens(column, 'words')``: the token filter pylance registers with DataFusion.

pylance's UDF (``rust/lance-datafusion/src/udf.rs``) splits the text and the query at every
character that is not alphanumeric and keeps a row when each query token is one of the row's
tokens. The comparison is exact: no lowercasing, stemming or stop words (an INVERTED index
only narrows the candidates, see :mod:`lance_format.index.inverted.tokens_filter`). A NULL
text gives NULL; a query without tokens (``''``, ``'--'``, or NULL) keeps every non-NULL row.

Here each query token becomes one anchored regular expression over the column (RE2,
vectorised by Arrow): the token with a non-alphanumeric character or the text's edge on each
side. Unicode letters and numbers (``\\p{L}``, ``\\p{N}``) count as alphanumeric, as Rust's
``char::is_alphanumeric`` counts its Alphabetic and Numeric properties (combining marks that
Unicode calls alphabetic are the one known difference).
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.sql_core import Semantics, _is_string, _Val

__all__ = ["contains_tokens", "query_tokens"]

_WORD = r"\p{L}\p{N}"


def query_tokens(text: str) -> list[str]:
    """The tokens of ``text`` as pylance's ``contains_tokens`` splits it (alphanumeric runs)."""
    out: list[str] = []
    word: list[str] = []
    for ch in text:  # the query is one short literal, not column data
        if ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def contains_tokens(sem: Semantics, subject: _Val, query: str | None) -> _Val:
    """Whether each row of ``subject`` holds every token of ``query`` (NULL where the row is NULL).

    Args:
        sem: The filter being translated (its errors name the filter text).
        subject: The text operand; other types are compared as their string form, as
            DataFusion casts them to Utf8 for the UDF.
        query: The literal query text (``None`` for a NULL literal, which has no tokens).

    Returns:
        A boolean operand.
    """
    if not _is_string(subject.type):
        subject = sem._cast_val(subject, pa.string())
    tokens = list(dict.fromkeys(query_tokens(query or "")))
    if not tokens:
        # every non-NULL row matches: equal(x, x) is true, and NULL where x is NULL
        return sem._call("equal", [subject, subject])
    terms = [sem._call("match_substring_regex", [subject],
                       pattern=f"(?:^|[^{_WORD}]){tok}(?:$|[^{_WORD}])") for tok in tokens]
    return sem.combine(terms, "and_kleene", "AND")
