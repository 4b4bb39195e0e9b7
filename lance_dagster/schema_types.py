"""How a column's type in new data relates to the table's type, and conforming data to the table.

Frame libraries change how a type is represented without changing what it holds: polars writes
``large_string`` where pyarrow writes ``string``, pandas turns ``fixed_size_list<float>`` into
``list<float>`` and categoricals into dictionaries. Those are the *same* type here, and data is
converted to the table's representation (a safe cast: a value that does not fit is an error, never
truncated). Anything else is a type change, which ``schema_mode="strict"`` refuses and
``schema_mode="merge"`` accepts only as a safe promotion (:func:`promotes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import pyarrow as pa
import pyarrow.types as pt

from lance_format.errors import SchemaError

#: Promotions ``schema_mode="merge"`` makes, as shown in error messages.
PROMOTIONS_TEXT = ("int8→int16→int32→int64, uint to a wider (u)int, float16→float32→float64, "
                   "string→large_string, binary→large_binary, new nullable struct fields")

_SIGNED = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
_UNSIGNED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
_FLOATS = [pa.float16(), pa.float32(), pa.float64()]
_WIDER = {(pa.string(), pa.large_string()), (pa.binary(), pa.large_binary())}


class Relation(Enum):
    """How a data type relates to a table type."""

    SAME = "same"            #: the same values, maybe another representation: convert the data
    DATA_NARROWER = "data"   #: the data's type promotes to the table's: convert the data up
    TABLE_NARROWER = "table"  #: the table's type promotes to the data's: widen the table's column
    STRUCT = "struct"        #: a struct whose fields differ: see :func:`struct_changes`
    OTHER = "other"          #: a type change no promotion covers


def _is_string(t: pa.DataType) -> bool:
    return bool(pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pt.is_binary(t) or pt.is_large_binary(t) or pt.is_binary_view(t))


def _is_list(t: pa.DataType) -> bool:
    return bool(pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t) or pt.is_list_view(t)
                or pt.is_large_list_view(t))


def promotes(narrow: pa.DataType, wide: pa.DataType) -> bool:
    """Whether every value of ``narrow`` is a value of ``wide`` and ``wide`` is a safe widening of it."""
    for ladder in (_SIGNED, _UNSIGNED, _FLOATS):
        if narrow in ladder and wide in ladder:
            return ladder.index(narrow) < ladder.index(wide)
    if narrow in _UNSIGNED and wide in _SIGNED:  # uint8 fits int16 and wider
        return _SIGNED.index(wide) > _UNSIGNED.index(narrow)
    return (narrow, wide) in _WIDER


def same_values(data: pa.DataType, table: pa.DataType) -> bool:
    """Whether two types hold the same values (equal, or another representation of them)."""
    if pt.is_dictionary(data):
        return same_values(data.value_type, table)
    if data.equals(table):
        return True
    if _is_string(data) and _is_string(table) or _is_binary(data) and _is_binary(table):
        return True
    if _is_list(data) and _is_list(table):
        return same_values(data.value_type, table.value_type)
    if pt.is_struct(data) and pt.is_struct(table):
        names = [f.name for f in table]
        return sorted(f.name for f in data) == sorted(names) and all(
            same_values(f.type, table.field(f.name).type) for f in data)
    return False


def relation(data: pa.DataType, table: pa.DataType, *, widen: bool = False) -> Relation:
    """How ``data`` relates to ``table`` (see :class:`Relation`).

    Args:
        data: the type in the new data.
        table: the type in the table.
        widen: report ``string`` in the table and ``large_string`` in the data (binary alike) as
            :attr:`Relation.TABLE_NARROWER` rather than :attr:`Relation.SAME`, so the table's
            column is widened instead of each batch being converted down.
    """
    if widen and promotes(table, data):
        return Relation.TABLE_NARROWER
    if same_values(data, table):
        return Relation.SAME
    if pt.is_struct(data) and pt.is_struct(table):
        return Relation.STRUCT
    if promotes(data, table):
        return Relation.DATA_NARROWER
    if promotes(table, data):
        return Relation.TABLE_NARROWER
    return Relation.OTHER


@dataclass(frozen=True)
class StructChanges:
    """What merging a data struct into a table struct takes.

    Attributes:
        added: the data's struct fields the table lacks, as a struct type holding only them (a
            field of that type, named like the column, is what ``add_columns`` takes), ``None``
            when none.
        target: the table's struct type after the merge (data is conformed to it).
    """

    added: pa.DataType | None
    target: pa.DataType


def struct_changes(name: str, data: pa.DataType, table: pa.DataType, *,
                   refuse: Callable[[str, pa.DataType, pa.DataType], SchemaError], where: str) -> StructChanges:
    """Merge the fields of struct ``data`` into struct ``table`` (``schema_mode="merge"``).

    New fields are added (nullable); fields the data lacks read as null; a field whose type is
    narrower in the data is converted up. A nested field cannot be widened in place (Lance's
    ``alter_columns`` casts top-level columns only), so that is refused like any other change.

    Raises:
        SchemaError: from ``refuse(path, data_type, table_type)`` for a field no rule covers.
    """
    kept: list[pa.Field] = []
    added: list[pa.Field] = []
    for tf in table:
        path = f"{name}.{tf.name}"
        if data.get_field_index(tf.name) < 0:
            if not tf.nullable:
                raise SchemaError(f"{where}: struct field {path!r} is missing from the data and not nullable in "
                                  "the table")
            kept.append(tf)
            continue
        df = data.field(tf.name)
        rel = relation(df.type, tf.type)
        if rel in (Relation.SAME, Relation.DATA_NARROWER):
            kept.append(tf)
        elif rel is Relation.STRUCT:
            inner = struct_changes(path, df.type, tf.type, refuse=refuse, where=where)
            kept.append(tf.with_type(inner.target))
            if inner.added is not None:
                added.append(pa.field(tf.name, inner.added))
        else:
            raise refuse(path, df.type, tf.type)
    new = [f.with_nullable(True) for f in data if table.get_field_index(f.name) < 0]
    added += new
    return StructChanges(pa.struct(added) if added else None, pa.struct(kept + new))


def conform_array(arr: pa.Array, target: pa.DataType, path: str, *, where: str) -> pa.Array:
    """``arr`` as ``target``: struct fields matched by name (absent ones null), values cast safely.

    Raises:
        SchemaError: a value that does not fit ``target`` (naming ``where`` and the column path).
    """
    if arr.type.equals(target):
        return arr
    if pt.is_dictionary(arr.type):
        return conform_array(arr.dictionary_decode(), target, path, where=where)
    if pt.is_struct(arr.type) and pt.is_struct(target):
        children = []
        for tf in target:
            i = arr.type.get_field_index(tf.name)
            child = arr.field(i) if i >= 0 else pa.nulls(len(arr), tf.type)
            children.append(conform_array(child, tf.type, f"{path}.{tf.name}", where=where))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"{where}: column {path!r} ({arr.type}) does not fit the table's type {target}: "
                          f"{exc}") from None
