"""``contains_tokens(column, 'words')``: the token filter pylance registers with DataFusion.

pylance's UDF (``rust/lance-datafusion/src/udf.rs``) splits the text and the query at every
character that is not alphanumeric and keeps a row when each query token is one of the row's
tokens. The comparison is exact: no lowercasing, stemming or stop words (an INVERTED index
only narrows the candidates, see :mod:`lance_format.index.inverted.tokens_filter`). A NULL
text gives NULL; a query without tokens (``''``, ``'--'``, or NULL) keeps every non-NULL row.

Evaluated by a registered Arrow UDF, vectorised per batch: each token is one cheap anchored
regular expression with ASCII word boundaries (the token with a character outside
``[A-Za-z0-9]`` or the text's edge on each side), searched only in the rows the previous
tokens kept. That is exact on ASCII rows; the surviving non-ASCII rows are checked again with
Unicode classes (``\\p{L}``, ``\\p{N}``), whose RE2 programs take milliseconds to
compile. Unicode letters and numbers count
as alphanumeric, as Rust's ``char::is_alphanumeric`` counts its Alphabetic and Numeric
properties (combining marks that Unicode calls alphabetic are the one known difference).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.sql_core import Semantics, _is_string, _node, _of, _Val
from lance_format.sql_program import Node

__all__ = ["contains_tokens", "query_tokens"]

_WORD = r"\p{L}\p{N}"
_ASCII_WORD = "A-Za-z0-9"
_UDF_PREFIX = "lance_contains_tokens_"
_LOCK = threading.Lock()
_REGISTERED: dict[str, str] = {}


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


def _all_tokens(text: pa.Array, tokens: list[str], word: str) -> pa.Array:
    """Rows holding every token bounded by characters outside ``word`` (a regex class body)."""
    out: pa.Array | None = None
    for tok in tokens:
        hit = pc.match_substring_regex(text, f"(?:^|[^{word}]){tok}(?:$|[^{word}])")
        out = hit if out is None else pc.and_kleene(out, hit)
    assert out is not None
    return out


def _is_text_list(typ: pa.DataType) -> bool:
    return (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and _is_string(typ.value_type)


def _joined(lists: pa.Array) -> pa.Array:
    """Each list's strings joined by a space (a NULL item adds no token, a NULL list stays NULL).

    DataFusion casts a list to Utf8 as ``[a, b]``: the brackets and separators only split tokens.
    """
    items = pc.fill_null(lists.values, "")
    flat = type(lists).from_arrays(lists.offsets, items)
    out = pc.binary_join(flat, pa.scalar(" ", lists.type.value_type))
    return pc.if_else(lists.is_null(), pa.scalar(None, out.type), out)


def _kernel(ctx: Any, text: Any, query: Any) -> pa.Array:
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    elif isinstance(text, pa.Scalar):
        text = pa.repeat(text, ctx.batch_length)
    if _is_text_list(text.type):
        text = _joined(text)
    q = query.as_py() if isinstance(query, pa.Scalar) else None
    tokens = list(dict.fromkeys(query_tokens(q or "")))
    if not tokens:
        return pc.equal(text, text)  # every non-NULL row; NULL where the text is NULL
    # ASCII word boundaries are exact on ASCII rows and a superset elsewhere (a non-ASCII
    # neighbour counts as a boundary): each token narrows the rows the next one searches
    rows = np.arange(len(text))
    sub = text
    for tok in tokens:
        hit = _all_tokens(sub, [tok], _ASCII_WORD).fill_null(False).to_numpy(zero_copy_only=False)
        keep = np.flatnonzero(hit)
        rows, sub = rows[keep], sub.take(pa.array(keep))
        if not rows.size:
            break
    got = np.zeros(len(text), dtype=bool)
    if rows.size:
        found = np.ones(rows.size, dtype=bool)
        wide = np.flatnonzero(~pc.string_is_ascii(sub).to_numpy(zero_copy_only=False))
        if wide.size:  # only these may be false matches: redo them with Unicode classes
            found[wide] = _all_tokens(sub.take(pa.array(wide)), tokens, _WORD).to_numpy(zero_copy_only=False)
        got[rows] = found
    return pa.array(got, pa.bool_(), mask=text.is_null().to_numpy(zero_copy_only=False))


def _udf(text_type: pa.DataType) -> str:
    """The UDF computing ``contains_tokens`` on ``text_type`` (registered on first use)."""
    key = str(text_type)
    with _LOCK:
        name = _REGISTERED.get(key)
        if name is None:
            name = f"{_UDF_PREFIX}{len(_REGISTERED)}"
            doc = {"summary": "contains_tokens of a SQL filter",
                   "description": "Every query token among the text's tokens (lance_format.sql_tokens)."}
            pc.register_scalar_function(_kernel, name, doc, {"text": text_type, "query": pa.string()}, pa.bool_())
            _REGISTERED[key] = name
    return name


def contains_tokens(sem: Semantics, subject: _Val, query: str | None) -> _Val:
    """Whether each row of ``subject`` holds every token of ``query`` (NULL where the row is NULL).

    Args:
        sem: The filter being translated (its errors name the filter text).
        subject: The text operand; a list of strings counts as its items' text, other types
            are compared as their string form, as DataFusion casts them to Utf8 for the UDF.
        query: The literal query text (``None`` for a NULL literal, which has no tokens).

    Returns:
        A boolean operand.
    """
    if not _is_string(subject.type) and not _is_text_list(subject.type):
        subject = sem._cast_val(subject, pa.string())
    text = _node(subject)
    needle = Node.const(pa.scalar(query, pa.string()))
    name = _udf(subject.type)
    node = Node(pc.Expression._call(name, [text.expr, needle.expr]), name, (text, needle))
    node.direct = True  # sql_program calls it through pc.call_function
    return _of(node, pa.bool_())
