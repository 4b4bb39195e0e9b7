"""List membership in SQL filters: ``array_has``, ``array_has_any``, ``array_has_all``.

pylance 14.0.2 evaluates these with DataFusion's array functions
(``datafusion/functions-nested/src/array_has.rs``); the rules reproduced here, checked against
pylance on lists holding nulls, null elements and empty lists:

* a null list gives NULL, except against an empty literal list: ``array_has_any(l, [])`` is
  false and ``array_has_all(l, [])`` true on every row, a null list included;
* a null element is an ordinary value: ``array_has_any(l, ['a', NULL])`` matches lists holding
  ``'a'`` or a null element, and a list holding only other values and nulls gives false, not
  NULL (unlike ``IN``);
* ``array_has(l, x)`` with a NULL ``x`` (a literal or a column's null) gives NULL;
* duplicates in the literal list count once (``array_has_all(l, ['a', 'a'])`` is ``'a' ∈ l``).

Arrow has no list-membership kernel, so each function is a pyarrow scalar UDF (registered once
per list type and needle type, as UDF signatures are exact) whose body is vectorised over the
list's child values: every element is matched against the literal set with ``is_in`` /
``index_in`` and the hits are folded onto their rows with the lists' parent indices. The UDF
keeps the filter an ordinary :class:`pyarrow.compute.Expression` (usable by ``Table.filter``
and pyarrow datasets), and :class:`lance_format.sql_program.Node` calls it directly on batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from lance_format.sql_core import Semantics, _node, _of, _Val
from lance_format.sql_program import Node

__all__ = ["LIST_FUNCTIONS", "UDF_PREFIX", "array_has", "array_has_some", "is_list_type", "list_arguments",
           "list_literal", "list_value_type"]

#: Names of the UDFs registered here start with this (:mod:`lance_format.sql_program` calls them).
UDF_PREFIX = "lance_list_"
_LOCK = threading.Lock()
#: ``(kernel, list type, needle type)`` as text (UDF signatures match types exactly) -> UDF name.
_REGISTERED: dict[tuple[str, str, str], str] = {}

Bools = npt.NDArray[np.bool_]


def is_list_type(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a list type the membership functions take (list, large list, fixed size)."""
    t = pa.types
    return bool(t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ))


def list_value_type(typ: pa.DataType) -> pa.DataType:
    """The element type of list type ``typ``."""
    value_type: pa.DataType = typ.value_type
    return value_type


#: DataFusion's list-membership functions and their aliases, by lower-case name.
LIST_FUNCTIONS = {"array_has": "array_has", "array_contains": "array_has", "list_has": "array_has",
                  "list_contains": "array_has", "array_has_any": "array_has_any", "list_has_any": "array_has_any",
                  "arrays_overlap": "array_has_any", "array_has_all": "array_has_all", "list_has_all": "array_has_all"}


def list_literal(node: exp.Expr) -> list[exp.Expr] | None:
    """The items of a list literal, ``[a, b]`` or ``make_array(a, b)``; ``None`` for anything else."""
    if isinstance(node, exp.Array) or (isinstance(node, exp.Anonymous) and str(node.this).lower() == "make_array"):
        return list(node.expressions)
    return None


def list_arguments(name: str, args: Sequence[exp.Expr]) -> tuple[exp.Expr, list[exp.Expr] | None]:
    """The list operand and the literal items of ``array_has_any`` / ``array_has_all`` (two ``args``).

    ``array_has_any`` is symmetric, and pylance takes the literal first too. ``None`` items: the
    second operand is no literal list.
    """
    first, second = args
    if name == "array_has_any" and list_literal(first) is not None and list_literal(second) is None:
        first, second = second, first
    return first, list_literal(second)


# -- kernels (vectorised over a batch) -----------------------------------------------------------

def _as_array(value: Any, length: int) -> pa.Array:
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, length)
    return value


