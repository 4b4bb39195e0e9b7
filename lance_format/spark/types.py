"""Arrow ⇄ Spark type mapping for the ``lance`` data source.

Spark's SQL types are a subset of Arrow's. Every Lance column maps to one Spark type
without losing values, or the read is refused up front with an error naming the column:

==========================================  ===========================================
Arrow (Lance column)                        Spark
==========================================  ===========================================
bool, int8/16/32/64, float32/64, string,    the same type (``BooleanType``, ``ByteType``…)
binary (and their large/view variants)
uint8 / uint16 / uint32                     ``ShortType`` / ``IntegerType`` / ``LongType``
uint64                                      ``DecimalType(20, 0)`` (every value fits)
float16                                     ``FloatType``
fixed_size_binary                           ``BinaryType``
decimal128/256 with precision <= 38         ``DecimalType(p, s)``
date32 / date64                             ``DateType``
timestamp with a time zone                  ``TimestampType`` (microseconds)
timestamp without a time zone               ``TimestampNTZType`` (microseconds)
duration                                    ``DayTimeIntervalType`` (microseconds)
list / large_list / fixed_size_list         ``ArrayType`` (a vector's size is kept in the field's
                                            ``arrow.fixed-size-list.size`` metadata)
struct, map                                 ``StructType``, ``MapType``
dictionary                                  its value type (decoded)
null                                        ``NullType``
==========================================  ===========================================

Nanosecond timestamps and durations are cast with Arrow's *safe* cast: a value with
sub-microsecond digits fails the read (naming the column) instead of being truncated.
Refused: time32/time64, decimals wider than 38 digits, intervals other than durations,
unions, and lists with more than 2**31 - 1 elements in one batch (Spark arrays are
int32-indexed; checked when the batch is converted).

Writes go the other way through Spark's own Arrow conversion; appends then cast to the
table's Arrow types with a safe cast (so ``DecimalType(20, 0)`` goes back into ``uint64``).
A new dataset stores an ``ArrayType`` column as ``fixed_size_list<T, N>`` when its Spark
field carries ``arrow.fixed-size-list.size = N`` metadata (as lance-spark does; a DataFrame
read from Lance carries it for every vector column) or the write names it
(:func:`write_schema`); a row of another length fails the write, naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

from lance_format.errors import SchemaError, UnsupportedTypeError
from lance_format.schema import BLOB_METADATA_KEY

#: Spark field metadata key (and lance-spark table property suffix) holding a vector's size.
FIXED_SIZE_KEY = "arrow.fixed-size-list.size"
#: Spark field metadata key holding a catalog table's dataset location (see ``LanceDataSource.schema``).
TABLE_URI_KEY = "lance.uri"


def with_table_uri(schema: Any, uri: str) -> Any:
    """``schema`` with ``uri`` in every top-level field's metadata."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, f.dataType, f.nullable, {**(f.metadata or {}), TABLE_URI_KEY: uri})
                       for f in schema.fields])


def table_uri(schema: Any) -> str | None:
    """The dataset location a catalog table's stored schema carries, if any."""
    for f in schema.fields:
        uri = (f.metadata or {}).get(TABLE_URI_KEY)
        if uri:
            return str(uri)
    return None


def _field(name: str, typ: pa.DataType, where: str) -> Any:
    from pyspark.sql.types import StructField

    # A vector's size travels as field metadata, so writing the DataFrame again keeps it.
    meta = {FIXED_SIZE_KEY: typ.list_size} if pat.is_fixed_size_list(typ) else None
    return StructField(name, _spark_type(typ, where), True, meta)


def _spark_type(typ: pa.DataType, where: str) -> Any:
    from pyspark.sql import types as T

    simple: list[tuple[Any, Any]] = [
        (pat.is_boolean, T.BooleanType()), (pat.is_int8, T.ByteType()), (pat.is_int16, T.ShortType()),
        (pat.is_int32, T.IntegerType()), (pat.is_int64, T.LongType()), (pat.is_uint8, T.ShortType()),
        (pat.is_uint16, T.IntegerType()), (pat.is_uint32, T.LongType()), (pat.is_uint64, T.DecimalType(20, 0)),
        (pat.is_float16, T.FloatType()), (pat.is_float32, T.FloatType()), (pat.is_float64, T.DoubleType()),
        (pat.is_string, T.StringType()), (pat.is_large_string, T.StringType()),
        (pat.is_string_view, T.StringType()), (pat.is_binary, T.BinaryType()),
        (pat.is_large_binary, T.BinaryType()), (pat.is_binary_view, T.BinaryType()),
        (pat.is_fixed_size_binary, T.BinaryType()), (pat.is_date, T.DateType()), (pat.is_null, T.NullType()),
    ]
    for check, spark in simple:
        if check(typ):
            return spark
    if pat.is_decimal(typ):
        if typ.precision > 38:
            raise UnsupportedTypeError(f"column {where!r}: {typ} has more than 38 digits, the most Spark's "
                                       "DecimalType holds")
        return T.DecimalType(typ.precision, typ.scale)
    if pat.is_timestamp(typ):
        return T.TimestampType() if typ.tz is not None else T.TimestampNTZType()
    if pat.is_duration(typ):
        return T.DayTimeIntervalType()
    if pat.is_list(typ) or pat.is_large_list(typ) or pat.is_fixed_size_list(typ) or pat.is_list_view(typ):
        return T.ArrayType(_spark_type(typ.value_type, f"{where}[]"), True)
    if pat.is_map(typ):
        return T.MapType(_spark_type(typ.key_type, f"{where}.key"), _spark_type(typ.item_type, f"{where}.value"),
                         True)
    if pat.is_struct(typ):
        return T.StructType([_field(f.name, f.type, f"{where}.{f.name}") for f in typ])
    if pat.is_dictionary(typ):
        return _spark_type(typ.value_type, where)
    raise UnsupportedTypeError(f"column {where!r}: Arrow type {typ} has no lossless Spark SQL type "
                               "(leave the column out with the 'columns' option)")


