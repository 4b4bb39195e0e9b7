"""Full-text query objects with pylance's names (``lance.query``), and their normalisation.

``full_text_query=`` takes a string (a match query over the indexed column), a dict
(``{"query": ..., "columns": [...]}``), one of these classes, or an object that quacks like
one (``query``/``column``/``operator``... attributes, or a ``to_dict()``). pylance's own
``lance.query`` objects keep their arguments inside an opaque native handle and cannot be read
back, so they are refused with a message naming the class to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from lance_format.errors import InvalidInputError, NotSupportedError


class FullTextOperator(Enum):
    """How the terms of a match query combine."""

    AND = "AND"
    OR = "OR"


class Occur(Enum):
    """A boolean query clause's role."""

    SHOULD = "SHOULD"
    MUST = "MUST"
    MUST_NOT = "MUST_NOT"


class FullTextQuery:
    """Base of every query; ``a & b`` and ``a | b`` build boolean queries as pylance's do."""

    def __and__(self, other: FullTextQuery) -> BooleanQuery:
        return BooleanQuery([(Occur.MUST, self), (Occur.MUST, other)])

    def __or__(self, other: FullTextQuery) -> BooleanQuery:
        return BooleanQuery([(Occur.SHOULD, self), (Occur.SHOULD, other)])


@dataclass
class MatchQuery(FullTextQuery):
    """Documents holding the query's terms (any with ``OR``, all with ``AND``), BM25-scored."""

    query: str
    column: str | None = None
    boost: float = 1.0
    fuzziness: int | None = 0
    max_expansions: int = 50
    operator: FullTextOperator = FullTextOperator.OR
    prefix_length: int = 0


@dataclass
class PhraseQuery(FullTextQuery):
    """Documents holding the terms in order, at most ``slop`` positions apart."""

    query: str
    column: str | None = None
    slop: int = 0


@dataclass
class BoostQuery(FullTextQuery):
    """``positive``'s documents, scores multiplied by ``negative_boost`` where ``negative`` matches."""

    positive: FullTextQuery
    negative: FullTextQuery
    negative_boost: float = 0.5


@dataclass
class MultiMatchQuery(FullTextQuery):
    """One match query per column (with its boost)."""

    query: str
    columns: list[str]
    boosts: list[float] | None = None
    operator: FullTextOperator = FullTextOperator.OR


@dataclass
class BooleanQuery(FullTextQuery):
    """MUST clauses all match and add their scores, SHOULD clauses add theirs, MUST_NOT excludes."""

    queries: list[tuple[Occur, FullTextQuery]] = field(default_factory=list)


def _operator(value: Any) -> FullTextOperator:
    raw = getattr(value, "value", value)
    try:
        return FullTextOperator(str(raw).upper())
    except ValueError as exc:
        raise InvalidInputError(f"full-text operator must be AND or OR, got {raw!r}") from exc


def _occur(value: Any) -> Occur:
    raw = getattr(value, "value", value)
    try:
        return Occur(str(raw).upper())
    except ValueError as exc:
        raise InvalidInputError(f"boolean query occur must be SHOULD, MUST or MUST_NOT, got {raw!r}") from exc


def _from_dict(d: Mapping[str, Any], default_column: str | None) -> FullTextQuery:
    if "match" in d:
        m = d["match"]
        return MatchQuery(str(m.get("terms", m.get("query", ""))), m.get("column", default_column),
                          float(m.get("boost", 1.0)), m.get("fuzziness", 0), int(m.get("max_expansions", 50)),
                          _operator(m.get("operator", "OR")), int(m.get("prefix_length", 0)))
    if "match_phrase" in d:
        m = d["match_phrase"]
        return PhraseQuery(str(m.get("terms", m.get("query", ""))), m.get("column", default_column),
                           int(m.get("slop", 0)))
    if "query" in d:
        cols = d.get("columns")
        q = str(d["query"])
        if cols and len(cols) > 1:
            return MultiMatchQuery(q, list(cols))
        return MatchQuery(q, cols[0] if cols else default_column)
    raise InvalidInputError(f"full_text_query dict not understood: keys {sorted(d)}")


