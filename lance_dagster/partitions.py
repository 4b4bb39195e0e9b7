"""Which rows of a table a set of Dagster partitions owns, as a filter on the ``partition_expr`` columns.

Follows the convention of dagster-deltalake and dagster-iceberg: a partitioned asset names the column
that holds its partition in definition metadata, ``{"partition_expr": "region"}``, or one column per
dimension of a multi-partitioned asset, ``{"partition_expr": {"date": "day", "region": "region"}}``.
Static and dynamic partitions select rows whose column equals one of the keys; time-window partitions
select ``start <= column < end``, on a timestamp, date or ISO 8601 string column (``"2026-01-01"``, or
``"2026-01-01T05:00:00"`` for partitions finer than a day: ISO strings of one width sort as their
times). Their ``DbIOManager`` (``dagster._core.storage.db_io_manager``) is
private API and deletes a slice and writes it back as two separate statements; here the slice is a
filter expression that one Lance commit replaces (:func:`lance_format.evolution.replace.replace_where`)
and that a load pushes down to the scan.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    MultiPartitionKey,
    MultiPartitionsDefinition,
    PartitionsDefinition,
    TimeWindowPartitionsDefinition,
)

from lance_format.errors import InvalidInputError, SchemaError

from .config import PARTITION_EXPR_KEY, raw_value

Window = tuple[dt.datetime, dt.datetime]


@dataclass(frozen=True)
class PartitionDimension:
    """The rows of one partition dimension: a column equal to one of ``keys``, or inside ``windows``.

    Attributes:
        column: the ``partition_expr`` column.
        keys: static or dynamic partition keys (empty for a time dimension).
        windows: half-open ``[start, end)`` time windows, merged where contiguous.
        dates_only: the partitions are days or longer, so a string column holds ISO dates
            (``"2026-01-01"``) rather than ISO date-times.
    """

    column: str
    keys: tuple[str, ...] = ()
    windows: tuple[Window, ...] = ()
    dates_only: bool = True

    def expression(self, schema: pa.Schema, *, where: str) -> pc.Expression:
        """The filter on ``schema``'s column, with the keys cast to the column's type.

        Raises:
            SchemaError: the column is missing, or the keys / times do not fit its type.
        """
        if self.column not in schema.names:
            raise SchemaError(f"{where}: partition_expr column {self.column!r} is not in the data's "
                              f"columns {schema.names}")
        typ = schema.field(self.column).type
        col = pc.field(self.column)
        if self.windows:
            return reduce(lambda a, b: a | b,
                          [(col >= _time_scalar(s, typ, self.column, where, self.dates_only))
                           & (col < _time_scalar(e, typ, self.column, where, self.dates_only))
                           for s, e in self.windows])
        try:
            values = pa.array(list(self.keys), pa.string()).cast(typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaError(f"{where}: partition keys {list(self.keys)} do not fit column {self.column!r} "
                              f"of type {typ}: {exc}") from exc
        return col.isin(values)


    def sql(self, schema: pa.Schema, *, where: str) -> str:
        """The same filter as Lance SQL (for engines that take a predicate string, e.g. Spark reads)."""
        col = _quote_ident(self.column)
        if self.windows:
            typ = schema.field(self.column).type if self.column in schema.names else pa.timestamp("us", "UTC")
            parts = [f"({col} >= {_time_literal(s, typ, self.dates_only)} AND "
                     f"{col} < {_time_literal(e, typ, self.dates_only)})" for s, e in self.windows]
            return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
        self.expression(schema, where=where)  # validates the column and that the keys fit its type
        typ = schema.field(self.column).type
        literals = ", ".join(_literal(k, typ) for k in self.keys)
        return f"{col} IN ({literals})"


def _quote_ident(name: str) -> str:
    return name if name.isidentifier() else "`" + name.replace("`", "``") + "`"


def _literal(key: str, typ: pa.DataType) -> str:
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        return str(pa.scalar(key).cast(typ).as_py())
    return "'" + key.replace("'", "''") + "'"


def _iso_text(t: dt.datetime, dates_only: bool) -> str:
    # Wall-clock time in the partitions' timezone, as the partition keys name it.
    return t.date().isoformat() if dates_only else t.replace(tzinfo=None).isoformat()


def _is_text(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ))


def _time_literal(t: dt.datetime, typ: pa.DataType, dates_only: bool = True) -> str:
    if _is_text(typ):
        return f"'{_iso_text(t, dates_only)}'"
    if pa.types.is_date(typ):
        return f"DATE '{t.date().isoformat()}'"
    if pa.types.is_timestamp(typ) and typ.tz is None:
        return f"TIMESTAMP '{t.replace(tzinfo=None).isoformat(sep=' ')}'"
    return f"TIMESTAMP '{t.astimezone(dt.UTC).isoformat(sep=' ')}'"


def _time_scalar(t: dt.datetime, typ: pa.DataType, column: str, where: str, dates_only: bool = True) -> pa.Scalar:
    if pa.types.is_timestamp(typ):
        # A zone-aware column compares instants; a naive one holds wall-clock times in the partitions'
        # timezone (as dagster-deltalake formats its window bounds).
        value = t if typ.tz is not None else t.replace(tzinfo=None)
        return pa.scalar(value, type=typ)
    if pa.types.is_date(typ):
        return pa.scalar(t.date(), type=typ)
    if _is_text(typ):
        return pa.scalar(_iso_text(t, dates_only), type=typ)
    raise SchemaError(f"{where}: time-window partition column {column!r} must be a timestamp, date or ISO "
                      f"8601 string, not {typ}")


@dataclass(frozen=True)
class PartitionSlice:
    """The rows owned by a set of partition keys: an OR of ANDs of :class:`PartitionDimension`.

    A single-dimension asset, or a multi-dimension selection that is a full cross product (one
    partition, a backfill range), has a single term; other multi-dimension selections have one
    term per key.

    Attributes:
        keys: the Dagster partition keys covered.
        terms: conjunctions of dimensions, OR-ed together.
    """

    keys: tuple[str, ...]
    terms: tuple[tuple[PartitionDimension, ...], ...]

    @classmethod
    def nothing(cls) -> PartitionSlice:
        """The slice of no partition: what a partition mapping gives the first partition of a
        self-dependent asset (``TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)``)."""
        return cls((), ())

    @property
    def columns(self) -> tuple[str, ...]:
        """The partition columns, in dimension order."""
        return tuple(d.column for d in self.terms[0]) if self.terms else ()

    def expression(self, schema: pa.Schema, *, where: str) -> pc.Expression:
        """The filter selecting the slice's rows of a table with ``schema`` (always false for no partition)."""
        if not self.terms:
            return pc.scalar(False)
        conj = [reduce(lambda a, b: a & b, [d.expression(schema, where=where) for d in term])
                for term in self.terms]
        return reduce(lambda a, b: a | b, conj)

    def sql(self, schema: pa.Schema, *, where: str) -> str:
        """The same filter as Lance SQL text."""
        if not self.terms:
            return "false"
        conj = [" AND ".join(d.sql(schema, where=where) for d in term) for term in self.terms]
        return conj[0] if len(conj) == 1 else " OR ".join(f"({c})" for c in conj)


