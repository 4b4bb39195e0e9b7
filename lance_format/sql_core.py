"""The parser-independent core of SQL filter translation: typing, casts and comparison semantics.

Two front ends turn filter text into pyarrow compute expressions: the full translator
(:mod:`lance_format.sql`, parsing with sqlglot) and a small hand-written parser for the
common predicate shapes (:mod:`lance_format.sql_fast`), which spares a filtered count or
scan the ~0.2 s sqlglot import. Both build every value through :class:`Semantics`, so the
same predicate yields the same expression whichever parser read it. The semantics (NaN
ordering, three-valued logic, literal coercion) are documented in :mod:`lance_format.sql`.

Nothing here imports sqlglot or ``pyarrow.acero`` (which imports ``pyarrow.dataset``):
both cost tens of milliseconds in a fresh process.
"""

from __future__ import annotations

import contextlib
import decimal
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import FALSE_SCALAR, arrow_array, literal_scalar, number_scalar
from lance_format.errors import InvalidInputError
from lance_format.sql_program import SAME_TYPE_DIRECT, Node, filter_table, remember

__all__ = ["ChainTooLongError", "Semantics"]

#: Most terms one AND/OR chain may have once equalities on one column are merged into one
#: ``is_in`` (see ``Semantics.combine``).
MAX_CHAIN_TERMS = 4096
#: Most terms a chain may have as written (a bound on the work a filter text can ask for;
#: pylance takes generated ``id = 1 OR id = 2 OR ...`` chains of 20,000 terms).
MAX_PARSED_TERMS = 65536
_INT_RE = re.compile(r"\d+")


class ChainTooLongError(InvalidInputError):
    """An AND/OR chain longer than Arrow can plan: every parser reaches the same verdict."""


@dataclass(frozen=True)
class _Val:
    """A translated operand: its expression, Arrow type, and value when constant."""

    expr: Any  # pc.Expression (pyarrow ships no type stubs)
    type: pa.DataType
    const: pa.Scalar | None = None
    text: str | None = None  # source text of a numeric literal, for exact decimals
    #: How :class:`Semantics` built ``expr``; ``None`` when a parser built it directly.
    node: Node | None = None


def _node(val: _Val) -> Node:
    return val.node if val.node is not None else Node.opaque(val.expr)


def _of(node: Node, typ: pa.DataType) -> _Val:
    return _Val(node.expr, typ, node=node)


def _null_bool() -> pa.Scalar:
    # Built on demand: creating a null scalar makes pyarrow import pandas, which
    # would add ~0.2 s to every `import lance_format`.
    return pa.nulls(1, pa.bool_())[0]  # pa.scalar(None, ...) imports pandas too


def _const(value: pa.Scalar, text: str | None = None) -> _Val:
    node = Node.const(value)
    return _Val(node.expr, value.type, value, text, node)


def _clip(text: str, limit: int = 200) -> str:
    """``text`` shortened for an error message (generated filters can be megabytes)."""
    return text if len(text) <= limit else f"{text[:limit]}...[{len(text) - limit} more characters]"


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


def _mergeable(t: pa.DataType) -> bool:
    """Types whose equalities an OR chain may merge into ``is_in`` (floats keep NaN/-0.0 rules)."""
    return bool(pa.types.is_integer(t) or _is_string(t))


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


