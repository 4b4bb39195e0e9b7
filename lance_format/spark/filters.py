"""Translating the filters Spark offers a scan into pyarrow expressions, exactly or not at all.

A filter is pushed only when evaluating it in Arrow keeps exactly the rows Spark keeps;
everything else stays in Spark (which then applies it after the scan). Pushed:

* ``=``, ``<``, ``<=``, ``>``, ``>=``, ``IN`` on signed integer, string, boolean and date
  columns with a literal of the matching Python type;
* ``IS NULL`` / ``IS NOT NULL`` on any top-level column;
* ``LIKE 'abc%'`` / ``'%abc'`` / ``'%abc%'`` (starts/ends with, contains) on strings;
* ``NOT`` of any of the above (both sides drop rows where the value is null).

Not pushed: floating point comparisons (Spark orders NaN above every number and
``NaN = NaN`` is true; Arrow's comparisons with NaN are false), timestamps (time zone of
the literal), unsigned and decimal columns (their Spark type differs from the stored
one), nested column paths, ``<=>``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

_COMPARISONS = {
    "EqualTo": "equal", "GreaterThan": "greater", "GreaterThanOrEqual": "greater_equal",
    "LessThan": "less", "LessThanOrEqual": "less_equal",
}
_STRING_MATCH = {"StringStartsWith": "starts_with", "StringEndsWith": "ends_with",
                 "StringContains": "match_substring"}


def _literal_fits(typ: pa.DataType, value: Any) -> bool:
    if value is None:
        return False
    if pat.is_signed_integer(typ):
        return isinstance(value, int) and not isinstance(value, bool)
    if pat.is_string(typ) or pat.is_large_string(typ):
        return isinstance(value, str)
    if pat.is_boolean(typ):
        return isinstance(value, bool)
    if pat.is_date(typ):
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    return False


def _column(schema: pa.Schema, attribute: Sequence[str]) -> pa.Field | None:
    if len(attribute) != 1:
        return None
    idx = schema.get_field_index(attribute[0])
    return schema.field(idx) if idx >= 0 else None


def to_expression(flt: Any, schema: pa.Schema) -> pc.Expression | None:
    """The pyarrow expression equivalent to Spark filter ``flt`` over ``schema``, or ``None``.

    Args:
        flt: A ``pyspark.sql.datasource.Filter``.
        schema: Arrow schema of the stored columns the filter refers to.
    """
    kind = type(flt).__name__
    if kind == "Not":
        inner = to_expression(flt.child, schema)
        return None if inner is None else ~inner
    field = _column(schema, getattr(flt, "attribute", ()))
    if field is None:
        return None
    ref = pc.field(field.name)
    if kind == "IsNull":
        return ref.is_null()
    if kind == "IsNotNull":
        return ref.is_valid()
    if kind in _COMPARISONS:
        if not _literal_fits(field.type, flt.value):
            return None
        return pc.Expression._call(_COMPARISONS[kind], [ref, pc.scalar(flt.value)])
    if kind == "In":
        values = tuple(flt.value)
        if not values or not all(_literal_fits(field.type, v) for v in values):
            return None  # a null in the list changes NOT IN semantics; leave those to Spark
        return ref.isin(pa.array(values, type=_value_type(field.type)))
    if kind in _STRING_MATCH:
        if not (pat.is_string(field.type) or pat.is_large_string(field.type)) or not isinstance(flt.value, str):
            return None
        return pc.Expression._call(_STRING_MATCH[kind], [ref], pc.MatchSubstringOptions(flt.value))
    return None


def _value_type(typ: pa.DataType) -> pa.DataType:
    return pa.string() if pat.is_large_string(typ) else typ


def push(filters: Sequence[Any], schema: pa.Schema) -> tuple[list[pc.Expression], list[Any]]:
    """Split Spark filters into ``(pushed expressions, filters left to Spark)``."""
    pushed: list[pc.Expression] = []
    rest: list[Any] = []
    for flt in filters:
        expr = to_expression(flt, schema)
        if expr is None:
            rest.append(flt)
        else:
            pushed.append(expr)
    return pushed, rest


def conjunction(exprs: Sequence[pc.Expression]) -> pc.Expression | None:
    """AND of ``exprs`` (``None`` when empty)."""
    result: pc.Expression | None = None
    for e in exprs:
        result = e if result is None else result & e
    return result


__all__ = ["conjunction", "push", "to_expression"]
