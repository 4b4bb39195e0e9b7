"""Filters as programs: pyarrow expressions that can also be computed by calling the kernels.

:class:`lance_format.sql_core.Semantics` builds every filter value as a :class:`Node`, which
holds the pyarrow expression (for plans and for callers) together with the calls that
produced it. A scan or count handed such an expression finds its node with
:func:`program_for` and evaluates it on each decoded batch directly, with no Acero plan per
batch (about half the cost); any other expression runs through :func:`filter_table`, and
value expressions (computed columns, masks of other filters) through :func:`project_table`.

Nothing here imports ``pyarrow.acero``, which imports ``pyarrow.dataset`` (~20 ms in a fresh
process): the compiled ``pyarrow._acero`` module holds the plan nodes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import _acero  # the compiled plan nodes (~1 ms); pyarrow.acero would add pyarrow.dataset

__all__ = ["MAX_EVAL_DEPTH", "SAME_TYPE_DIRECT", "Node", "Unevaluable", "filter_table", "program_for",
           "project_table", "remember"]

#: Deepest expression :meth:`Node.evaluate` computes (it recurses); deeper ones run as a plan.
MAX_EVAL_DEPTH = 200

#: Functions :meth:`Node.evaluate` calls directly. Not arithmetic on mixed types: a plan casts
#: a literal to the column's type first (``int8_col + 1`` wraps at 127 there, the kernel widens
#: to int64), and a direct call must never answer differently from the plan it replaces.
_DIRECT = frozenset({
    "field", "const", "cast", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "and_kleene", "or_kleene", "invert", "is_null", "is_valid", "is_nan", "is_in", "if_else", "coalesce",
    "match_like", "starts_with", "ends_with", "match_substring", "match_substring_regex",
    "utf8_lower", "utf8_upper",
})
#: Arithmetic, called directly when every operand has the same type (``id % 10``).
SAME_TYPE_DIRECT = frozenset({"add", "subtract", "multiply", "divide", "remainder", "negate", "abs"})


class Unevaluable(Exception):
    """A :class:`Node` that only exists as a pyarrow expression (built outside ``Semantics``)."""


#: Boolean functions whose first operand can decide the result: the value that decides it.
_SHORT_CIRCUIT = {"and_kleene": False, "or_kleene": True}


def _all_equal(values: Any, value: bool) -> bool:
    """Whether ``values`` is a boolean array (or chunked array) without nulls, all ``value``."""
    if not isinstance(values, (pa.Array, pa.ChunkedArray)) or values.null_count or len(values) == 0:
        return False
    if not pa.types.is_boolean(values.type):
        return False
    hit = pc.all(values) if value else pc.any(values)
    return bool(hit.as_py()) is value


class Node:
    """One step of a filter: its pyarrow expression and how to compute it on arrays directly.

    Every expression ``lance_format.sql_core.Semantics`` builds is made through these
    constructors, so the expression (for pyarrow plans) and :meth:`evaluate` (compute kernels
    called on the columns, without an Acero plan per batch: about half the cost) come from
    the same call and cannot disagree.
    """

    __slots__ = ("_columns", "args", "direct", "expr", "fn", "options")

    def __init__(self, expr: Any, fn: str, args: tuple[Any, ...] = (), options: dict[str, Any] | None = None):
        self.expr = expr  # pc.Expression
        self.fn = fn  # a pyarrow.compute function, or "field" / "const" / "cast" / "opaque"
        self.args = args
        self.options = options or {}
        #: Whether :meth:`evaluate` may call ``fn`` itself (see ``_DIRECT``).
        self.direct = fn in _DIRECT
        self._columns: frozenset[str] | None = None

    @classmethod
    def call(cls, fn: str, *args: Any, **options: Any) -> Node:
        """``pyarrow.compute.<fn>(*args, **options)``; args are nodes or plain values."""
        exprs = [a.expr if isinstance(a, Node) else a for a in args]
        return cls(getattr(pc, fn)(*exprs, **options), fn, args, options)

    @classmethod
    def field(cls, ref: Sequence[str]) -> Node:
        """A (possibly nested) column reference."""
        return cls(pc.field(*ref), "field", tuple(ref))

    @classmethod
    def const(cls, value: Any) -> Node:
        """A literal (``pc.scalar(value)``)."""
        return cls(pc.scalar(value), "const", (value,))

    @classmethod
    def opaque(cls, expr: Any) -> Node:
        """An expression built elsewhere: usable in expressions, not evaluable directly."""
        return cls(expr, "opaque")

    def cast(self, target: pa.DataType) -> Node:
        """This value cast (safely) to ``target``."""
        return Node(self.expr.cast(target), "cast", (self, target))

    def evaluate(self, data: pa.RecordBatch | pa.Table) -> Any:
        """The value on ``data``'s columns: an array (chunked for a Table) or a scalar.

        Raises:
            Unevaluable: The node holds a part built outside ``Semantics``, arithmetic on mixed
                types or a nested field reference; evaluate the expression with a plan instead.
        """
        fn, args = self.fn, self.args
        if fn == "field":
            if len(args) != 1:
                raise Unevaluable(f"nested field {'.'.join(args)}")
            return data.column(args[0])
        if fn == "const":
            return args[0]
        if fn == "cast":
            return pc.cast(args[0].evaluate(data), args[1])
        if not self.direct:
            raise Unevaluable(str(self.expr))
        if fn in _SHORT_CIRCUIT and len(args) == 2 and isinstance(args[0], Node):
            # Kleene: FALSE AND y is FALSE, TRUE OR y is TRUE, whatever y is (NULL included).
            # The float order's NaN terms (lance_format.sql_core) are "is_nan(x) AND ...": a
            # column without NaN then skips the -NaN kernel and the validity terms, about half of
            # what ``x > 0.9`` costs.
            first = args[0].evaluate(data)
            if _all_equal(first, _SHORT_CIRCUIT[fn]):
                return first
            second = args[1].evaluate(data) if isinstance(args[1], Node) else args[1]
            return getattr(pc, fn)(first, second, **self.options)
        values = [a.evaluate(data) if isinstance(a, Node) else a for a in args]
        func = getattr(pc, fn, None)
        if func is None:  # a registered UDF (lance_format.sql_lists): no pyarrow.compute wrapper
            return pc.call_function(fn, values)
        return func(*values, **self.options)

    def columns(self) -> frozenset[str]:
        """Top-level columns this node reads (kept: a scan asks a few times per query)."""
        if self._columns is not None:
            return self._columns
        found: set[str] = set()
        stack: list[Node] = [self]
        while stack:
            node = stack.pop()
            if node.fn == "field":
                found.add(node.args[0])
            stack.extend(a for a in node.args if isinstance(a, Node))
        self._columns = frozenset(found)
        return self._columns

    def evaluable(self) -> bool:
        """Whether :meth:`evaluate` can compute this node (and within ``MAX_EVAL_DEPTH`` levels)."""
        stack: list[tuple[Node, int]] = [(self, 1)]  # no recursion: filters may nest deeply
        while stack:
            node, depth = stack.pop()
            if not node.direct or (node.fn == "field" and len(node.args) != 1) or depth > MAX_EVAL_DEPTH:
                return False
            stack.extend((a, depth + 1) for a in node.args if isinstance(a, Node))
        return True


#: Filters built by :class:`Semantics`, by ``id`` of their expression (which the entry keeps
#: alive, so the id stays unique): lets a scan that was handed the expression evaluate it
#: directly (:func:`program_for`). Bounded: the oldest entries go first.
_PROGRAMS: dict[int, tuple[Any, Node]] = {}
_PROGRAMS_LOCK = threading.Lock()
_MAX_PROGRAMS = 64


def remember(node: Node) -> None:
    """Make ``node`` findable by its expression (when it can be evaluated directly)."""
    if not node.evaluable():
        return
    with _PROGRAMS_LOCK:
        while len(_PROGRAMS) >= _MAX_PROGRAMS:
            del _PROGRAMS[next(iter(_PROGRAMS))]
        _PROGRAMS[id(node.expr)] = (node.expr, node)


def program_for(expr: pc.Expression) -> Node | None:
    """The directly evaluable form of a filter expression this module built, if known."""
    found = _PROGRAMS.get(id(expr))
    return found[1] if found is not None and found[0] is expr else None


def filter_table(table: pa.Table, expr: pc.Expression) -> pa.Table:
    """Rows of ``table`` where ``expr`` is true, evaluated on the calling thread.

    What ``Table.filter(expr)`` does, without its costs: that runs the plan with
    ``use_threads=True`` (scheduling costs ~4x the work on scan-sized batches) and imports
    ``pyarrow.acero``, which imports ``pyarrow.dataset`` (~20 ms per fresh process). The
    compiled ``pyarrow._acero`` module holds the same plan nodes.

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, pyarrow.ArrowTypeError: The
            expression cannot be evaluated on this data.
    """
    plan = _acero.Declaration.from_sequence([
        _acero.Declaration("table_source", options=_acero.TableSourceNodeOptions(table)),
        _acero.Declaration("filter", options=_acero.FilterNodeOptions(expr)),
    ])
    result: pa.Table = plan.to_table(use_threads=False)
    return result


def project_table(table: pa.Table, exprs: Sequence[pc.Expression], names: Sequence[str]) -> pa.Table:
    """``exprs`` evaluated over ``table`` as columns ``names``: one Acero projection, on the calling thread.

    The one place an expression is computed through a plan (SQL value expressions, computed
    projection columns, the mask of a filter this module did not build); the thread and import
    reasons of :func:`filter_table` apply.

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowNotImplementedError, pyarrow.ArrowTypeError: An
            expression cannot be evaluated on this data.
    """
    plan = _acero.Declaration.from_sequence([
        _acero.Declaration("table_source", options=_acero.TableSourceNodeOptions(table)),
        _acero.Declaration("project", options=_acero.ProjectNodeOptions(list(exprs), list(names))),
    ])
    result: pa.Table = plan.to_table(use_threads=False)
    return result
