"""SQL filter predicates translated into pyarrow compute expressions.

The dataset API accepts filters the way pylance does, as SQL ``WHERE``
predicates such as ``"x > 5 AND category IN ('a', 'b')"``.  :func:`parse_filter`
parses the text with sqlglot and rebuilds it as a :class:`pyarrow.compute.Expression`
that ``Table.filter`` / dataset scanners evaluate.

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
  compared with a zoned column means local time in that zone.

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

import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

from lance_format.errors import InvalidInputError

__all__ = ["parse_filter", "to_expression"]


class _LanceSql(Dialect):
    """Generic SQL with backtick and double-quote delimited identifiers."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ["`", '"']


#: Most terms one AND/OR chain may have (see ``_Translator._logic``).
_MAX_CHAIN_TERMS = 4096
_INT_RE = re.compile(r"\d+")
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


@dataclass(frozen=True)
class _Val:
    """A translated operand: its expression, Arrow type, and value when constant."""

    expr: Any  # pc.Expression (pyarrow ships no type stubs)
    type: pa.DataType
    const: pa.Scalar | None = None
    text: str | None = None  # source text of a numeric literal, for exact decimals



def _null_bool() -> pa.Scalar:
    # Built on demand: creating a null scalar makes pyarrow import pandas, which
    # would add ~0.2 s to every `import lance_format`.
    return pa.scalar(None, pa.bool_())

def _const(value: pa.Scalar, text: str | None = None) -> _Val:
    return _Val(pc.scalar(value), value.type, value, text)


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
    try:
        source = _string_quote_unknown_names(text, schema)
        tree = sqlglot.parse_one(source, dialect=_LanceSql)
        result = _Translator(schema, text).visit(tree)
    except SqlglotError as err:
        raise InvalidInputError(f"cannot parse filter {_clip(text)!r}: {_plain(err)}") from None
    except RecursionError:
        # Deep nesting ("((((...", NOT NOT ...) exhausts the parser's stack; pylance refuses
        # such filters too (sqlparser's recursion limit).
        raise InvalidInputError(f"filter {_clip(text)!r} is nested too deeply "
                                f"({len(text)} characters)") from None
    if not pa.types.is_boolean(result.type):
        raise InvalidInputError(f"filter {text!r} does not return a boolean (it returns {result.type})")
    try:  # surface type errors now rather than from the scan
        schema.empty_table().filter(result.expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as err:
        raise InvalidInputError(f"filter {text!r} cannot be evaluated: {err}") from None
    return result.expr


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


def _clip(text: str, limit: int = 200) -> str:
    """``text`` shortened for an error message (generated filters can be megabytes)."""
    return text if len(text) <= limit else f"{text[:limit]}...[{len(text) - limit} more characters]"


def _plain(err: Exception) -> str:
    """The parser's message without its terminal underline escapes."""
    return _ANSI_RE.sub("", str(err))


def _lookup(fields: list[pa.Field], name: str) -> pa.Field | None:
    exact = [f for f in fields if f.name == name]
    if exact:
        return exact[0]
    folded = [f for f in fields if f.name.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _is_float(t: pa.DataType) -> bool:
    return bool(pa.types.is_floating(t))


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _kind(t: pa.DataType) -> str:
    """Coarse type family; literals are only cast within a family (strings parse into any)."""
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_temporal(t):
        return "temporal"
    if _is_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    return str(t)


class _Translator:
    """Walks a sqlglot tree and builds the matching compute expression."""

    def __init__(self, schema: pa.Schema, text: str) -> None:
        self.schema = schema
        self.text = text
        self._handlers: dict[type[exp.Expr], Callable[[Any], _Val]] = {
            exp.Column: self._column,
            exp.Dot: self._column,
            exp.Literal: self._literal,
            exp.Boolean: lambda n: _const(pa.scalar(bool(n.this))),
            exp.Null: lambda n: _const(pa.scalar(None)),
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
        }

    def fail(self, message: str) -> InvalidInputError:
        return InvalidInputError(f"filter {_clip(self.text)!r}: {message}")

    # -- dispatch ----------------------------------------------------------

    def visit(self, node: exp.Expr) -> _Val:
        kind = type(node)
        if kind in _CMP:
            return self._compare(_CMP[kind], self.visit(node.this), self.visit(node.expression))
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

    def _call(self, fn: str, args: list[_Val], **options: Any) -> _Val:
        """Apply compute function ``fn``; the result type comes from running it on empty arrays."""
        func = getattr(pc, fn)
        try:
            out_type = func(*[pa.array([], a.type) for a in args], **options).type
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as err:
            types = ", ".join(str(a.type) for a in args)
            raise self.fail(f"cannot apply {fn} to ({types}): {err}") from None
        return _Val(func(*[a.expr for a in args], **options), out_type)

    def _decimal_operands(self, left: _Val, right: _Val) -> tuple[_Val, _Val]:
        """Make the integer side of decimal arithmetic an exact decimal.

        Expression evaluation, unlike the kernels, does not widen integers for decimal
        arithmetic on its own ("precision is not great enough").
        """
        if pa.types.is_decimal(left.type) == pa.types.is_decimal(right.type):
            return left, right
        return self._as_decimal(left), self._as_decimal(right)

    def _as_decimal(self, val: _Val) -> _Val:
        if val.const is not None and val.text is not None:
            return _const(pa.scalar(decimal.Decimal(val.text)))
        if pa.types.is_integer(val.type):
            digits = len(str(2 ** val.type.bit_width))
            return self._cast_val(val, pa.decimal128(digits, 0))
        return val

    # -- leaves --------------------------------------------------------------

    def _column(self, node: exp.Expr) -> _Val:
        path = self._path(node)
        fields: list[pa.Field] = list(self.schema)
        ref: list[str] = []
        field: pa.Field | None = None
        for part in path:
            field = _lookup(fields, part)
            if field is None:
                where = f" in struct {'.'.join(ref)!r}" if ref else ""
                raise self.fail(f"no column named {'.'.join([*ref, part])!r}{where}")
            ref.append(field.name)
            fields = list(field.type) if pa.types.is_struct(field.type) else []
        assert field is not None
        val = _Val(pc.field(*ref), field.type)
        if pa.types.is_dictionary(field.type):  # compare on decoded values
            val = _Val(val.expr.cast(field.type.value_type), field.type.value_type)
        return val

    def _path(self, node: exp.Expr) -> list[str]:
        if isinstance(node, exp.Dot):
            return [*self._path(node.this), node.expression.name]
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            return [part.name for part in node.parts]
        raise self.fail(f"unsupported column reference {node.sql()!r}")

    def _literal(self, node: exp.Literal) -> _Val:
        raw = str(node.this)
        if node.is_string:
            return _const(pa.scalar(raw, pa.string()))
        try:
            if _INT_RE.fullmatch(raw):
                value = int(raw)
                return _const(pa.scalar(value, pa.int64() if value < 2**63 else pa.uint64()), raw)
            return _const(pa.scalar(float(raw), pa.float64()), raw)
        except (ValueError, OverflowError, pa.ArrowInvalid):
            raise self.fail(f"numeric literal {raw} is out of range") from None

    # -- logic ---------------------------------------------------------------

    def _bool(self, val: _Val, what: str) -> _Val:
        if pa.types.is_null(val.type):
            return _const(_null_bool())
        if not pa.types.is_boolean(val.type):
            raise self.fail(f"{what} needs a boolean operand, got {val.type}")
        return val

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
        if len(operands) > _MAX_CHAIN_TERMS:
            # Arrow re-chains associative calls left-deep when it plans the filter and then
            # recurses per term: ~20,000 terms overflow the C stack (a segfault, not an error).
            raise self.fail(f"{what} chain of {len(operands)} terms exceeds the supported "
                            f"{_MAX_CHAIN_TERMS} (use IN (...) for long value lists)")
        exprs = [self._bool(self.visit(item), what).expr for item in operands]
        while len(exprs) > 1:
            paired = [getattr(pc, fn)(exprs[i], exprs[i + 1]) for i in range(0, len(exprs) - 1, 2)]
            exprs = paired + exprs[len(exprs) - len(exprs) % 2:]
        return _Val(exprs[0], pa.bool_())

    def _not(self, node: exp.Not) -> _Val:
        inner = self._bool(self.visit(node.this), "NOT")
        return _Val(~inner.expr, pa.bool_())

    def _negated(self, node: exp.Expr, val: _Val) -> _Val:
        return _Val(~val.expr, pa.bool_()) if node.args.get("negate") else val

    def _is(self, node: exp.Is) -> _Val:
        val = self.visit(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return self._negated(node, _Val(pc.is_null(val.expr), pa.bool_()))
        if isinstance(target, exp.Boolean):
            val = self._bool(val, "IS TRUE/FALSE")
            truth = val.expr if target.this else ~val.expr
            return self._negated(node, _Val(pc.coalesce(truth, False), pa.bool_()))
        raise self.fail(f"unsupported IS operand {target.sql()!r}")

    # -- comparisons -----------------------------------------------------------

    def _compare(self, fn: str, left: _Val, right: _Val) -> _Val:
        left, right = self._unify(left, right)
        out = self._call(fn, [left, right])
        if not (_is_float(left.type) or _is_float(right.type)):
            return out
        # Total float order (as DataFusion): NaN equals NaN and sorts above all numbers.
        nan_l, nan_r = self._nan(left), self._nan(right)
        if fn == "equal":
            fix = _and(nan_l, nan_r)
        elif fn == "not_equal":
            fix = _not(_and(nan_l, nan_r))
        elif fn == "less":
            fix = _and(_not(nan_l), nan_r)
        elif fn == "less_equal":
            fix = nan_r
        elif fn == "greater":
            fix = _and(nan_l, _not(nan_r))
        else:
            fix = nan_l
        if fix is False or fix is True:
            return out
        if fn == "not_equal":  # NULL operands already make both terms NULL
            return _Val(_and(out.expr, fix), pa.bool_())
        for side in (left, right):  # the NaN term must not turn a NULL comparison into TRUE
            if side.const is None:
                fix = _and(fix, pc.is_valid(side.expr))
        return _Val(_or(out.expr, fix), pa.bool_())

    @staticmethod
    def _nan(val: _Val) -> Any:
        """``is_nan`` of an operand: an expression, or a bool when known statically."""
        if not _is_float(val.type):
            return False
        if val.const is not None:
            value = val.const.as_py()
            return value is not None and value != value
        return pc.is_nan(val.expr)

    def _unify(self, left: _Val, right: _Val) -> tuple[_Val, _Val]:
        """Cast a literal to the other side's type (and dates up to timestamps)."""
        if pa.types.is_null(left.type) and pa.types.is_null(right.type):
            return _const(_null_bool()), _const(_null_bool())
        if left.type == right.type:
            return left, right
        if right.const is not None and left.const is None:
            right = self._coerce(right, left)
        elif left.const is not None and right.const is None:
            left = self._coerce(left, right)
        if pa.types.is_null(left.type):
            return _const(pa.scalar(None, right.type)), right
        if pa.types.is_null(right.type):
            return left, _const(pa.scalar(None, left.type))
        if pa.types.is_date(left.type) and pa.types.is_timestamp(right.type):
            return self._cast_val(left, right.type), right
        if pa.types.is_timestamp(left.type) and pa.types.is_date(right.type):
            return left, self._cast_val(right, left.type)
        return left, right

    def _coerce(self, lit: _Val, other: _Val) -> _Val:
        target = other.type
        assert lit.const is not None
        if pa.types.is_null(lit.type):
            return _const(pa.scalar(None, target))
        if pa.types.is_date(target) and pa.types.is_timestamp(lit.type):
            return lit  # a timestamp cannot narrow to a date: _unify widens the column instead
        if _is_string(lit.type) and not _is_string(target):
            value = self._parse_string(lit.const.as_py(), target)
            return _const(value)
        if pa.types.is_timestamp(target) and (pa.types.is_timestamp(lit.type) or pa.types.is_date(lit.type)):
            return _const(self._to_timestamp(lit.const, target))
        if pa.types.is_decimal(target) and lit.text is not None:
            exact = pa.scalar(decimal.Decimal(lit.text))
            try:
                return _const(exact.cast(target))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return _const(exact)
        if _kind(lit.type) != _kind(target):
            raise self.fail(f"cannot compare {target} with {lit.type} literal {lit.const}")
        if _is_float(target) and (_is_float(lit.type) or pa.types.is_integer(lit.type)):
            return _const(lit.const.cast(target, safe=False), lit.text)
        try:
            return _const(lit.const.cast(target), lit.text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return lit  # e.g. 300 vs int8 or 2.5 vs int: pyarrow widens the column instead

    def _parse_string(self, value: str, target: pa.DataType) -> pa.Scalar:
        try:
            if pa.types.is_timestamp(target):
                return self._to_timestamp(_parse_timestamp(value), target)
            if pa.types.is_decimal(target):
                exact = pa.scalar(decimal.Decimal(value))
                try:
                    return exact.cast(target)
                except pa.ArrowInvalid:
                    return exact
            return pa.scalar(value).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, decimal.InvalidOperation):
            raise self.fail(f"cannot interpret {value!r} as {target}") from None

    def _to_timestamp(self, value: pa.Scalar, target: pa.DataType) -> pa.Scalar:
        """A date/timestamp literal as ``target``; naive values are local time in target's zone."""
        if pa.types.is_date(value.type):
            value = value.cast(pa.timestamp("s"))
        if target.tz is not None and value.type.tz is None:
            try:
                value = pc.assume_timezone(value, timezone=target.tz)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                raise self.fail(f"timestamp {value} is not valid in zone {target.tz}: {err}") from None
        elif target.tz is None and value.type.tz is not None:
            value = pa.scalar(value.value, pa.timestamp(value.type.unit))  # UTC wall clock
        try:
            return value.cast(target)
        except pa.ArrowInvalid:  # more precise than the column: keep the literal's unit
            return value.cast(pa.timestamp(value.type.unit, target.tz))

    def _cast_val(self, val: _Val, target: pa.DataType) -> _Val:
        if val.const is not None:
            return _const(self._cast_scalar(val, target))
        return _Val(val.expr.cast(target), target)

    def _cast_scalar(self, val: _Val, target: pa.DataType) -> pa.Scalar:
        scalar = val.const
        assert scalar is not None
        if _is_string(val.type) and not _is_string(target):
            return self._parse_string(scalar.as_py(), target)
        if pa.types.is_decimal(target) and val.text is not None:
            scalar = pa.scalar(decimal.Decimal(val.text))
        try:
            return scalar.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
            raise self.fail(f"cannot cast {scalar} to {target}: {err}") from None

    def _in(self, node: exp.In) -> _Val:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.fail("IN supports only a literal list")
        subject = self.visit(node.this)
        items = [self._unify(subject, self.visit(e))[1] for e in node.expressions]
        if not items:
            raise self.fail("IN list is empty")
        consts = [i.const for i in items if i.const is not None]
        if len(consts) < len(items) or any(c.type != subject.type for c in consts if c.is_valid):
            out = self._compare("equal", subject, items[0])
            for item in items[1:]:  # a column in the list, or mixed types: plain OR of equalities
                out = _Val(pc.or_kleene(out.expr, self._compare("equal", subject, item).expr), pa.bool_())
            return self._negated(node, out)
        values = [c.as_py() for c in consts if c.is_valid]
        if _is_float(subject.type) and any(v == 0 for v in values):
            values += [0.0, -0.0]  # IN (0.0) also matches -0.0, as DataFusion does
        found = pc.is_in(subject.expr, value_set=pa.array(values, subject.type), skip_nulls=True)
        if len(values) < len(consts):  # NULL in the list: a miss is unknown, not false
            expr = pc.or_kleene(found, pc.scalar(_null_bool()))
        else:
            expr = pc.or_kleene(found, pc.if_else(pc.is_null(subject.expr), _null_bool(), False))
        return self._negated(node, _Val(expr, pa.bool_()))

    def _between(self, node: exp.Between) -> _Val:
        subject = self.visit(node.this)
        low = self._compare("greater_equal", subject, self.visit(node.args["low"]))
        high = self._compare("less_equal", subject, self.visit(node.args["high"]))
        return self._negated(node, _Val(pc.and_kleene(low.expr, high.expr), pa.bool_()))

    def _null_safe(self, node: exp.Expr) -> _Val:
        left, right = self.visit(node.this), self.visit(node.expression)
        eq = self._compare("equal", left, right)
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
        raise self.fail(f"unsupported function {name}()")

    def _neg(self, node: exp.Neg) -> _Val:
        val = self.visit(node.this)
        if val.const is not None and val.const.is_valid:
            text = None if val.text is None else "-" + val.text
            return _const(pc.negate(val.const), text)
        return self._call("negate", [val])

    def _cast(self, node: exp.Cast) -> _Val:
        target = self._arrow_type(node.to)
        return self._cast_val(self.visit(node.this), target)

    def _arrow_type(self, dtype: exp.DataType) -> pa.DataType:
        kind = dtype.this
        if kind == exp.DataType.Type.DECIMAL:
            params = [int(p.this.this) for p in dtype.expressions]
            precision, scale = {0: (38, 10), 1: (*params, 0)}.get(len(params), tuple(params[:2]))
            return pa.decimal128(precision, scale)
        if kind not in _DTYPES:
            raise self.fail(f"unsupported CAST target {dtype.sql()}")
        return _DTYPES[kind]


def _parse_timestamp(value: str) -> pa.Scalar:
    """An ISO timestamp string as a nanosecond scalar; an offset makes it UTC."""
    try:
        return pa.scalar(value).cast(pa.timestamp("ns"))
    except pa.ArrowInvalid:
        return pa.scalar(value).cast(pa.timestamp("ns", "UTC"))


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


def _and(a: Any, b: Any) -> Any:
    """Kleene AND where either side may be a statically known bool."""
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return pc.and_kleene(a, b)


def _or(a: Any, b: Any) -> Any:
    if b is False:
        return a
    if a is False:
        return b
    if a is True or b is True:
        return pc.scalar(True)
    return pc.or_kleene(a, b)


def _not(a: Any) -> Any:
    return (not a) if isinstance(a, bool) else ~a

