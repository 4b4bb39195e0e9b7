"""Which parts of a SQL filter an index can answer.

The filter text is parsed again with sqlglot (as :mod:`lance_format.sql` does) and the
predicates an index understands — ``=``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``,
``IN``, ``IS NULL``, ``contains``, ``starts_with`` / ``LIKE 'prefix%'`` and
``array_has`` / ``array_has_any`` / ``array_has_all`` on an indexed column against literals,
combined with ``AND`` / ``OR`` — become an :data:`IndexExpr`. Anything else is "not answerable" (``None``).

The index result is used as a *candidate set*: the full filter is still evaluated on
the fetched rows (pylance's ``refine_filter`` plays this role), so an answer may be a
superset but never miss a row. Hence ``AND`` may drop an unanswerable child, while
``OR`` with an unanswerable child is unanswerable.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from lance_format.arrays import literal_scalar
from lance_format.index.kind import IndexedColumns
from lance_format.index.predicates import (
    Contains,
    HasAll,
    HasAny,
    In,
    IndexQuery,
    IsNull,
    Prefix,
    Range,
    TokensContains,
)
from lance_format.sql_lists import LIST_FUNCTIONS, is_list_type, list_arguments


@dataclass(frozen=True)
class Leaf:
    """One predicate answered by the index ``index_name``."""

    column: str
    query: IndexQuery
    index_name: str
    index_type: str  # display type, e.g. "BTree"

    def describe(self) -> str:
        """pylance's ``[a = 3]@a_idx(BTree)`` form."""
        return f"[{self.query.describe(self.column)}]@{self.index_name}({self.index_type})"


@dataclass(frozen=True)
class AndExpr:
    """Rows matching every child."""

    children: tuple[IndexExpr, ...]

    def describe(self) -> str:
        """``AND(child,child)``."""
        return f"AND({','.join(c.describe() for c in self.children)})"


@dataclass(frozen=True)
class OrExpr:
    """Rows matching any child."""

    children: tuple[IndexExpr, ...]

    def describe(self) -> str:
        """``OR(child,child)``."""
        return f"OR({','.join(c.describe() for c in self.children)})"


IndexExpr = Leaf | AndExpr | OrExpr
#: column name -> (index name, display type, segments)


_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE, exp.EQ: exp.EQ}


def parse_index_expr(text: str, schema: pa.Schema, indexed: IndexedColumns) -> IndexExpr | None:
    """The index-answerable part of SQL filter ``text`` (``None`` if there is none)."""
    if not indexed:
        return None
    from lance_format.sql import _LanceSql

    try:
        tree = sqlglot.parse_one(text, read=_LanceSql)
    except (SqlglotError, ValueError):
        return None
    return _Builder(schema, indexed).visit(tree)


