"""SQL filter predicates translated into pyarrow compute expressions.

The dataset API accepts filters the way pylance does, as SQL ``WHERE``
predicates such as ``"x > 5 AND category IN ('a', 'b')"``.  :func:`parse_filter`
parses the text with sqlglot and rebuilds it as a :class:`pyarrow.compute.Expression`
that ``Table.filter`` / dataset scanners evaluate. The common shapes are first tried by a
small parser that needs no sqlglot (:mod:`lance_format.sql_fast`); both build values
through :class:`lance_format.sql_core.Semantics`, which holds the typing rules below.

Semantics follow pylance 14.0.2 (DataFusion underneath):

* three-valued logic: ``AND``/``OR`` are Kleene, a NULL predicate drops the row,
  ``x IN (1, NULL)`` is NULL (not FALSE) when ``x`` is not 1;
* floating-point comparisons use a total order: ``NaN = NaN`` and NaN sorts
  above every number (so ``f > 1`` keeps NaN rows);
* identifiers resolve case-insensitively when there is no exact match; backticks
  quote names; a double-quoted token names a column if one matches, otherwise it
  is a string literal (pylance treats all double-quoted tokens as strings);
* literals are cast to the type of the column they are compared with, so
  ``ts > '2024-01-01'`` or ``int8_col = 3`` work.  A naive timestamp literal
  compared with a zoned column means local time in that zone;
* ``array_has`` / ``array_has_any`` / ``array_has_all`` (and their aliases) take a list
  column and literals (``[..]`` or ``make_array(..)``), with DataFusion's null rules
  (:mod:`lance_format.sql_lists`).

pylance is stricter about literal types (``int_col > 2.5`` is an error there);
this module widens instead.  Known differences: NaNs *produced* by arithmetic
(``0.0 / 0``, ``-f``) may carry a sign bit that makes DataFusion sort them
below every number; here every NaN sorts high.  ``-0.0`` and ``0.0`` compare
equal here even between two columns.  DataFusion's simplifier folds some
contradictions to FALSE ignoring NULLs (``NOT (a AND NOT a)`` keeps rows where
``a`` is NULL there, and ``c NOT IN (1) OR c NOT IN (2)`` keeps NULL ``c``);
this module keeps strict three-valued logic.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from lance_format.errors import InvalidInputError
from lance_format.sql_core import Semantics, _clip, _const, _is_string
from lance_format.sql_core import _Val as _Val  # re-exported: lance_format.evolution.sqlexpr builds on it
from lance_format.sql_fast import parse_simple
from lance_format.sql_lists import LIST_FUNCTIONS, array_has, array_has_some, list_arguments
from lance_format.sql_tokens import contains_tokens

__all__ = ["parse_filter", "to_expression"]


class _LanceSql(Dialect):
    """Generic SQL with backtick and double-quote delimited identifiers."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ["`", '"']
        HEX_STRINGS = [("X'", "'"), ("x'", "'")]  # binary literals, as DataFusion reads them


#: Most terms one AND/OR chain may have (see ``_Translator._logic``).
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_CMP: dict[type[exp.Expr], str] = {
    exp.EQ: "equal",
    exp.NEQ: "not_equal",
    exp.LT: "less",
    exp.LTE: "less_equal",
    exp.GT: "greater",
    exp.GTE: "greater_equal",
}
_ARITH: dict[type[exp.Expr], str] = {
    exp.Add: "add",
    exp.Sub: "subtract",
    exp.Mul: "multiply",
    exp.Div: "divide",
    exp.Mod: "remainder",
}
_UNARY_FN: dict[type[exp.Expr], str] = {
    exp.Lower: "utf8_lower",
    exp.Upper: "utf8_upper",
    exp.Length: "utf8_length",
    exp.Abs: "abs",
    exp.IsNan: "is_nan",
}
_PATTERN_FN: dict[type[exp.Expr], str] = {
    exp.RegexpLike: "match_substring_regex",
    exp.StartsWith: "starts_with",
    exp.EndsWith: "ends_with",
    exp.Contains: "match_substring",
}
_DTYPES: dict[exp.DType, pa.DataType] = {
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.UTINYINT: pa.uint8(),
    exp.DataType.Type.USMALLINT: pa.uint16(),
    exp.DataType.Type.UINT: pa.uint32(),
    exp.DataType.Type.UBIGINT: pa.uint64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.CHAR: pa.string(),
    exp.DataType.Type.BINARY: pa.binary(),
    exp.DataType.Type.VARBINARY: pa.binary(),
    exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("ns"),
    exp.DataType.Type.TIMESTAMPNTZ: pa.timestamp("ns"),
    exp.DataType.Type.TIMESTAMPTZ: pa.timestamp("ns", "UTC"),
}


def parse_filter(text: str, schema: pa.Schema) -> pc.Expression:
    """Translate a SQL predicate into a pyarrow compute expression.

    Args:
        text: A SQL ``WHERE`` predicate, e.g. ``"x > 5 AND s LIKE 'a%'"``.
        schema: The Arrow schema of the data the filter will run against; it
            resolves column names and drives literal casts.

    Returns:
        A boolean :class:`pyarrow.compute.Expression` usable with
        ``Table.filter`` and pyarrow dataset scanners.

    Raises:
        InvalidInputError: The text does not parse, names an unknown column, uses an
            unsupported construct, or does not produce a boolean.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"filter must be a SQL string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInputError("filter is empty")
    simple = parse_simple(text, schema)  # the common shapes, without sqlglot; None when unsure
    return simple if simple is not None else _parse_with_sqlglot(text, schema)


def _parse_with_sqlglot(text: str, schema: pa.Schema) -> pc.Expression:
    """:func:`parse_filter` through the full sqlglot translator (non-empty ``text``)."""
    translator = _Translator(schema, text)
    try:
        source = _string_quote_unknown_names(text, schema)
        tree = sqlglot.parse_one(source, dialect=_LanceSql)
        result = translator.visit(tree)
    except SqlglotError as err:
        raise InvalidInputError(f"cannot parse filter {_clip(text)!r}: {_plain(err)}") from None
    except RecursionError:
        # Deep nesting ("((((...", NOT NOT ...) exhausts the parser's stack; pylance refuses
        # such filters too (sqlparser's recursion limit).
        raise InvalidInputError(f"filter {_clip(text)!r} is nested too deeply "
                                f"({len(text)} characters)") from None
    return translator.finish(result)


def to_expression(filter: str | pc.Expression | None, schema: pa.Schema) -> pc.Expression | None:
    """Normalise a ``filter=`` argument: SQL text is parsed, expressions pass through.

    Args:
        filter: ``None``, a SQL predicate string, or a pyarrow compute expression.
        schema: Arrow schema used to resolve SQL column names.

    Returns:
        ``None`` when no filter was given, otherwise a pyarrow compute expression.

    Raises:
        InvalidInputError: The filter is neither a string nor an expression, or it
            does not parse.
    """
    if filter is None:
        return None
    if isinstance(filter, pc.Expression):
        return filter
    if isinstance(filter, str):
        return parse_filter(filter, schema)
    raise InvalidInputError(f"filter must be a SQL string or pyarrow Expression, got {type(filter).__name__}")


def _string_quote_unknown_names(text: str, schema: pa.Schema) -> str:
    """Rewrite ``"word"`` tokens that name no column into ``'word'`` string literals."""
    try:
        toks = _LanceSql().tokenize(text)
    except SqlglotError as err:
        raise InvalidInputError(f"cannot parse filter {text!r}: {_plain(err)}") from None
    names = set(schema.names)
    out = text
    prev: Token | None = None
    edits = []
    for tok in toks:
        if (
            tok.token_type == TokenType.IDENTIFIER
            and text[tok.start] == '"'
            and (prev is None or prev.token_type != TokenType.DOT)
            and tok.text not in names
        ):
            edits.append((tok.start, tok.end, "'" + tok.text.replace("'", "''") + "'"))
        prev = tok
    for start, end, repl in reversed(edits):
        out = out[:start] + repl + out[end + 1 :]
    return out


def _plain(err: Exception) -> str:
    """The parser's message without its terminal underline escapes."""
    return _ANSI_RE.sub("", str(err))



class _Translator(Semantics):
    """Walks a sqlglot tree and builds the matching compute expression."""

    def __init__(self, schema: pa.Schema, text: str) -> None:
        super().__init__(schema, text)
        self._handlers: dict[type[exp.Expr], Callable[[Any], _Val]] = {
            exp.Column: self._column,
            exp.Dot: self._column,
            exp.Literal: self._literal,
            exp.Boolean: lambda n: self.boolean(bool(n.this)),
            exp.Null: lambda n: self.null(),
            exp.Paren: lambda n: self.visit(n.this),
            exp.And: lambda n: self._logic(n, "and_kleene"),
            exp.Or: lambda n: self._logic(n, "or_kleene"),
            exp.Not: self._not,
            exp.Neg: self._neg,
            exp.In: self._in,
            exp.Between: self._between,
            exp.Is: self._is,
            exp.Like: self._like,
            exp.ILike: self._like,
            exp.Escape: self._like,
            exp.Cast: self._cast,
            exp.NullSafeEQ: self._null_safe,
            exp.NullSafeNEQ: self._null_safe,
            exp.Coalesce: self._coalesce,
            exp.Anonymous: self._anonymous,
            exp.HexString: lambda n: _const(pa.scalar(bytes.fromhex(str(n.this)), pa.binary())),
            exp.Bracket: self._bracket,
            # DataFusion's current_date is the UTC date when the query runs
            exp.CurrentDate: lambda n: _const(pa.scalar(dt.datetime.now(dt.UTC).date(), pa.date32())),
            exp.ArrayContains: lambda n: self._list_fn("array_has", [n.this, n.expression]),
            exp.ArrayContainsAll: lambda n: self._list_fn("array_has_all", [n.this, n.expression]),
        }

    # -- dispatch ----------------------------------------------------------

    def visit(self, node: exp.Expr) -> _Val:
        kind = type(node)
        if kind in (exp.EQ, exp.NEQ) and (isinstance(node.this, exp.Array) or isinstance(node.expression, exp.Array)):
            return self._list_equals(node, negate=kind is exp.NEQ)
        if kind in _CMP:
            return self.compare(_CMP[kind], self.visit(node.this), self.visit(node.expression))
        if kind in _ARITH:
            operands = self._decimal_operands(self.visit(node.this), self.visit(node.expression))
            return self._call(_ARITH[kind], list(operands))
        if kind in _UNARY_FN:
            return self._unary_fn(node, _UNARY_FN[kind])
        if kind in _PATTERN_FN:
            pattern = self._pattern(node.expression, kind.__name__)
            return self._call(_PATTERN_FN[kind], [self.visit(node.this)], pattern=pattern)
        handler = self._handlers.get(kind)
        if handler is None:
            raise self.fail(f"unsupported SQL construct {node.sql(dialect=_LanceSql)!r} ({kind.__name__})")
        return handler(node)

    # -- leaves --------------------------------------------------------------

    def _column(self, node: exp.Expr) -> _Val:
        return self.column(self._path(node))

    def _path(self, node: exp.Expr) -> list[str]:
        if isinstance(node, exp.Dot):
            return [*self._path(node.this), node.expression.name]
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            return [part.name for part in node.parts]
        raise self.fail(f"unsupported column reference {node.sql()!r}")

    def _literal(self, node: exp.Literal) -> _Val:
        raw = str(node.this)
        return self.string(raw) if node.is_string else self.number(raw)

    # -- logic ---------------------------------------------------------------

    def _logic(self, node: exp.Expr, fn: str) -> _Val:
        # ``a OR b OR c ...`` parses as a left-deep tree: walking it recursively would overflow
        # the stack on long generated filters (pylance takes 20,000-term chains). Flatten the
        # chain without recursion and combine balanced, which AND/OR (Kleene) allow.
        kind, what = type(node), node.key.upper()
        operands: list[exp.Expr] = []
        stack: list[exp.Expr] = [node]
        while stack:
            item = stack.pop()
            if type(item) is kind:
                stack.extend((item.expression, item.this))
            else:
                operands.append(item)
        too_long = self.chain_too_long(len(operands), what)
        if too_long is not None:
            raise too_long
        return self.combine([self.visit(item) for item in operands], fn, what)

    def _not(self, node: exp.Not) -> _Val:
        return self.logical_not(self.visit(node.this))

    def _negated(self, node: exp.Expr, val: _Val) -> _Val:
        return self.negated(bool(node.args.get("negate")), val)

    def _is(self, node: exp.Is) -> _Val:
        val = self.visit(node.this)
        target = node.expression
        negate = bool(node.args.get("negate"))
        if isinstance(target, exp.Null):
            return self.is_null(val, negate=negate)
        if isinstance(target, exp.Boolean):
            return self.is_truth(val, bool(target.this), negate=negate)
        raise self.fail(f"unsupported IS operand {target.sql()!r}")

    # -- comparisons -----------------------------------------------------------

    def _in(self, node: exp.In) -> _Val:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.fail("IN supports only a literal list")
        subject = self.visit(node.this)
        return self.in_list(subject, [self.visit(e) for e in node.expressions],
                            negate=bool(node.args.get("negate")))

    def _between(self, node: exp.Between) -> _Val:
        subject = self.visit(node.this)
        return self.between(subject, self.visit(node.args["low"]), self.visit(node.args["high"]),
                            negate=bool(node.args.get("negate")))

    def _null_safe(self, node: exp.Expr) -> _Val:
        left, right = self.visit(node.this), self.visit(node.expression)
        eq = self.compare("equal", left, right)
        both_null = pc.and_kleene(pc.is_null(left.expr), pc.is_null(right.expr))
        expr = pc.or_kleene(pc.coalesce(eq.expr, False), both_null)
        return _Val(expr if isinstance(node, exp.NullSafeEQ) else ~expr, pa.bool_())

    # -- strings -----------------------------------------------------------------

    def _pattern(self, node: exp.Expr, what: str) -> str:
        """The string literal ``node``, the pattern argument of ``what``."""
        pattern = self.visit(node)
        if pattern.const is None or not _is_string(pattern.type) or not pattern.const.is_valid:
            raise self.fail(f"the pattern of {what} must be a string literal, got {node.sql()!r}")
        return str(pattern.const.as_py())

    def _like(self, node: exp.Expr) -> _Val:
        escape = None
        if isinstance(node, exp.Escape):
            escape = self._pattern(node.expression, "ESCAPE")
            node = node.this
            if len(escape) != 1:
                raise self.fail(f"ESCAPE must be one character, got {escape!r}")
        pattern = self._pattern(node.expression, node.key.upper())
        if escape is not None and escape != "\\":
            pattern = _rewrite_escape(pattern, escape)
        subject = self.visit(node.this)
        if not _is_string(subject.type):
            raise self.fail(f"LIKE needs a string operand, got {subject.type}")
        ignore_case = isinstance(node, exp.ILike)
        if "\\" in pattern:
            # Arrow's match_like turns '%<literal>' into ends_with without unescaping the
            # literal ('%\\' finds nothing): escaped patterns go through an anchored regex.
            out = self._call("match_substring_regex", [subject], pattern=_like_regex(pattern),
                             ignore_case=ignore_case)
        else:
            out = self._call("match_like", [subject], pattern=pattern, ignore_case=ignore_case)
        return self._negated(node, out)

    def _unary_fn(self, node: exp.Expr, fn: str) -> _Val:
        arg = self.visit(node.this)
        if fn == "utf8_length" and pa.types.is_binary(arg.type):
            fn = "binary_length"
        return self._call(fn, [arg])

    def _coalesce(self, node: exp.Coalesce) -> _Val:
        args = [self.visit(node.this), *(self.visit(e) for e in node.expressions)]
        anchor = next((a for a in args if a.const is None), args[0])
        return self._call("coalesce", [self._unify(anchor, a)[1] for a in args])

    def _anonymous(self, node: exp.Anonymous) -> _Val:
        name = str(node.this).lower()
        if name == "regexp_match" and len(node.expressions) == 2:
            subject = self.visit(node.expressions[0])
            pattern = self._pattern(node.expressions[1], name)
            return self._call("match_substring_regex", [subject], pattern=pattern)
        if name in LIST_FUNCTIONS:
            return self._list_fn(LIST_FUNCTIONS[name], list(node.expressions))
        if name == "contains_tokens":
            return self._contains_tokens(list(node.expressions))
        if name == "arrow_cast" and len(node.expressions) == 2:
            target = self._pattern(node.expressions[1], name)
            arrow = arrow_type_named(target)
            if arrow is None:
                raise self.fail(f"arrow_cast(): unsupported Arrow type name {target!r}")
            return self._cast_val(self.visit(node.expressions[0]), arrow)
        raise self.fail(f"unsupported function {name}()")

    def _contains_tokens(self, args: list[exp.Expr]) -> _Val:
        """``contains_tokens(text, 'words')`` (:mod:`lance_format.sql_tokens`)."""
        if len(args) != 2:
            raise self.fail(f"contains_tokens() takes 2 arguments (a column and a string), got {len(args)}")
        query = self.visit(args[1])
        if query.const is None:
            raise self.fail(f"contains_tokens() takes a literal as its second argument, got {args[1].sql()!r}")
        text = None if not query.const.is_valid else str(query.const.as_py())
        return contains_tokens(self, self.visit(args[0]), text)

    def _list_equals(self, node: exp.Expr, *, negate: bool) -> _Val:
        """``list_col = [a, b]``: same length and equal items in order (NULL when the list is NULL)."""
        literal, other = (node.this, node.expression) if isinstance(node.this, exp.Array) else \
            (node.expression, node.this)
        subject = self.visit(other)
        if not (pa.types.is_list(subject.type) or pa.types.is_large_list(subject.type)
                or pa.types.is_fixed_size_list(subject.type)):
            raise self.fail(f"{node.sql()!r}: a [...] literal compares with a list column")
        items = [self.visit(e) for e in literal.expressions]
        terms = [self.compare("equal", self._call("list_value_length", [subject]), self.number(str(len(items))))]
        for i, item in enumerate(items):
            sliced = self._call("list_slice", [subject], start=i, stop=i + 1, return_fixed_size_list=True)
            value = self._call("list_element", [sliced, self.number("0")])
            # items compare as Arrow compares list values: NULL equals NULL, NULL differs from a value
            eq = self.compare("equal", value, item)
            both_null = pc.and_kleene(pc.is_null(value.expr), pc.is_null(item.expr))
            terms.append(_Val(pc.or_kleene(pc.coalesce(eq.expr, False), both_null), pa.bool_()))
        out = self.combine(terms, "and_kleene", "AND")
        # a NULL list compares as NULL (its items would otherwise read as "different")
        out = _Val(pc.if_else(pc.is_null(subject.expr), pa.scalar(None, pa.bool_()), out.expr), pa.bool_())
        return self.logical_not(out) if negate else out

    def _bracket(self, node: exp.Bracket) -> _Val:
        """``list[i]``: the ``i``-th item, counting from 1 (DataFusion's), NULL past the end."""
        if len(node.expressions) != 1 or not isinstance(node.expressions[0], exp.Literal):
            raise self.fail(f"unsupported subscript {node.sql()!r}: use one integer literal")
        index = int(str(node.expressions[0].this))
        subject = self.visit(node.this)
        if not (pa.types.is_list(subject.type) or pa.types.is_large_list(subject.type)
                or pa.types.is_fixed_size_list(subject.type)) or index < 1:
            raise self.fail(f"unsupported subscript {node.sql()!r}: a list column and an index from 1")
        # a one-item fixed-size slice is padded with NULL where the list is shorter
        item = self._call("list_slice", [subject], start=index - 1, stop=index, return_fixed_size_list=True)
        return self._call("list_element", [item, self.number("0")])

    def _list_fn(self, name: str, args: list[exp.Expr]) -> _Val:
        """``array_has`` / ``array_has_any`` / ``array_has_all`` (:mod:`lance_format.sql_lists`)."""
        if len(args) != 2:
            raise self.fail(f"{name}() takes 2 arguments, got {len(args)}")
        if name == "array_has":
            return array_has(self, self.visit(args[0]), self.visit(args[1]), name)
        first, items = list_arguments(name, args)
        if items is None:
            raise self.fail(f"{name}() takes a literal list ([...] or make_array(...)) as its second argument")
        return array_has_some(self, self.visit(first), [self.visit(e) for e in items],
                              every=name == "array_has_all", what=name)

    def _neg(self, node: exp.Neg) -> _Val:
        return self.negative(self.visit(node.this))

    def _cast(self, node: exp.Cast) -> _Val:
        target = self._arrow_type(node.to)
        return self._cast_val(self.visit(node.this), target)

    def _arrow_type(self, dtype: exp.DataType) -> pa.DataType:
        kind = dtype.this
        if kind in (exp.DataType.Type.DATETIME, exp.DataType.Type.TIMESTAMP) and dtype.expressions:
            # DATETIME(n) / TIMESTAMP(n): n fractional digits pick the unit (lance's SQL dialect)
            digits = int(dtype.expressions[0].this.this)
            unit = {0: "s", 3: "ms", 6: "us", 9: "ns"}.get(digits)
            if unit is None:
                raise self.fail(f"unsupported timestamp precision {digits} (use 0, 3, 6 or 9)")
            return pa.timestamp(unit)
        if kind == exp.DataType.Type.DECIMAL:
            params = [int(p.this.this) for p in dtype.expressions]
            precision, scale = {0: (38, 10), 1: (*params, 0)}.get(len(params), tuple(params[:2]))
            return pa.decimal128(precision, scale)
        if kind not in _DTYPES:
            raise self.fail(f"unsupported CAST target {dtype.sql()}")
        return _DTYPES[kind]


_ARROW_NAMES = {
    "Null": pa.null(), "Boolean": pa.bool_(), "Int8": pa.int8(), "Int16": pa.int16(), "Int32": pa.int32(),
    "Int64": pa.int64(), "UInt8": pa.uint8(), "UInt16": pa.uint16(), "UInt32": pa.uint32(),
    "UInt64": pa.uint64(), "Float16": pa.float16(), "Float32": pa.float32(), "Float64": pa.float64(),
    "Utf8": pa.string(), "LargeUtf8": pa.large_string(), "Binary": pa.binary(), "LargeBinary": pa.large_binary(),
    "Date32": pa.date32(), "Date64": pa.date64(),
}
_TS_NAME = re.compile(r'Timestamp\((Second|Millisecond|Microsecond|Nanosecond),\s*(None|Some\("([^"]*)"\))\)')
_UNITS = {"Second": "s", "Millisecond": "ms", "Microsecond": "us", "Nanosecond": "ns"}


def arrow_type_named(name: str) -> pa.DataType | None:
    """The Arrow type DataFusion's ``arrow_cast`` names (``Int8``, ``Utf8``, ``Timestamp(Microsecond, None)``)."""
    name = name.strip()
    if name in _ARROW_NAMES:
        return _ARROW_NAMES[name]
    m = _TS_NAME.fullmatch(name)
    if m is not None:
        return pa.timestamp(_UNITS[m.group(1)], m.group(3))
    return None


def _like_regex(pattern: str) -> str:
    """A LIKE pattern (backslash escapes) as an anchored regular expression."""
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:  # patterns are tiny literals, not data: a Python loop is fine
        if ch == "\\":
            out.append(_regex_literal(next(chars, "\\")))  # a trailing backslash stands for itself
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(_regex_literal(ch))
    return "(?s)^" + "".join(out) + "$"


def _regex_literal(ch: str) -> str:
    """``ch`` matched literally by RE2 (which refuses escapes of characters that are not special)."""
    return "\\" + ch if ch in _REGEX_SPECIAL else ch


_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _rewrite_escape(pattern: str, escape: str) -> str:
    """Translate a LIKE pattern with a custom ESCAPE character to backslash escapes."""
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:  # patterns are tiny literals, not data: a Python loop is fine
        if ch == escape:
            out.append("\\" + next(chars, ""))
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)

