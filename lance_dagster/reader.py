"""Reading a dataset for a downstream step: which version (latest, pinned number, or tag), columns, rows."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lance_format
from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, InvalidInputError
from lance_format.scanner import referenced_columns
from lance_format.table.scan import filter_expression

from .config import LanceSettings, raw_value

VERSION_KEY = "version"
#: Dagster's standard definition metadata key for an asset's columns (``TableSchema``).
COLUMN_SCHEMA_KEY = "dagster/column_schema"
TAG_KEY = "tag"
COLUMNS_KEY = "columns"
FILTER_KEY = "filter"


@dataclass(frozen=True)
class ReadSpec:
    """What to read: a pinned version or tag (default: latest), a column subset and a row filter."""

    version: int | None = None
    tag: str | None = None
    columns: tuple[str, ...] | None = None
    filter: str | None = None

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None, *, where: str) -> ReadSpec:
        """Parse ``AssetIn(metadata=...)``: ``version`` (int), ``tag`` (str), ``columns``, ``filter``.

        Raises:
            InvalidInputError: on a malformed value, or when both ``version`` and ``tag`` are given.
        """
        meta = dict(metadata or {})
        version = raw_value(meta.get(VERSION_KEY))
        tag = raw_value(meta.get(TAG_KEY))
        columns = raw_value(meta.get(COLUMNS_KEY))
        row_filter = raw_value(meta.get(FILTER_KEY))
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise InvalidInputError(f"{where}: metadata 'version' must be an int, got {version!r}")
        if tag is not None and not isinstance(tag, str):
            raise InvalidInputError(f"{where}: metadata 'tag' must be a str, got {tag!r}")
        if version is not None and tag is not None:
            raise InvalidInputError(f"{where}: give metadata 'version' or 'tag', not both")
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Sequence):
                raise InvalidInputError(f"{where}: metadata 'columns' must be a list of names, got {columns!r}")
            columns = tuple(str(c) for c in columns)
        if row_filter is not None and not isinstance(row_filter, str):
            raise InvalidInputError(f"{where}: metadata 'filter' must be a SQL string, got {row_filter!r}")
        return cls(version=version, tag=tag, columns=columns, filter=row_filter)

    @property
    def pin(self) -> int | str | None:
        """The ``version=`` argument for ``lance_format.dataset``."""
        return self.version if self.version is not None else self.tag


_TIMESTAMP = re.compile(r"^timestamp\[(s|ms|us|ns)(?:, tz=(.+))?\]$")
_DECIMAL = re.compile(r"^decimal(32|64|128|256)\((\d+), (-?\d+)\)$")
_LIST = re.compile(r"^(list|large_list)<item: (.+)>$")
_FIXED_LIST = re.compile(r"^fixed_size_list<item: (.+)>\[(\d+)\]$")
_DECIMALS = {"32": pa.decimal32, "64": pa.decimal64, "128": pa.decimal128, "256": pa.decimal256}


def arrow_type(text: str) -> pa.DataType | None:
    """The Arrow type a type name denotes (``str(pa_type)`` of primitives, timestamps, decimals and
    lists), ``None`` when the name is not one of those."""
    text = text.strip()
    try:
        return pa.type_for_alias(text)
    except ValueError:
        pass
    if m := _TIMESTAMP.match(text):
        return pa.timestamp(m.group(1), tz=m.group(2))
    if m := _DECIMAL.match(text):
        return _DECIMALS[m.group(1)](int(m.group(2)), int(m.group(3)))
    if (m := _LIST.match(text)) and (item := arrow_type(m.group(2))) is not None:
        return pa.list_(item) if m.group(1) == "list" else pa.large_list(item)
    if (m := _FIXED_LIST.match(text)) and (item := arrow_type(m.group(1))) is not None:
        return pa.list_(item, int(m.group(2)))
    return None


def declared_schema(metadata: Mapping[str, Any] | None, *, where: str) -> pa.Schema | None:
    """The Arrow schema an asset declares in its ``dagster/column_schema`` definition metadata.

    Column types are Arrow type names, as the IO manager reports them (``int64``, ``string``,
    ``date32[day]``, ``timestamp[us, tz=UTC]``, ``list<item: float>``). ``None`` when the asset
    declares no columns.

    Raises:
        InvalidInputError: a column's type is not an Arrow type name (naming it).
    """
    table_schema = raw_value((metadata or {}).get(COLUMN_SCHEMA_KEY))
    columns = getattr(table_schema, "columns", None)
    if not columns:
        return None
    fields = []
    for column in columns:
        typ = arrow_type(str(column.type))
        if typ is None:
            raise InvalidInputError(f"{where}: declared column {column.name!r} has type {column.type!r}, which is "
                                    "not an Arrow type name (e.g. int64, string, date32[day], "
                                    "timestamp[us, tz=UTC], list<item: float>)")
        nullable = getattr(getattr(column, "constraints", None), "nullable", True)
        fields.append(pa.field(column.name, typ, nullable=bool(nullable)))
    return pa.schema(fields)


def open_dataset(settings: LanceSettings, uri: str, version: int | str | None = None) -> LanceDataset:
    """Open a dataset through ``lance_format`` with the configured storage options."""
    return lance_format.dataset(uri, version=version, storage_options=settings.options)


class ArrowSource:
    """A scan of one dataset version that frame handlers turn into their own objects.

    Handlers call :meth:`to_table` (materialize) or :meth:`to_reader` (stream batches), or take
    :attr:`dataset` itself (pinned to :attr:`version`); nothing is read before one of them is
    called. The row filter combines ``spec.filter`` with the partition filter of a partitioned
    load, and is pushed down to the Lance scan.

    :meth:`missing` builds the source of a dataset that does not exist yet (the first partition
    of a self-dependent asset reads its own previous partition): no rows, a declared schema.
    """

    def __init__(self, ds: LanceDataset, spec: ReadSpec, partition_filter: pc.Expression | None = None, *,
                 partition_sql: str | None = None, storage_options: Mapping[str, str] | None = None) -> None:
        self._dataset: LanceDataset | None = ds
        self._schema: pa.Schema = ds.schema
        self.uri: str = ds.uri
        self.spec = spec
        self.partition_filter = partition_filter
        self.partition_sql = partition_sql
        self.storage_options = dict(storage_options or {})

    @classmethod
    def missing(cls, uri: str, schema: pa.Schema, spec: ReadSpec) -> ArrowSource:
        """The empty source of a dataset not written yet, with ``schema`` (e.g. the declared one)."""
        source = cls.__new__(cls)
        source._dataset, source._schema, source.uri, source.spec = None, schema, uri, spec
        source.partition_filter, source.partition_sql, source.storage_options = None, None, {}
        return source

    @property
    def exists(self) -> bool:
        """Whether the dataset exists (``False`` for :meth:`missing` sources)."""
        return self._dataset is not None

    @property
    def dataset(self) -> LanceDataset:
        """The dataset at the version read.

        Raises:
            DatasetNotFoundError: the dataset does not exist yet.
        """
        if self._dataset is None:
            raise DatasetNotFoundError(f"no Lance dataset at {self.uri} yet (an empty input of its declared "
                                       "schema can be loaded as a table or frame, not as a dataset)")
        return self._dataset

    @property
    def version(self) -> int:
        """The dataset version this scan reads (0 when the dataset does not exist)."""
        return int(self._dataset.version) if self._dataset is not None else 0

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of what the scan returns (after column selection)."""
        if self.spec.columns is None:
            return self._schema
        return pa.schema([self._schema.field(c) for c in self.spec.columns])

    @property
    def row_filter(self) -> pc.Expression | None:
        """The pushed-down row filter (``spec.filter`` AND the partition filter), ``None`` for all rows."""
        user = filter_expression(self.spec.filter, self._schema) if self.spec.filter else None
        if user is None:
            return self.partition_filter
        return user if self.partition_filter is None else user & self.partition_filter

    @property
    def row_filter_sql(self) -> str | None:
        """The row filter as Lance SQL text (for engines that take a predicate string)."""
        parts = [p for p in (self.spec.filter, self.partition_sql) if p]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else " AND ".join(f"({p})" for p in parts)

    @property
    def filter_columns(self) -> tuple[str, ...]:
        """Columns the row filter reads."""
        row_filter = self.row_filter
        if row_filter is None:
            return ()
        return tuple(referenced_columns(row_filter, self._schema.names))

    def scan_kwargs(self, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """Keyword arguments for ``LanceDataset.to_table`` / ``to_batches``.

        Args:
            columns: a further projection inside the selected columns (e.g. a lazy frame's).
        """
        kwargs: dict[str, Any] = {}
        cols = columns if columns is not None else self.spec.columns
        if cols is not None:
            kwargs["columns"] = list(cols)
        row_filter = self.row_filter
        if row_filter is not None:
            kwargs["filter"] = row_filter
        return kwargs

    def to_table(self) -> pa.Table:
        """Read the selected rows and columns into one Arrow table."""
        if self._dataset is None:
            return self.schema.empty_table()
        table: pa.Table = self._dataset.to_table(**self.scan_kwargs())
        return table

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the selected rows (of ``columns`` when given) as record batches."""
        if self._dataset is None:
            return iter(())
        return self._dataset.to_batches(**self.scan_kwargs(columns))

    def to_reader(self) -> pa.RecordBatchReader:
        """Stream the selected rows and columns as a ``RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self.schema, self.batches())