def _elements(lists: pa.Array) -> tuple[pa.Array, npt.NDArray[np.int64], Bools]:
    """Every child value in the lists' range, its row, and whether that row's list is valid.

    ``list_parent_indices`` numbers the children a null list still spans, while
    ``list_flatten`` drops them: the children are taken by offsets instead, so both line up.
    """
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_fixed_size_list(lists.type):
        size = lists.type.list_size
        child = lists.values.slice(lists.offset * size, len(lists) * size)
    else:
        offsets = lists.offsets
        start = int(offsets[0].as_py())
        child = lists.values.slice(start, int(offsets[-1].as_py()) - start)
    valid = lists.is_valid().to_numpy(zero_copy_only=False) if lists.null_count else np.ones(len(lists), bool)
    return child, parents, valid[parents]


def _with_nulls(out: Bools, null: Bools | None) -> pa.Array:
    return pa.array(out, pa.bool_(), mask=null if null is not None and null.any() else None)


def _list_nulls(lists: pa.Array) -> Bools | None:
    return lists.is_null().to_numpy(zero_copy_only=False) if lists.null_count else None


def _has_any(lists: pa.Array, needles: pa.Array) -> pa.Array:
    out = np.zeros(len(lists), bool)
    if len(needles) == 0:
        return pa.array(out)  # false on every row, a null list included (as pylance)
    child, parents, live = _elements(lists)
    set_ = needles.drop_null()
    hit = pc.is_in(child, value_set=set_, skip_nulls=True).to_numpy(zero_copy_only=False) if len(set_) \
        else np.zeros(len(child), bool)
    if needles.null_count:  # a null needle matches null elements
        hit = hit | child.is_null().to_numpy(zero_copy_only=False)
    out[parents[hit & live]] = True
    return _with_nulls(out, _list_nulls(lists))


def _has_all(lists: pa.Array, needles: pa.Array) -> pa.Array:
    distinct = pc.unique(needles)  # one null at most
    k = len(distinct)
    if k == 0:
        return pa.array(np.ones(len(lists), bool))  # true on every row, a null list included
    child, parents, live = _elements(lists)
    codes = pc.index_in(child, value_set=distinct, skip_nulls=False)  # a null element finds a null needle
    found = codes.is_valid().to_numpy(zero_copy_only=False) & live
    pairs = parents[found] * k + codes.fill_null(0).to_numpy(zero_copy_only=False)[found].astype(np.int64)
    rows = np.unique(pairs) // k  # each (row, needle) once
    out = np.bincount(rows, minlength=len(lists)) == k
    return _with_nulls(out, _list_nulls(lists))


def _has(lists: pa.Array, needle: Any) -> pa.Array:
    if isinstance(needle, pa.Scalar):
        if not needle.is_valid:
            return pa.nulls(len(lists), pa.bool_())
        return _has_any(lists, pa.array([needle.as_py()], needle.type))
    needle = _as_array(needle, len(lists))
    child, parents, live = _elements(lists)
    same = pc.equal(child, needle.take(pa.array(parents))).fill_null(False).to_numpy(zero_copy_only=False)
    out = np.zeros(len(lists), bool)
    out[parents[same & live]] = True
    null = lists.is_null().to_numpy(zero_copy_only=False) | needle.is_null().to_numpy(zero_copy_only=False)
    return _with_nulls(out, null)


def _any_kernel(ctx: Any, lists: Any, needles: Any) -> pa.Array:
    return _has_any(_as_array(lists, ctx.batch_length), needles.values)


def _all_kernel(ctx: Any, lists: Any, needles: Any) -> pa.Array:
    return _has_all(_as_array(lists, ctx.batch_length), needles.values)


def _has_kernel(ctx: Any, lists: Any, needle: Any) -> pa.Array:
    return _has(_as_array(lists, ctx.batch_length), needle)


