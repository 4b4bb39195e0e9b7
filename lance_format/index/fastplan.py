"""Index plans of the common filter shapes without importing sqlglot.

Importing sqlglot (through :mod:`lance_format.index.query`) costs ~0.45 s of CPU in a fresh
process, several times what the indexed query itself costs. :func:`plan_simple` reads a
conjunction (``AND``) of ``column op literal`` (``=``, ``<``, ``<=``, ``>``, ``>=``, either
side), ``column BETWEEN literal AND literal``, ``column IN (literals)`` and ``column IS NULL``
with integer, decimal-point or single-quoted string literals, and builds exactly the plan
:func:`lance_format.index.query.parse_index_expr` builds for that text (same column
resolution, literal casts, leaves dropped from the conjunction when no index answers them).
Anything else returns :data:`UNKNOWN` and the caller uses the full parser, so this module
changes speed, never plans (``tests/index/test_fast_index_plan.py`` compares both).
"""

from __future__ import annotations

import re
import struct
import threading
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from lance_format.arrays import literal_scalar
from lance_format.index.kind import IndexedColumns
from lance_format.index.predicates import In, IndexQuery, IsNull, Range, TokensContains
from lance_format.sql_fast import RESERVED


@dataclass(frozen=True)
class FastLeaf:
    """One predicate answered by the index ``index_name`` (as ``query.Leaf``)."""

    column: str
    query: IndexQuery
    index_name: str
    index_type: str

    def describe(self) -> str:
        """pylance's ``[a = 3]@a_idx(BTree)`` form."""
        return f"[{self.query.describe(self.column)}]@{self.index_name}({self.index_type})"


@dataclass(frozen=True)
class FastAnd:
    """Rows matching every child (as ``query.AndExpr``)."""

    children: tuple[FastLeaf, ...]

    def describe(self) -> str:
        """``AND(child,child)``."""
        return f"AND({','.join(c.describe() for c in self.children)})"


class Unknown:
    """The text is outside the shapes read here."""


