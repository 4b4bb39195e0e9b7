"""Reading a dataset for a downstream step: which version (latest, pinned number, or tag) and columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import lance_format

from .config import LanceSettings

VERSION_KEY = "version"
TAG_KEY = "tag"
COLUMNS_KEY = "columns"
FILTER_KEY = "filter"


def _raw(value: Any) -> Any:
    # Metadata may arrive normalized into Dagster MetadataValue objects.
    return getattr(value, "value", value)


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
            ValueError: on a malformed value, or when both ``version`` and ``tag`` are given.
        """
        meta = dict(metadata or {})
        version = _raw(meta.get(VERSION_KEY))
        tag = _raw(meta.get(TAG_KEY))
        columns = _raw(meta.get(COLUMNS_KEY))
        row_filter = _raw(meta.get(FILTER_KEY))
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
            raise ValueError(f"{where}: metadata 'version' must be an int, got {version!r}")
        if tag is not None and not isinstance(tag, str):
            raise ValueError(f"{where}: metadata 'tag' must be a str, got {tag!r}")
        if version is not None and tag is not None:
            raise ValueError(f"{where}: give metadata 'version' or 'tag', not both")
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Sequence):
                raise ValueError(f"{where}: metadata 'columns' must be a list of names, got {columns!r}")
            columns = tuple(str(c) for c in columns)
        if row_filter is not None and not isinstance(row_filter, str):
            raise ValueError(f"{where}: metadata 'filter' must be a SQL string, got {row_filter!r}")
        return cls(version=version, tag=tag, columns=columns, filter=row_filter)

    @property
    def pin(self) -> int | str | None:
        """The ``version=`` argument for ``lance_format.dataset``."""
        return self.version if self.version is not None else self.tag


def open_dataset(settings: LanceSettings, uri: str, version: int | str | None = None) -> Any:
    """Open a dataset through ``lance_format`` with the configured storage options."""
    return lance_format.dataset(uri, version=version, storage_options=settings.options)


class ArrowSource:
    """A scan of one dataset version that frame handlers turn into their own objects.

    Handlers call :meth:`to_table` (materialize) or :meth:`to_reader` (stream batches); nothing is
    read before one of them is called.
    """

    def __init__(self, ds: Any, spec: ReadSpec) -> None:
        self.dataset = ds
        self.spec = spec

    @property
    def version(self) -> int:
        """The dataset version this scan reads."""
        return int(self.dataset.version)

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of what the scan returns (after column selection)."""
        schema: pa.Schema = self.dataset.schema
        if self.spec.columns is None:
            return schema
        return pa.schema([schema.field(c) for c in self.spec.columns])

    def _scan_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.spec.columns is not None:
            kwargs["columns"] = list(self.spec.columns)
        if self.spec.filter is not None:
            kwargs["filter"] = self.spec.filter
        return kwargs

    def to_table(self) -> pa.Table:
        """Read the selected rows and columns into one Arrow table."""
        table: pa.Table = self.dataset.to_table(**self._scan_kwargs())
        return table

    def to_reader(self) -> pa.RecordBatchReader:
        """Stream the selected rows and columns as a ``RecordBatchReader``."""
        batches = self.dataset.to_batches(**self._scan_kwargs())
        return pa.RecordBatchReader.from_batches(self.schema, batches)