class _Builder:
    def __init__(self, schema: pa.Schema, indexed: IndexedColumns):
        self.schema = schema
        self.indexed = indexed

    def visit(self, node: exp.Expr) -> IndexExpr | None:
        if isinstance(node, exp.Paren):
            return self.visit(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            kids = [self.visit(node.left), self.visit(node.right)]
            if isinstance(node, exp.And):
                usable = [k for k in kids if k is not None]
                return _flat(AndExpr, usable) if usable else None
            return None if any(k is None for k in kids) else _flat(OrExpr, kids)  # type: ignore[arg-type]
        if type(node) in _FLIP:
            return self._compare(node)
        if isinstance(node, exp.Between):
            col = self._column(node.this)
            lo, hi = self._literal(col, node.args.get("low")), self._literal(col, node.args.get("high"))
            if col is None or lo is None or hi is None:
                return None
            return self._leaf(col, Range(lo, True, hi, True))
        if isinstance(node, exp.In):
            col = self._column(node.this)
            if col is None or node.args.get("query") is not None or node.args.get("unnest") is not None:
                return None
            vals = []
            for e in node.expressions:
                if isinstance(e, exp.Null):
                    continue  # a NULL in the list never makes a row match
                v = self._literal(col, e)
                if v is None:
                    return None
                vals.append(v)
            return self._leaf(col, In(tuple(vals)))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            col = self._column(node.this)
            return None if col is None else self._leaf(col, IsNull())
        if isinstance(node, exp.Contains):
            col = self._column(node.this)
            text = node.expression
            if col is None or not (isinstance(text, exp.Literal) and text.is_string):
                return None
            return self._leaf(col, Contains(str(text.this)))
        if isinstance(node, (exp.StartsWith, exp.Like, exp.Escape)):
            return self._like(node)
        if isinstance(node, exp.ArrayContains):
            return self._membership("array_has", [node.this, node.expression])
        if isinstance(node, exp.ArrayContainsAll):
            return self._membership("array_has_all", [node.this, node.expression])
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "contains_tokens":
            return self._contains_tokens(list(node.expressions))
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in LIST_FUNCTIONS:
            return self._membership(LIST_FUNCTIONS[str(node.this).lower()], list(node.expressions))
        return None

    def _like(self, node: exp.Expr) -> IndexExpr | None:
        """``starts_with`` / ``LIKE``: the literal prefix as a range, else its substrings for NGRAM."""
        if isinstance(node, exp.Escape):  # only the default escape: pylance refuses any other
            esc = node.expression
            if not (isinstance(esc, exp.Literal) and esc.is_string and esc.this == "\\"):
                return None
            node = node.this
            if not isinstance(node, exp.Like):
                return None
        if node.args.get("negate"):  # NOT LIKE: its rows are no range
            return None
        col = self._column(node.this)
        text = node.expression
        if col is None or not (isinstance(text, exp.Literal) and text.is_string):
            return None
        typ = self.schema.field(col).type
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
            return None
        if isinstance(node, exp.StartsWith):
            segments, exact = [str(text.this)], False
        else:
            segments, exact = _like_segments(str(text.this))
        if exact:  # no wildcard: LIKE is equality (pylance plans `s = v`)
            return self._leaf(col, Range(pa.scalar(segments[0], typ), True, pa.scalar(segments[0], typ), True))
        if segments[0]:
            leaf = self._leaf(col, Prefix.of(segments[0], typ))
            if leaf is not None:
                return leaf
        # An NGRAM index answers each literal part as a substring (pylance: a regexp_like leaf).
        found: list[IndexExpr] = []
        for part in segments:
            leaf = self._leaf(col, Contains(part)) if part else None
            if leaf is not None:
                found.append(leaf)
        return _flat(AndExpr, found) if found else None

    def _membership(self, name: str, args: list[exp.Expr]) -> IndexExpr | None:
        """``array_has`` / ``array_has_any`` / ``array_has_all`` on a list column against literals."""
        if len(args) != 2:
            return None
        if name == "array_has":
            if isinstance(args[1], exp.Null):
                return None  # NULL: no row is true
            col, items = self._column(args[0]), [args[1]]
        else:
            first, found = list_arguments(name, args)
            col, items = self._column(first), found or []
        if col is None or not items:  # an empty list: no index needed (false / true everywhere)
            return None
        typ = self.schema.field(col).type
        if not is_list_type(typ):
            return None
        values = []
        for e in items:
            v = pa.scalar(None, typ.value_type) if isinstance(e, exp.Null) else self._literal_of(typ.value_type, e)
            if v is None:
                return None
            values.append(v)
        return self._leaf(col, HasAll(tuple(values)) if name == "array_has_all" else HasAny(tuple(values)))

    def _compare(self, node: exp.Expr) -> IndexExpr | None:
        op: type[exp.Expr] = type(node)
        left, right = node.left, node.right  # type: ignore[attr-defined]
        col = self._column(left)
        if col is None:
            col, left, right, op = self._column(right), right, left, _FLIP[op]
        if col is None:
            return None
        v = self._literal(col, right)
        if v is None:
            return None
        if op is exp.EQ:
            return self._leaf(col, Range(v, True, v, True))
        if op in (exp.GT, exp.GTE):
            return self._leaf(col, Range(v, op is exp.GTE, None, True))
        return self._leaf(col, Range(None, True, v, op is exp.LTE))

    def _contains_tokens(self, args: list[exp.Expr]) -> IndexExpr | None:
        """``contains_tokens(col, 'words')``: a string literal only, as pylance's planner takes it."""
        col = self._column(args[0]) if len(args) == 2 else None
        text = args[1] if len(args) == 2 else None
        if col is None or not (isinstance(text, exp.Literal) and text.is_string):
            return None
        if self.schema.field(col).type != pa.string():
            return None  # pylance hands the index only Utf8 columns (the function's own type)
        return self._leaf(col, TokensContains(str(text.this)))

    def _leaf(self, col: str, query: IndexQuery) -> Leaf | None:
        for choice in self.indexed[col]:
            if choice.kind.answers(query):
                return Leaf(col, query, choice.name, choice.kind.display)
        return None

    def _column(self, node: exp.Expr | None) -> str | None:
        if not isinstance(node, exp.Column) or node.table:
            return None
        name = str(node.name)
        if name in self.indexed:
            return name
        matches: list[str] = [str(c) for c in self.schema.names if c.lower() == name.lower()]
        if name not in self.schema.names and len(matches) == 1 and matches[0] in self.indexed:
            return matches[0]
        return None

    def _literal(self, col: str | None, node: exp.Expr | None) -> pa.Scalar | None:
        if col is None:
            return None
        return self._literal_of(self.schema.field(col).type, node)

    def _literal_of(self, typ: pa.DataType, node: exp.Expr | None) -> pa.Scalar | None:
        if node is None:
            return None
        neg = False
        if isinstance(node, exp.Neg):
            node, neg = node.this, True
        t = pa.types
        value: object
        if isinstance(node, exp.Boolean) and not neg and t.is_boolean(typ):
            value = bool(node.this)
        elif isinstance(node, exp.Literal) and node.is_number:
            if not (t.is_integer(typ) or t.is_floating(typ) or t.is_decimal(typ)):
                return None
            text = ("-" if neg else "") + node.this
            conv: Callable[[str], object] = decimal.Decimal if t.is_decimal(typ) else (
                float if any(ch in text for ch in ".eE") else int)
            try:
                value = conv(text)
            except (ValueError, decimal.InvalidOperation):
                return None
        elif isinstance(node, exp.Literal) and node.is_string and not neg:
            # Zoned timestamps compare in the zone's local time in the SQL layer; leave them to it.
            zoned = t.is_timestamp(typ) and typ.tz is not None
            if not (t.is_string(typ) or t.is_large_string(typ) or t.is_date(typ) or t.is_timestamp(typ)) or zoned:
                return None
            value = node.this
        else:
            return None
        try:
            return literal_scalar(value).cast(typ)  # safe cast; pa.scalar would import pandas
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
            return None


def _like_segments(pattern: str) -> tuple[list[str], bool]:
    """The literal runs of a LIKE pattern (backslash escapes resolved) and whether it has no wildcard.

    The first run is the prefix every match starts with ('' when the pattern starts with a wildcard).
    """
    runs, current, wild = [], [], False
    chars = iter(pattern)
    for ch in chars:  # a literal of the filter text, not data
        if ch == "\\":
            current.append(next(chars, "\\"))
        elif ch in "%_":
            runs.append("".join(current))
            current, wild = [], True
        else:
            current.append(ch)
    runs.append("".join(current))
    return runs, not wild


def _flat(kind: type[AndExpr] | type[OrExpr], kids: list[IndexExpr]) -> IndexExpr:
    out: list[IndexExpr] = []
    for k in kids:
        out.extend(k.children if isinstance(k, kind) else (k,))
    return out[0] if len(out) == 1 else kind(tuple(out))