UNKNOWN: Final = Unknown()
FastExpr = FastLeaf | FastAnd

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>-?[0-9]+(?:\.[0-9]+)?(?![0-9A-Za-z_.]))
  | (?P<str>'(?:[^'\\]|'')*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op><=|>=|=|<|>|\(|\)|,)
)""", re.VERBOSE)
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


class _GiveUp(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                raise _GiveUp
            break
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def plan_simple(text: str, schema: pa.Schema, indexed: IndexedColumns) -> FastExpr | None | Unknown:
    """The index plan of ``text``, ``None`` if no index answers it, :data:`UNKNOWN` if not read here."""
    if not indexed:
        return None
    return _planned(text, schema, indexed)[0]


def plan_whole(text: str, schema: pa.Schema, indexed: IndexedColumns) -> FastExpr | None:
    """The index plan of ``text`` when every one of its terms became a leaf (none dropped), else ``None``.

    Such a plan stands for the whole filter: with exact kinds only, its rows are the filter's rows.
    """
    if not indexed:
        return None
    expr, dropped = _planned(text, schema, indexed)
    return None if isinstance(expr, Unknown) or dropped else expr


#: Plans by (text, schema, which indices answer which column): a count plans its filter twice
#: (``plan_whole``, then ``plan_simple`` when the index cannot count alone) and a long-lived
#: process sees the same filters again. Plans are immutable. Bounded: the oldest entries go first.
_PLANS: dict[tuple[str, pa.Schema, tuple[object, ...]], tuple[FastExpr | None | Unknown, int]] = {}
_PLANS_LOCK = threading.Lock()
_MAX_PLANS = 256


def _planned(text: str, schema: pa.Schema, indexed: IndexedColumns) -> tuple[FastExpr | None | Unknown, int]:
    """The plan of ``text`` and the number of its terms no index answers (memoised)."""
    # a leaf depends on the indices only through their names and kinds (kinds are registry singletons)
    key = (text, schema, tuple((col, tuple((c.name, id(c.kind)) for c in choices))
                               for col, choices in indexed.items()))
    found = _PLANS.get(key)
    if found is not None:
        return found
    planner = _Planner([], schema, indexed)
    try:
        planner.toks = _tokens(text)
        out: tuple[FastExpr | None | Unknown, int] = (planner.conjunction(), planner.dropped)
    except _GiveUp:
        out = (UNKNOWN, 0)
    with _PLANS_LOCK:
        while len(_PLANS) >= _MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)), None)
        _PLANS[key] = out
    return out


class _Planner:
    def __init__(self, toks: list[tuple[str, str]], schema: pa.Schema, indexed: IndexedColumns):
        self.toks = toks
        self.pos = 0
        self.schema = schema
        self.indexed = indexed
        self.dropped = 0  # terms no index answers (left to the filter)

    def _next(self) -> tuple[str, str]:
        if self.pos >= len(self.toks):
            raise _GiveUp
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def _word(self, word: str) -> bool:
        if self.pos < len(self.toks) and self.toks[self.pos][0] == "name" and self.toks[self.pos][1].upper() == word:
            self.pos += 1
            return True
        return False

    def _expect(self, kind: str, value: str | None = None) -> str:
        k, v = self._next()
        if k != kind or (value is not None and v.upper() != value):
            raise _GiveUp
        return v

    def conjunction(self) -> FastExpr | None:
        leaves: list[FastLeaf] = []
        while True:
            leaf = self.term()
            if leaf is not None:
                leaves.append(leaf)
            else:
                self.dropped += 1
            if self.pos == len(self.toks):
                break
            self._expect("name", "AND")
        if not leaves:
            return None
        return leaves[0] if len(leaves) == 1 else FastAnd(tuple(leaves))

    def term(self) -> FastLeaf | None:
        kind, value = self._next()
        if kind == "name" and value.lower() == "contains_tokens" and self.toks[self.pos:self.pos + 1] == [("op", "(")]:
            return self._contains_tokens()
        if kind == "name" and value.upper() not in RESERVED:
            col = self._column(value)
            if self._word("BETWEEN"):
                lo = self._literal(col)
                self._expect("name", "AND")
                hi = self._literal(col)
                return None if lo is None or hi is None else self._leaf(col, Range(lo, True, hi, True))
            if self._word("IN"):
                self._expect("op", "(")
                values: list[pa.Scalar | None] = []
                while True:
                    if self._word("NULL"):
                        pass  # a NULL in the list never makes a row match
                    else:
                        values.append(self._literal(col))
                    if self._expect("op") == ")":
                        break
                    if self.toks[self.pos - 1][1] != ",":
                        raise _GiveUp
                if any(v is None for v in values):
                    return None
                return self._leaf(col, In(tuple(v for v in values if v is not None)))
            if self._word("IS"):
                self._expect("name", "NULL")
                return self._leaf(col, IsNull())
            op = self._expect("op")
            if op not in _FLIP:
                raise _GiveUp
            return self._compare(col, op, self._literal(col))
        if kind in ("num", "str"):  # literal op column
            self.pos -= 1
            lit_at = self.pos
            self._next()
            op = self._expect("op")
            name = self._expect("name")
            if op not in _FLIP or name.upper() in RESERVED:
                raise _GiveUp
            col = self._column(name)
            end = self.pos
            self.pos = lit_at
            lit = self._literal(col)
            self.pos = end
            return self._compare(col, _FLIP[op], lit)
        raise _GiveUp

    def _contains_tokens(self) -> FastLeaf | None:
        """``contains_tokens(col, 'words')`` on a Utf8 column (as :mod:`lance_format.index.query` reads it)."""
        self._expect("op", "(")
        col = self._column(self._expect("name"))
        self._expect("op", ",")
        kind, text = self._next()
        if kind != "str" or "\\" in text:
            raise _GiveUp
        self._expect("op", ")")
        if col is None or self.schema.field(col).type != pa.string():
            return None
        return self._leaf(col, TokensContains(text[1:-1].replace("''", "'")))

    def _compare(self, col: str | None, op: str, v: pa.Scalar | None) -> FastLeaf | None:
        if col is None or v is None:
            return None
        if op == "=":
            return self._leaf(col, Range(v, True, v, True))
        if op in (">", ">="):
            return self._leaf(col, Range(v, op == ">=", None, True))
        return self._leaf(col, Range(None, True, v, op == "<="))

    def _leaf(self, col: str | None, query: IndexQuery) -> FastLeaf | None:
        if col is None:
            return None
        for choice in self.indexed[col]:
            if choice.kind.answers(query):
                return FastLeaf(col, query, choice.name, choice.kind.display)
        return None

    def _column(self, name: str) -> str | None:
        if name in self.indexed:
            return name
        matches = [str(c) for c in self.schema.names if c.lower() == name.lower()]
        if name not in self.schema.names and len(matches) == 1 and matches[0] in self.indexed:
            return matches[0]
        return None

    def _literal(self, col: str | None) -> pa.Scalar | None:
        """The next token as a literal of ``col``'s type (``None`` when it does not convert)."""
        kind, text = self._next()
        if kind not in ("num", "str"):
            raise _GiveUp
        if col is None:
            return None
        typ = self.schema.field(col).type
        t = pa.types
        value: object
        if kind == "num":
            if t.is_decimal(typ):
                raise _GiveUp  # decimals: the full parser
            if not (t.is_integer(typ) or t.is_floating(typ)):
                return None
            value = float(text) if "." in text else int(text)
        else:
            if "\\" in text:
                raise _GiveUp  # escapes: the full parser
            zoned = t.is_timestamp(typ) and typ.tz is not None
            if not (t.is_string(typ) or t.is_large_string(typ) or t.is_date(typ) or t.is_timestamp(typ)) or zoned:
                return None
            value = text[1:-1].replace("''", "'")
        try:
            return literal_scalar(value).cast(typ)  # safe cast: 2.5 never becomes 2
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError, struct.error):
            return None