def normalize(query: Any, default_column: str | None = None) -> FullTextQuery:
    """The query object behind any accepted ``full_text_query`` value.

    Raises:
        NotSupportedError: a pylance ``lance.query`` object (opaque) or an unknown query kind.
        InvalidInputError: a malformed query.
    """
    if isinstance(query, str):
        return MatchQuery(query, default_column)
    if isinstance(query, Mapping):
        return _from_dict(query, default_column)
    if isinstance(query, MatchQuery | PhraseQuery | BooleanQuery | MultiMatchQuery | BoostQuery):
        return query
    if hasattr(query, "to_dict"):
        return _from_dict(query.to_dict(), default_column)
    names = type(query).__name__
    if hasattr(query, "queries"):
        return BooleanQuery([(_occur(o), normalize(q, default_column)) for o, q in query.queries])
    if hasattr(query, "positive") and hasattr(query, "negative"):
        return BoostQuery(normalize(query.positive, default_column), normalize(query.negative, default_column),
                          float(getattr(query, "negative_boost", 0.5)))
    if hasattr(query, "columns") and hasattr(query, "query"):
        return MultiMatchQuery(str(query.query), list(query.columns), getattr(query, "boosts", None),
                               _operator(getattr(query, "operator", "OR")))
    if hasattr(query, "slop") and hasattr(query, "query"):
        return PhraseQuery(str(query.query), getattr(query, "column", default_column), int(query.slop))
    if hasattr(query, "query") and hasattr(query, "column"):
        return MatchQuery(str(query.query), query.column, float(getattr(query, "boost", 1.0)),
                          getattr(query, "fuzziness", 0), int(getattr(query, "max_expansions", 50)),
                          _operator(getattr(query, "operator", "OR")), int(getattr(query, "prefix_length", 0)))
    if hasattr(query, "inner"):
        raise NotSupportedError(
            f"pylance's {names} keeps its arguments in a native handle that cannot be read back; build the "
            f"same query with lance_format.search.fts_query.{names}")
    raise NotSupportedError(f"full_text_query of type {names} is not supported")


def columns_of(query: FullTextQuery) -> list[str | None]:
    """Every column a query reads (``None``: the default column)."""
    if isinstance(query, MatchQuery | PhraseQuery):
        return [query.column]
    if isinstance(query, MultiMatchQuery):
        return list(query.columns)
    if isinstance(query, BoostQuery):
        return columns_of(query.positive) + columns_of(query.negative)
    if isinstance(query, BooleanQuery):
        return [c for _, q in query.queries for c in columns_of(q)]
    return []


def describe(query: FullTextQuery) -> str:
    """A one-line description for ``explain_plan``."""
    if isinstance(query, MatchQuery):
        return f"MatchQuery: column={query.column}, query=[{query.query}]"
    if isinstance(query, PhraseQuery):
        return f"PhraseQuery: column={query.column}, query=[{query.query}], slop={query.slop}"
    if isinstance(query, MultiMatchQuery):
        return f"MultiMatchQuery: columns={query.columns}, query=[{query.query}]"
    if isinstance(query, BoostQuery):
        return f"BoostQuery: positive=({describe(query.positive)}), negative=({describe(query.negative)})"
    if isinstance(query, BooleanQuery):
        return "BooleanQuery: " + ", ".join(f"{o.value} ({describe(q)})" for o, q in query.queries)
    return type(query).__name__


__all__: Sequence[str] = ("BooleanQuery", "BoostQuery", "FullTextOperator", "FullTextQuery", "MatchQuery",
                          "MultiMatchQuery", "Occur", "PhraseQuery", "columns_of", "describe", "normalize")
