"""Schema modes: how the columns of new data may differ from the table they are written to.

* ``strict`` (default): same column names (any order); types must cast to the table's. Anything
  else is refused with the new and missing columns named.
* ``merge``: new columns are added to the table first (old rows read them as null, no data is
  rewritten); columns the data lacks are written as nulls.
* ``overwrite``: the write replaces the table and its schema (only with write mode ``overwrite`` of
  a whole, unpartitioned table).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa

from lance_format.errors import InvalidInputError, SchemaError

from .config import SchemaMode, WriteMode

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader


@dataclass(frozen=True)
class SchemaPlan:
    """What a write must do to the table's schema and to the data first.

    Attributes:
        new_columns: columns to add to the table before writing (``schema_mode="merge"``).
        cast_to: schema to conform the data to (table order and types), ``None`` to leave it.
    """

    new_columns: tuple[pa.Field, ...] = ()
    cast_to: pa.Schema | None = None


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    if src.equals(dst):
        return True
    try:
        pa.array([], type=src).cast(dst)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


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
        SchemaError: naming the new / missing columns, or a column whose type cannot be cast.
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
    for field in data:
        if field.name in table.names and not _castable(field.type, table.field(field.name).type):
            raise SchemaError(f"{where}: column {field.name!r} has type {field.type}, which does not cast to "
                              f"the table's {table.field(field.name).type}")
    added = tuple(f.with_nullable(True) for f in new)
    target = pa.schema(list(table) + list(added), metadata=table.metadata)
    return SchemaPlan(new_columns=added, cast_to=target)


def _conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    columns = [batch.column(f.name).cast(f.type) if f.name in batch.schema.names
               else pa.nulls(batch.num_rows, f.type) for f in target]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def _conform_stream(reader: pa.RecordBatchReader, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        yield _conform_batch(batch, target)


def align_to_schema(data: ArrowData, target: pa.Schema) -> ArrowData:
    """Conform ``data`` to a table's schema: table column order, the table's types, nulls for absent columns.

    Frame libraries lose some Arrow types on a round trip (pandas turns ``fixed_size_list<float32>``
    into ``list<float>``, polars strings into ``large_string``), so same-named columns are cast to the
    table's types. Data with a column the target lacks is returned unchanged: the table layer then
    reports the mismatch.
    """
    if any(n not in target.names for n in data.schema.names) or data.schema.equals(target):
        return data
    if isinstance(data, pa.Table):
        if data.schema.names == target.names:
            cast_table: pa.Table = data.cast(target)
            return cast_table
        conformed: pa.Table = pa.Table.from_batches([_conform_batch(b, target) for b in data.to_batches()],
                                                    schema=target)
        return conformed
    stream: pa.RecordBatchReader = pa.RecordBatchReader.from_batches(target, _conform_stream(data, target))
    return stream