def spark_schema(schema: pa.Schema) -> Any:
    """The Spark ``StructType`` a scan of ``schema`` produces (every field nullable).

    Raises:
        UnsupportedTypeError: a column's type has no lossless Spark type; the message names it.
    """
    from pyspark.sql.types import StructType

    return StructType([_field(f.name, f.type, f.name) for f in schema])


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The exact Arrow schema Spark expects for batches of a ``schema`` scan."""
    from pyspark.sql.pandas.types import to_arrow_schema

    # Spark checks batches against this schema field for field, so we convert to it.
    result: pa.Schema = to_arrow_schema(spark_schema(schema), timezone="UTC")
    return result


def write_schema(schema: Any, fixed_sizes: dict[str, int] | None = None,
                 blob_columns: Sequence[str] = ()) -> pa.Schema:
    """The Arrow schema a new dataset gets for a DataFrame of Spark ``schema``.

    Spark's own conversion (timestamps in UTC), with ``ArrayType`` fields turned into
    fixed-size lists where the field's metadata or ``fixed_sizes`` (top-level column → size)
    says so.

    Raises:
        SchemaError: a size is given for a column that is missing or not an array.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    sizes = dict(fixed_sizes or {})
    unknown = [c for c in sizes if c not in arrow.names]
    if unknown:
        raise SchemaError(f"{FIXED_SIZE_KEY} given for column(s) {unknown} that the DataFrame does not have "
                          f"(columns: {arrow.names})")
    fields = [_fixed(f, sf, sizes.get(f.name)) for f, sf in zip(arrow, schema.fields, strict=True)]
    return pa.schema([_blob(f, sf, f.name in blob_columns) for f, sf in zip(fields, schema.fields, strict=True)])


def _blob(field: pa.Field, spark_field: Any, named: bool) -> pa.Field:
    # a binary column becomes a blob column when an option names it or its Spark metadata says so
    if not (named or str((spark_field.metadata or {}).get(BLOB_METADATA_KEY, "")).lower() == "true"):
        return field
    if not (pat.is_binary(field.type) or pat.is_large_binary(field.type)):
        raise SchemaError(f"column {field.name!r}: the blob encoding needs a binary column, got {field.type}")
    return pa.field(field.name, pa.large_binary(), field.nullable, {BLOB_METADATA_KEY: "true"})


def _fixed(field: pa.Field, spark_field: Any, size: int | None) -> pa.Field:
    meta = spark_field.metadata or {}
    if size is None and FIXED_SIZE_KEY in meta:
        size = int(meta[FIXED_SIZE_KEY])
    if size is None and pat.is_struct(field.type):  # vectors inside structs carry their own metadata
        children = [_fixed(child, sf, None) for child, sf in zip(field.type, spark_field.dataType.fields,
                                                                  strict=True)]
        return pa.field(field.name, pa.struct(children), field.nullable, field.metadata)
    if size is None:
        return field
    if not (pat.is_list(field.type) or pat.is_large_list(field.type) or pat.is_fixed_size_list(field.type)):
        raise SchemaError(f"column {field.name!r}: {FIXED_SIZE_KEY}={size} needs an array column, got {field.type}")
    if size <= 0:
        raise SchemaError(f"column {field.name!r}: {FIXED_SIZE_KEY} must be positive, got {size}")
    return pa.field(field.name, pa.list_(field.type.value_field, size), field.nullable, field.metadata)


def to_spark_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Convert ``batch`` to ``target`` (from :func:`spark_arrow_schema`) without losing values.

    Raises:
        SchemaError: a value cannot be represented (e.g. nanoseconds in a timestamp); names the column.
    """
    if batch.schema.equals(target):
        return batch
    arrays = []
    for name, column, field in zip(batch.schema.names, batch.columns, target, strict=True):
        arrays.append(convert_column(column, field.type, name))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def convert_column(column: pa.Array, typ: pa.DataType, name: str) -> pa.Array:
    """Safe-cast one column to ``typ``; failures name the column."""
    if column.type.equals(typ):
        return column
    if pat.is_dictionary(column.type):
        column = column.dictionary_decode()
    try:
        return column.cast(typ, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"column {name!r}: cannot convert {column.type} to {typ} without losing data: "
                          f"{exc}") from exc


def to_table_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Cast a batch coming from Spark to the table's Arrow schema (appends), by column name.

    Raises:
        SchemaError: a column is missing, or a value does not fit the table type (names the column).
    """
    if batch.schema.equals(target):
        return batch
    arrays = []
    for field in target:
        idx = batch.schema.get_field_index(field.name)
        if idx < 0:
            raise SchemaError(f"column {field.name!r} of the table is missing from the DataFrame "
                              f"(columns: {batch.schema.names})")
        arrays.append(convert_column(batch.column(idx), field.type, field.name))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


__all__ = ["FIXED_SIZE_KEY", "TABLE_URI_KEY", "table_uri", "with_table_uri", "convert_column", "spark_arrow_schema", "spark_schema", "to_spark_batch",
           "to_table_batch", "write_schema"]
