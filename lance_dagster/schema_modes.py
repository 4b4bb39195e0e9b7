"""Schema modes: how the columns of new data may differ from the table they are written to.

* ``strict`` (default): same column names (any order) and types. A type the data represents
  differently (``large_string`` for ``string``, ``list`` for ``fixed_size_list``) is the same type
  (:mod:`lance_dagster.schema_types`); any other difference is refused, naming the column and both
  types, before anything is written.
* ``merge``: new columns (and new fields of struct columns) are added to the table first (old rows
  read them as null, no data is rewritten); columns the data lacks are written as nulls; a column
  whose type safely promotes (int32→int64, float32→float64, string→large_string) is widened in the
  table first, as pylance's ``alter_columns`` casts it, and data of a narrower type is converted
  up. Values are never truncated.
* ``overwrite``: the write replaces the table and its schema (only with write mode ``overwrite`` of
  a whole, unpartitioned table).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from lance_format.errors import InvalidInputError, SchemaError

from .config import SchemaMode, WriteMode
from .schema_types import PROMOTIONS_TEXT, Relation, conform_array, relation, struct_changes

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader


@dataclass(frozen=True)
class SchemaPlan:
    """What a write must do to the table's schema and to the data first.

    Attributes:
        new_columns: fields to add to the table before writing (``schema_mode="merge"``): new
            columns, and struct columns holding only their new fields.
        promotions: ``(column, wider type)`` of table columns to widen before writing.
        cast_to: schema to conform the data to (table order and types), ``None`` to leave it.
    """

    new_columns: tuple[pa.Field, ...] = ()
    promotions: tuple[tuple[str, pa.DataType], ...] = ()
    cast_to: pa.Schema | None = None

    @property
    def evolves(self) -> bool:
        """Whether the table's schema changes (commits) before the data is written."""
        return bool(self.new_columns or self.promotions)


def _type_change(where: str, version: int,
                 schema_mode: SchemaMode) -> Callable[[str, pa.DataType, pa.DataType], SchemaError]:
    def refuse(path: str, data: pa.DataType, table: pa.DataType) -> SchemaError:
        if schema_mode == "strict":
            advice = (f"schema_mode 'strict' refuses type changes; set metadata schema_mode='merge' to widen "
                      f"the table's column (safe promotions only: {PROMOTIONS_TEXT})")
        else:
            advice = f"schema_mode 'merge' makes safe promotions only ({PROMOTIONS_TEXT})"
        return SchemaError(f"{where}: column {path!r} has type {data} in the data but {table} in the table "
                           f"(version {version}); {advice}, or schema_mode='overwrite' with mode 'overwrite' "
                           "to replace the schema")

    return refuse


def plan_schema(
    existing: LanceDataset | None,
    data: pa.Schema,
    *,
    schema_mode: SchemaMode,
    mode: WriteMode,
    where: str,
    partitioned: bool = False,
) -> SchemaPlan:
    """Check ``data`` against the table under ``schema_mode`` before anything is written.

    Raises:
        SchemaError: naming the new / missing columns, or a column, its type in the data and in
            the table, and the schema mode that allows the change (if any).
        InvalidInputError: ``schema_mode="overwrite"`` with another mode or a partitioned write.
    """
    if schema_mode == "overwrite" and (mode != "overwrite" or partitioned):
        raise InvalidInputError(f"{where}: schema_mode 'overwrite' replaces the whole table and needs write "
                                f"mode 'overwrite' of an unpartitioned asset (mode {mode!r}"
                                f"{', partitioned' if partitioned else ''})")
    if existing is None or schema_mode == "overwrite":
        return SchemaPlan()
    table = existing.schema
    new = [f for f in data if f.name not in table.names]
    missing = [n for n in table.names if n not in data.names]
    if schema_mode == "strict" and (new or missing):
        raise SchemaError(
            f"{where}: the data's columns differ from the table's (version {existing.version}): "
            f"new column(s) {[f.name for f in new]}, missing column(s) {missing}; set metadata "
            "schema_mode='merge' to add columns, or schema_mode='overwrite' with mode 'overwrite' to replace "
            "the schema")
    for name in missing:
        if not table.field(name).nullable:
            raise SchemaError(f"{where}: the data lacks column {name!r}, which is not nullable in the table")
    refuse = _type_change(where, int(existing.version), schema_mode)
    target: list[pa.Field] = []
    added: list[pa.Field] = []
    promotions: list[tuple[str, pa.DataType]] = []
    for tf in table:
        if tf.name not in data.names:
            target.append(tf)
            continue
        df = data.field(tf.name)
        rel = relation(df.type, tf.type, widen=schema_mode == "merge")
        if rel is Relation.SAME:
            target.append(tf)
        elif schema_mode == "strict" or rel is Relation.OTHER:
            raise refuse(tf.name, df.type, tf.type)
        elif rel is Relation.DATA_NARROWER:
            target.append(tf)
        elif rel is Relation.TABLE_NARROWER:
            promotions.append((tf.name, df.type))
            target.append(tf.with_type(df.type))
        else:
            change = struct_changes(tf.name, df.type, tf.type, refuse=refuse, where=where)
            target.append(tf.with_type(change.target))
            if change.added is not None:
                added.append(pa.field(tf.name, change.added))
    fresh = tuple(f.with_nullable(True) for f in new)
    return SchemaPlan(new_columns=tuple(added) + fresh, promotions=tuple(promotions),
                      cast_to=pa.schema(target + list(fresh), metadata=table.metadata))


def _conform_batch(batch: pa.RecordBatch, target: pa.Schema, where: str) -> pa.RecordBatch:
    columns = [conform_array(batch.column(f.name), f.type, f.name, where=where) if f.name in batch.schema.names
               else pa.nulls(batch.num_rows, f.type) for f in target]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _conform_stream(reader: pa.RecordBatchReader, target: pa.Schema, where: str) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        yield _conform_batch(batch, target, where)


def align_to_schema(data: ArrowData, target: pa.Schema, *, where: str = "data") -> ArrowData:
    """Conform ``data`` to a table's schema: table column order, the table's types, nulls for absent columns.

    Frame libraries lose some Arrow types on a round trip (pandas turns ``fixed_size_list<float32>``
    into ``list<float>``, polars strings into ``large_string``), so same-named columns are converted
    to the table's types with safe casts: a table is converted now, a stream batch by batch. Data
    with a column the target lacks is returned unchanged: the table layer then reports the mismatch.

    Raises:
        SchemaError: a value does not fit its column's type (naming ``where`` and the column).
    """
    if any(n not in target.names for n in data.schema.names) or data.schema.equals(target):
        return data
    if isinstance(data, pa.Table):
        batches = [_conform_batch(b, target, where) for b in data.to_batches()]
        conformed: pa.Table = pa.Table.from_batches(batches, schema=target)
        return conformed
    stream: pa.RecordBatchReader = pa.RecordBatchReader.from_batches(target, _conform_stream(data, target, where))
    return stream