class Semantics:
    """Builds typed filter values; subclasses map their parse trees onto these methods.

    Args:
        schema: The Arrow schema the filter runs against (resolves names, drives casts).
        text: The filter text, for error messages.
    """

    def __init__(self, schema: pa.Schema, text: str) -> None:
        self.schema = schema
        self.text = text
        self._columns: dict[tuple[str, ...], _Val] = {}
        self._types: dict[tuple[Any, ...], pa.DataType] = {}
        #: Plain ``column = literal`` comparisons built here, by ``id`` of their node (kept
        #: alive by the entry): subject and literal, for merging OR chains into ``is_in``.
        self._equalities: dict[int, tuple[Node, _Val, pa.Scalar]] = {}

    def fail(self, message: str) -> InvalidInputError:
        """The error to raise for ``message`` about this filter."""
        return InvalidInputError(f"filter {_clip(self.text)!r}: {message}")

    def _call(self, fn: str, args: list[_Val], **options: Any) -> _Val:
        """Apply compute function ``fn``; the result type comes from running it on empty arrays."""
        func = getattr(pc, fn)
        # Long generated filters repeat the same call thousands of times: its result type is
        # looked up once (calls with options, e.g. value sets, are not cached).
        key = (fn, *[a.type for a in args]) if not options else None
        out_type = self._types.get(key) if key is not None else None
        if out_type is None:
            try:
                out_type = func(*[pa.nulls(0, a.type) for a in args], **options).type  # pa.array([]) imports pandas
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as err:
                types = ", ".join(str(a.type) for a in args)
                raise self.fail(f"cannot apply {fn} to ({types}): {err}") from None
            if key is not None:
                self._types[key] = out_type
        node = Node.call(fn, *[_node(a) for a in args], **options)
        if fn in SAME_TYPE_DIRECT and all(a.type == args[0].type for a in args):
            node.direct = True  # no implicit cast for a plan to insert: the kernel call is the same
        return _of(node, out_type)

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

    def column(self, path: Sequence[str]) -> _Val:
        """The column at ``path`` (struct fields after the first name), resolved as documented."""
        key = tuple(path)
        found = self._columns.get(key)
        if found is None:
            found = self._columns[key] = self._resolve(path)
        return found

    def _resolve(self, path: Sequence[str]) -> _Val:
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
        node = Node.field(ref)
        if pa.types.is_dictionary(field.type):  # compare on decoded values
            return _of(node.cast(field.type.value_type), field.type.value_type)
        return _of(node, field.type)

    def number(self, raw: str) -> _Val:
        """A numeric literal: int64 (uint64 past its range) for digits, else float64."""
        try:
            if _INT_RE.fullmatch(raw):
                value = int(raw)
                return _const(number_scalar(value, pa.int64() if value < 2**63 else pa.uint64()), raw)
            return _const(number_scalar(float(raw), pa.float64()), raw)
        except (ValueError, OverflowError, pa.ArrowInvalid):
            raise self.fail(f"numeric literal {raw} is out of range") from None

    @staticmethod
    def string(value: str) -> _Val:
        """A string literal."""
        return _const(literal_scalar(value))  # pa.scalar imports pandas

    @staticmethod
    def boolean(value: bool) -> _Val:
        """``TRUE`` / ``FALSE``."""
        return _const(pa.scalar(value))

    @staticmethod
    def null() -> _Val:
        """``NULL`` (untyped until compared)."""
        return _const(pa.scalar(None))

    def negative(self, val: _Val) -> _Val:
        """Unary minus: folded for a literal, ``negate`` otherwise."""
        if val.const is not None and val.const.is_valid:
            text = None if val.text is None else "-" + val.text
            if pa.types.is_unsigned_integer(val.const.type):
                # Negating an unsigned scalar wraps around (-18446744073709551615 would be 1):
                # the result is signed, and only -2**63 of the literals past int64 fits.
                value = -int(val.const.as_py())
                if value < -(2**63):
                    raise self.fail(f"numeric literal {text or value} is out of range")
                return _const(pa.scalar(value, pa.int64()), text)
            return _const(pc.negate(val.const), text)
        return self._call("negate", [val])

    # -- logic ---------------------------------------------------------------

    def _bool(self, val: _Val, what: str) -> _Val:
        if pa.types.is_null(val.type):
            return _const(_null_bool())
        if not pa.types.is_boolean(val.type):
            raise self.fail(f"{what} needs a boolean operand, got {val.type}")
        return val

    def combine(self, operands: Sequence[_Val], fn: str, what: str) -> _Val:
        """One flattened AND/OR chain (``fn`` ``and_kleene`` / ``or_kleene``), combined balanced.

        A long chain parses left-deep; Kleene AND/OR are associative, so pairing terms
        keeps the expression shallow (Arrow plans recurse per level).
        """
        vals = [self._bool(item, what) for item in operands]
        if fn == "or_kleene" and len(vals) > 2:
            vals = self._merge_equalities(vals)
        if len(vals) > MAX_CHAIN_TERMS:
            # Arrow re-chains associative calls left-deep when it plans the filter and then
            # recurses per term: ~20,000 terms overflow the C stack (a segfault, not an error).
            raise ChainTooLongError(str(self.fail(f"{what} chain of {len(vals)} terms exceeds the supported "
                                                  f"{MAX_CHAIN_TERMS} (use IN (...) for long value lists)")))
        nodes = [_node(val) for val in vals]
        while len(nodes) > 1:
            paired = [Node.call(fn, nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
            nodes = paired + nodes[len(nodes) - len(nodes) % 2:]
        return _of(nodes[0], pa.bool_())

    def chain_too_long(self, count: int, what: str) -> InvalidInputError | None:
        """The error for an AND/OR chain of ``count`` written terms, or ``None`` when it is fine.

        Checked before the terms are translated; :meth:`combine` checks the chain again once
        equalities are merged.
        """
        if count <= MAX_PARSED_TERMS:
            return None
        return self.fail(f"{what} chain of {count} terms exceeds the supported {MAX_PARSED_TERMS}")

    def _merge_equalities(self, vals: list[_Val]) -> list[_Val]:
        """An OR chain with the ``column = literal`` terms of each column merged into one ``is_in``.

        ``c = 1 OR c = 2 OR ...`` is ``c IN (1, 2, ...)`` under SQL's three-valued logic (the
        literals are never NULL): generated filters of 20,000 such terms stay one Arrow call
        instead of a chain Arrow cannot plan. The merged term takes the place of the first.
        """
        out: list[_Val] = []
        groups: dict[str, tuple[int, _Val, list[pa.Scalar]]] = {}
        for val in vals:
            found = self._equalities.get(id(val.node)) if val.node is not None else None
            if found is None or found[0] is not val.node:
                out.append(val)
                continue
            _, subject, value = found
            key = str(subject.expr)
            if key in groups:
                groups[key][2].append(value)
                continue
            groups[key] = (len(out), subject, [value])
            out.append(val)
        for pos, subject, values in groups.values():
            if len(values) > 1:
                out[pos] = self.in_list(subject, [_const(v) for v in values], negate=False)
        return out

    def logical_not(self, val: _Val) -> _Val:
        """``NOT val``."""
        inner = self._bool(val, "NOT")
        return _of(Node.call("invert", _node(inner)), pa.bool_())

    @staticmethod
    def negated(negate: bool, val: _Val) -> _Val:
        """``val``, inverted when ``negate`` (``NOT IN``, ``IS NOT``, ...)."""
        return _of(Node.call("invert", _node(val)), pa.bool_()) if negate else val

    def is_null(self, val: _Val, *, negate: bool) -> _Val:
        """``val IS [NOT] NULL``."""
        return self.negated(negate, _of(Node.call("is_null", _node(val)), pa.bool_()))

    def is_truth(self, val: _Val, truth: bool, *, negate: bool) -> _Val:
        """``val IS [NOT] TRUE/FALSE`` (never NULL)."""
        node = _node(self._bool(val, "IS TRUE/FALSE"))
        node = node if truth else Node.call("invert", node)
        return self.negated(negate, _of(Node.call("coalesce", node, False), pa.bool_()))

    # -- comparisons -----------------------------------------------------------

    def compare(self, fn: str, left: _Val, right: _Val) -> _Val:
        """Comparison ``fn`` (``equal``, ``less``, ...) under the total float order."""
        left, right = self._unify(left, right)
        out = self._call(fn, [left, right])
        if not (_is_float(left.type) or _is_float(right.type)):
            if fn == "equal" and left.type == right.type and _mergeable(left.type):
                subject, lit = (left, right) if right.const is not None else (right, left)
                if subject.const is None and lit.const is not None and lit.const.is_valid \
                        and out.node is not None:
                    self._equalities[id(out.node)] = (out.node, subject, lit.const)
            return out
        # pylance 14.0.2's float order: -NaN below every number (-inf too), +NaN above, each NaN
        # equal to a NaN of its sign only (-0.0 still equals 0.0). Arrow's comparisons answer
        # false for NaN operands, so each case adds what the NaN rows contribute.
        neg_l, pos_l = self._nan_signs(left)
        neg_r, pos_r = self._nan_signs(right)
        if fn == "equal":
            fix = _or(_and(neg_l, neg_r), _and(pos_l, pos_r))
        elif fn == "not_equal":
            fix = _not(_or(_and(neg_l, neg_r), _and(pos_l, pos_r)))
        elif fn == "less":
            fix = _or(_and(neg_l, _not(neg_r)), _and(_not(pos_l), pos_r))
        elif fn == "less_equal":
            fix = _or(neg_l, pos_r)
        elif fn == "greater":
            fix = _or(_and(pos_l, _not(pos_r)), _and(_not(neg_l), neg_r))
        else:
            fix = _or(pos_l, neg_r)
        if fix is False or fix is True:
            return out
        if fn == "not_equal":  # NULL operands already make both terms NULL
            return _of(_and(_node(out), fix), pa.bool_())
        for side in (left, right):  # the NaN term must not turn a NULL comparison into TRUE
            if side.const is None:
                fix = _and(fix, Node.call("is_valid", _node(side)))
        return _of(_or(_node(out), fix), pa.bool_())

    @staticmethod
    def _nan(val: _Val) -> Any:
        """``is_nan`` of an operand: an expression, or a bool when known statically."""
        if not _is_float(val.type):
            return False
        if val.const is not None:
            value = val.const.as_py()
            return value is not None and value != value
        return Node.call("is_nan", _node(val))

    @classmethod
    def _nan_signs(cls, val: _Val) -> tuple[Any, Any]:
        """``(is -NaN, is +NaN)`` of an operand: expressions, or bools when known statically."""
        nan = cls._nan(val)
        if isinstance(nan, bool):
            if not nan:
                return False, False
            negative = math.copysign(1.0, val.const.as_py()) < 0  # type: ignore[union-attr]
            return negative, not negative
        # As float64 whatever the operand's type: a plan may compute in a narrower type than
        # the one inferred here (``float32_col * 2.5``), and widening keeps the sign of NaN.
        wide = _node(val).cast(pa.float64())
        node = Node(pc.Expression._call(_NEGATIVE_NAN, [wide.expr]), _NEGATIVE_NAN, (wide,))
        node.direct = True  # evaluated through pc.call_function (lance_format.sql_program)
        return node, _and(nan, _not(node))

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
        if pa.types.is_integer(target) and _is_float(lit.type) and lit.const.is_valid \
                and not math.isfinite(lit.const.as_py()):
            # 1e999 overflows to infinity: no integer equals or bounds it, and pylance refuses it
            # ("could not convert to literal of type Int64") rather than compare as a float.
            raise self.fail(f"numeric literal {lit.text or lit.const} is out of range for {target}")
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
        return _of(_node(val).cast(target), target)

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

    def in_list(self, subject: _Val, values: Sequence[_Val], *, negate: bool) -> _Val:
        """``subject [NOT] IN (values)`` with SQL NULL semantics."""
        items = [self._unify(subject, v)[1] for v in values]
        if not items:
            raise self.fail("IN list is empty")
        consts = [i.const for i in items if i.const is not None]
        if len(consts) < len(items) or any(c.type != subject.type for c in consts if c.is_valid):
            out = self.compare("equal", subject, items[0])
            for item in items[1:]:  # a column in the list, or mixed types: plain OR of equalities
                eq = self.compare("equal", subject, item)
                out = _of(Node.call("or_kleene", _node(out), _node(eq)), pa.bool_())
            return self.negated(negate, out)
        valid = [c for c in consts if c.is_valid]
        if _is_float(subject.type) and any(c.as_py() == 0 for c in valid):
            valid += [number_scalar(z, pa.float64()).cast(subject.type) for z in (0.0, -0.0)]  # as DataFusion does
        # from the scalars themselves: pa.array(<Python list>) imports pandas on a first query
        value_set = pa.concat_arrays([pa.repeat(c, 1) for c in valid]) if valid else pa.nulls(0, subject.type)
        found = Node.call("is_in", _node(subject), value_set=value_set, skip_nulls=True)
        if any(not c.is_valid for c in consts):  # NULL in the list: a miss is unknown, not false
            node = Node.call("or_kleene", found, Node.const(_null_bool()))
        else:
            node = Node.call("or_kleene", found, Node.call("if_else", Node.call("is_null", _node(subject)),
                                                             _null_bool(), FALSE_SCALAR))
        return self.negated(negate, _of(node, pa.bool_()))

    def between(self, subject: _Val, low: _Val, high: _Val, *, negate: bool) -> _Val:
        """``subject [NOT] BETWEEN low AND high`` (bounds inclusive)."""
        lo = self.compare("greater_equal", subject, low)
        hi = self.compare("less_equal", subject, high)
        return self.negated(negate, _of(Node.call("and_kleene", _node(lo), _node(hi)), pa.bool_()))

    def finish(self, result: _Val) -> pc.Expression:
        """The filter expression of ``result``, checked to be a boolean that evaluates on the schema."""
        if not pa.types.is_boolean(result.type):
            raise InvalidInputError(f"filter {self.text!r} does not return a boolean (it returns {result.type})")
        try:  # surface type errors now rather than from the scan
            # from no batches: Schema.empty_table() imports pandas (~0.3 s) in a fresh process
            filter_table(pa.Table.from_batches([], schema=self.schema), result.expr)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as err:
            raise InvalidInputError(f"filter {self.text!r} cannot be evaluated: {err}") from None
        remember(_node(result))
        return result.expr


def _parse_timestamp(value: str) -> pa.Scalar:
    """An ISO timestamp string as a nanosecond scalar; an offset makes it UTC."""
    try:
        return pa.scalar(value).cast(pa.timestamp("ns"))
    except pa.ArrowInvalid:
        return pa.scalar(value).cast(pa.timestamp("ns", "UTC"))


def _negative_nan_kernel(ctx: Any, values: Any) -> pa.Array:
    """``True`` where a float is a NaN with its sign bit set (vectorised with numpy).

    Reads the value buffer directly: ``to_numpy`` and ``pa.array`` import pandas (~0.3 s of CPU)
    on a process's first filtered read, which every ``x > 0.9`` filter reaches."""
    if isinstance(values, pa.Scalar):
        x = values.as_py()
        values = pa.nulls(1, pa.float64()) if x is None else arrow_array(np.array([x], np.float64))
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    if values.null_count == n:
        return pa.nulls(n, pa.bool_())
    data = np.frombuffer(values.buffers()[1], np.float64, n, values.offset * 8)
    bits = np.packbits(np.isnan(data) & np.signbit(data), bitorder="little")
    valid = pc.is_valid(values).buffers()[1] if values.null_count else None
    return pa.Array.from_buffers(pa.bool_(), n, [valid, pa.py_buffer(bits)])


#: The UDF telling -NaN from +NaN in float64 (Arrow has no sign-bit kernel). Registered at
#: import, so a process handed a pickled filter expression (an executor) knows it too.
_NEGATIVE_NAN = "lance_format_negative_nan"
try:
    pc.get_function(_NEGATIVE_NAN)
except pa.ArrowKeyError:
    with contextlib.suppress(pa.ArrowKeyError):  # registered meanwhile (module reloaded)
        pc.register_scalar_function(
            _negative_nan_kernel, _NEGATIVE_NAN,
            {"summary": "is -NaN", "description": "Whether a float is a NaN with its sign bit set."},
            {"values": pa.float64()}, pa.bool_())


def _and(a: Any, b: Any) -> Any:
    """Kleene AND where either side may be a statically known bool."""
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return Node.call("and_kleene", a, b)


def _or(a: Any, b: Any) -> Any:
    if b is False:
        return a
    if a is False:
        return b
    if a is True or b is True:
        return Node.const(True)
    return Node.call("or_kleene", a, b)


def _not(a: Any) -> Any:
    return (not a) if isinstance(a, bool) else Node.call("invert", a)
