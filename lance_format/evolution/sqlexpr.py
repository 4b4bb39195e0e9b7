"""SQL value expressions (``"a * 10"``, ``"upper(b)"``, ``"b || '!'"``) over Arrow data.

``add_columns`` and ``update`` take SQL expressions, as pylance does (DataFusion there).
They are parsed with the dialect of the filter translator (:mod:`lance_format.sql`) and
evaluated with pyarrow compute; the only addition here is string concatenation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.sql_program import project_table


def _translator(schema: pa.Schema, text: str) -> Any:
    from sqlglot import exp

    from lance_format.sql import _Translator, _Val

    class _ValueTranslator(_Translator):
        def __init__(self, schema: pa.Schema, text: str) -> None:
            super().__init__(schema, text)
            self._handlers[exp.DPipe] = self._concat
            self._handlers[exp.Concat] = self._concat

        def fail(self, message: str) -> InvalidInputError:
            return InvalidInputError(f"expression {self.text!r}: {message}")

        def _concat(self, node: Any) -> Any:
            parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else list(node.expressions)
            vals = [self.visit(p) for p in parts]
            args = [v.expr.cast(pa.string()) if not pa.types.is_string(v.type) else v.expr for v in vals]
            return _Val(pc.Expression._call("binary_join_element_wise", [*args, pc.scalar("")]), pa.string())

    return _ValueTranslator(schema, text)


def value_expression(text: str, schema: pa.Schema) -> tuple[pc.Expression, pa.DataType]:
    """Parse SQL value expression ``text`` against ``schema``.

    Returns:
        ``(expression, result type)``.

    Raises:
        InvalidInputError: if the text does not parse or names unknown columns.
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    from lance_format.sql import _LanceSql, _string_quote_unknown_names

    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"expected a SQL expression string, got {text!r}")
    try:
        tree = sqlglot.parse_one(_string_quote_unknown_names(text, schema), dialect=_LanceSql)
    except SqlglotError as err:
        raise InvalidInputError(f"cannot parse expression {text!r}: {err}") from None
    val = _translator(schema, text).visit(tree)
    typ = val.type if not pa.types.is_null(val.type) else pa.null()
    return val.expr, typ


Compiled = dict[str, tuple[pc.Expression, pa.DataType]]


def compile_expressions(expressions: Mapping[str, str], schema: pa.Schema) -> Compiled:
    """Parse named SQL expressions once (then evaluate them batch after batch)."""
    return {name: value_expression(text, schema) for name, text in expressions.items()}


def evaluate(table: pa.Table, expressions: Mapping[str, str] | Compiled,
             types: Mapping[str, pa.DataType] | None = None) -> dict[str, pa.Array]:
    """Evaluate named SQL expressions (text or compiled) over ``table``; cast to ``types[name]`` when given.

    The one evaluator of value expressions: ``add_columns``, ``update``, ``merge_insert`` and
    computed projection columns (``lance_format.projection``) all run through it.

    Raises:
        InvalidInputError: on parse errors or values that cannot be cast.
    """
    parsed: Compiled = {name: (value if isinstance(value, tuple) else value_expression(value, table.schema))
                        for name, value in expressions.items()}
    names = list(parsed)
    try:
        out = project_table(table, [parsed[n][0] for n in names], names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"cannot evaluate {list(names)}: {exc}") from exc
    result: dict[str, pa.Array] = {}
    for name in names:
        col = out.column(name).combine_chunks() if out.num_rows else pa.array([], out.column(name).type)
        want = (types or {}).get(name)
        if want is not None and not col.type.equals(want):
            try:
                col = col.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                text = expressions[name] if isinstance(expressions[name], str) else name
                raise InvalidInputError(f"expression {text!r} gives {col.type}, which cannot be "
                                        f"stored in column {name!r} of type {want}: {exc}") from exc
        result[name] = col
    return result