def partition_expr_of(metadata: Mapping[str, object] | None) -> str | dict[str, str] | None:
    """The ``partition_expr`` entry of definition metadata, unwrapped (``None`` when absent)."""
    value = raw_value((metadata or {}).get(PARTITION_EXPR_KEY))
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    raise InvalidInputError(f"metadata {PARTITION_EXPR_KEY!r} must be a column name or a dict of "
                            f"dimension -> column, got {value!r}")


def _merged_windows(pdef: TimeWindowPartitionsDefinition, keys: Sequence[str]) -> tuple[Window, ...]:
    spans = sorted((w.start, w.end) for w in (pdef.time_window_for_partition_key(k) for k in keys))
    merged: list[Window] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def _dimension(pdef: PartitionsDefinition, column: str, keys: Sequence[str]) -> PartitionDimension:
    unique = tuple(dict.fromkeys(keys))
    if isinstance(pdef, TimeWindowPartitionsDefinition):
        dates_only = not any(d in pdef.fmt for d in ("%H", "%I", "%M", "%S", "%p", "%X", "%c", "%T", "%R"))
        return PartitionDimension(column, windows=_merged_windows(pdef, unique), dates_only=dates_only)
    return PartitionDimension(column, keys=unique)


def build_slice(
    pdef: PartitionsDefinition,
    keys: Sequence[str],
    partition_expr: str | Mapping[str, str] | None,
    *,
    where: str,
) -> PartitionSlice:
    """Turn the partition keys of a step (or of an input) into a :class:`PartitionSlice`.

    Args:
        pdef: the asset's partitions definition.
        keys: the partition keys the step writes or reads.
        partition_expr: the asset's ``partition_expr`` metadata.
        where: what is being written or read, for errors.

    Raises:
        InvalidInputError: ``partition_expr`` is missing or does not match the dimensions.
    """
    if partition_expr is None:
        raise InvalidInputError(
            f"{where} is partitioned but has no {PARTITION_EXPR_KEY!r} metadata, so the rows of a partition "
            f"cannot be told apart and the write would replace every partition; add e.g. "
            f"metadata={{'{PARTITION_EXPR_KEY}': 'your_partition_column'}} (a dict of dimension -> column "
            "for a multi-partitioned asset)")
    if not keys:
        raise InvalidInputError(f"{where}: no partition keys to write or read")
    if not isinstance(pdef, MultiPartitionsDefinition):
        if not isinstance(partition_expr, str):
            raise InvalidInputError(f"{where}: {PARTITION_EXPR_KEY!r} must be a column name for a "
                                    f"single-dimension partitions definition, got {dict(partition_expr)}")
        return PartitionSlice(tuple(keys), ((_dimension(pdef, partition_expr, keys),),))
    dims = list(pdef.partitions_defs)
    names = [d.name for d in dims]
    if not isinstance(partition_expr, Mapping) or set(partition_expr) != set(names):
        raise InvalidInputError(f"{where}: {PARTITION_EXPR_KEY!r} of a multi-partitioned asset must map each "
                                f"dimension {names} to a column, got {partition_expr!r}")
    parsed = [k if isinstance(k, MultiPartitionKey) else pdef.get_partition_key_from_str(k) for k in keys]
    per_dim = [tuple(dict.fromkeys(k.keys_by_dimension[n] for k in parsed)) for n in names]
    full = 1
    for values in per_dim:
        full *= len(values)
    if full == len(set(keys)):  # a cross product: one AND of per-dimension filters
        term = tuple(_dimension(d.partitions_def, partition_expr[d.name], v) for d, v in zip(dims, per_dim,
                                                                                            strict=True))
        return PartitionSlice(tuple(keys), (term,))
    terms = tuple(
        tuple(_dimension(d.partitions_def, partition_expr[d.name], [k.keys_by_dimension[d.name]]) for d in dims)
        for k in parsed
    )
    return PartitionSlice(tuple(keys), terms)