_KERNELS: dict[str, Callable[[Any, Any, Any], pa.Array]] = {
    "has_any": _any_kernel, "has_all": _all_kernel, "has": _has_kernel}


def _udf(kernel: str, list_type: pa.DataType, needle_type: pa.DataType) -> str:
    """The name of the UDF computing ``kernel`` on these argument types (registered on first use)."""
    key = (kernel, str(list_type), str(needle_type))
    with _LOCK:
        name = _REGISTERED.get(key)
        if name is None:
            name = f"{UDF_PREFIX}{kernel}_{len(_REGISTERED)}"
            doc = {"summary": f"array_{kernel} of a SQL filter",
                   "description": "List membership as pylance evaluates it (lance_format.sql_lists)."}
            pc.register_scalar_function(_KERNELS[kernel], name, doc, {"lists": list_type, "needle": needle_type},
                                        pa.bool_())
            _REGISTERED[key] = name
    return name


def _call(kernel: str, lists: _Val, needle: Node, needle_type: pa.DataType) -> _Val:
    name = _udf(kernel, lists.type, needle_type)
    subject = _node(lists)
    node = Node(pc.Expression._call(name, [subject.expr, needle.expr]), name, (subject, needle))
    node.direct = True  # sql_program calls it through pc.call_function
    return _of(node, pa.bool_())


# -- translation ----------------------------------------------------------------------------------

def _subject(sem: Semantics, lists: _Val, what: str) -> pa.DataType:
    if lists.const is not None or not is_list_type(lists.type):
        raise sem.fail(f"{what} needs a list column as its first argument, got {lists.type}")
    return list_value_type(lists.type)


def _needle(sem: Semantics, item: _Val, elem: pa.DataType, what: str) -> pa.Scalar | None:
    """A literal cast to the element type; ``None`` when no element can equal it (2.5 in ints)."""
    if item.const is None:
        raise sem.fail(f"{what} takes literal values in its list")
    if not item.const.is_valid:
        return pa.scalar(None, elem)
    coerced = sem._coerce(item, _Val(None, elem))
    return coerced.const if coerced.const is not None and coerced.type == elem else None


def array_has_some(sem: Semantics, lists: _Val, items: Sequence[_Val], *, every: bool, what: str) -> _Val:
    """``array_has_any(lists, [items])`` (``every`` false) or ``array_has_all`` (``every`` true).

    Raises:
        InvalidInputError: ``lists`` is not a list column, an item is not a literal, or an item
            cannot be compared with the elements.
    """
    elem = _subject(sem, lists, what)
    needles = [_needle(sem, item, elem, what) for item in items]
    usable = [n for n in needles if n is not None]
    if len(usable) < len(needles) and (every or not usable):
        # an item no element can equal: no list holds it, so every non-null list is false
        # (``if_else`` keeps the null list NULL, as the function itself does)
        unknown = Node.call("if_else", Node.call("is_null", _node(lists)), pa.scalar(None, pa.bool_()), False)
        return _of(unknown, pa.bool_())
    needle_type = pa.list_(elem)
    value = pa.scalar([n.as_py() for n in usable], needle_type) if usable else pa.scalar([], needle_type)
    return _call("has_all" if every else "has_any", lists, Node.const(value), needle_type)


def array_has(sem: Semantics, lists: _Val, needle: _Val, what: str) -> _Val:
    """``array_has(lists, needle)``: ``needle`` a literal or a column of the element type.

    Raises:
        InvalidInputError: ``lists`` is not a list column, or ``needle`` cannot be compared
            with its elements.
    """
    elem = _subject(sem, lists, what)
    if needle.const is not None:
        value = _needle(sem, needle, elem, what)
        if value is None:
            return array_has_some(sem, lists, [needle], every=True, what=what)
        return _call("has", lists, Node.const(value), elem)
    if not needle.type.equals(elem):
        needle = sem._cast_val(needle, elem)
    return _call("has", lists, _node(needle), elem)
