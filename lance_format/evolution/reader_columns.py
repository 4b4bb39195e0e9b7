"""``add_columns`` from a reader of new column values (pylance's ``add_columns(reader, reader_schema=)``).

The reader's rows are the new columns' values for the dataset's live rows, fragment after fragment
in order; each fragment gets one new data file with a row for every physical row (deleted rows
hold nulls) and the columns are committed as one ``Merge``, as pylance 14.0.2 does. A reader
with fewer or more rows than the dataset has live rows is refused before anything is committed,
with pylance's messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.evolution.columns import _check_new_names, _commit, next_field_id
from lance_format.schema import LanceSchema
from lance_format.table.discard import discard_keys
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import data_file_key
from lance_format.table.transaction import LanceOperation
from lance_format.table.writing import write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

__all__ = ["add_columns_from_reader", "is_reader_like"]


def is_reader_like(value: Any) -> bool:
    """Whether ``add_columns`` should read new values from ``value`` (a reader, table, batch or iterator)."""
    if isinstance(value, (pa.RecordBatchReader, pa.Table, pa.RecordBatch)):
        return True
    # schemas and field lists are iterable too: only streams and iterators of batches count
    return hasattr(value, "__arrow_c_stream__") or isinstance(value, Iterator)


def _reader(value: Any, schema: pa.Schema | None) -> pa.RecordBatchReader:
    if isinstance(value, pa.RecordBatchReader):
        return value
    if isinstance(value, (pa.Table, pa.RecordBatch)):
        return pa.RecordBatchReader.from_batches(value.schema, value.to_batches() if isinstance(value, pa.Table)
                                                 else [value])
    if hasattr(value, "__arrow_c_stream__") and schema is None:
        return pa.RecordBatchReader.from_stream(value)
    if schema is None:
        raise InvalidInputError("add_columns(): reader_schema= is needed for an iterator of record batches")
    return pa.RecordBatchReader.from_batches(schema, iter(value))


class _Rows:
    """Takes rows from a reader in the counts the fragments need."""

    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self._reader = reader
        self._pending: list[pa.RecordBatch] = []
        self._have = 0

    def take(self, n: int) -> pa.Table:
        while self._have < n:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                raise InvalidInputError("Stream ended before producing values for all rows in dataset") from None
            self._pending.append(batch)
            self._have += batch.num_rows
        table = pa.Table.from_batches(self._pending, schema=self._reader.schema)
        self._pending = table.slice(n).to_batches()
        self._have -= n
        return table.slice(0, n)

    def check_drained(self) -> None:
        while self._have == 0:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return
            self._have += batch.num_rows
        raise InvalidInputError("Stream produced more values than expected for dataset")


def add_columns_from_reader(ds: LanceDataset, value: Any, reader_schema: pa.Schema | None = None, *,
                            properties: Mapping[str, str] | None = None) -> None:
    """Add the reader's columns to ``ds`` (one ``Merge`` commit; the handle moves to it).

    Raises:
        InvalidInputError: the reader has fewer or more rows than ``ds`` has live rows, or an
            iterator comes without ``reader_schema``.
        SchemaError: a new column name is taken.
    """
    reader = _reader(value, reader_schema)
    out_schema = reader.schema
    _check_new_names(ds, out_schema.names)
    lance_new = LanceSchema.from_arrow(out_schema, start_id=next_field_id(ds))
    arrow_new = lance_new.to_arrow()
    rows = _Rows(reader)
    keys: list[str] = []
    frags: list[FragmentMetadata] = []
    try:
        for frag in ds.manifest.fragments:
            live = rows.take(frag.num_rows)
            deleted = ds._ctx.deleted_offsets(frag)
            if deleted.size:  # one row per physical row: deleted ones get nulls
                where = np.full(frag.physical_rows, -1, dtype=np.int64)
                keep = np.ones(frag.physical_rows, dtype=bool)
                keep[deleted.astype(np.int64)] = False
                where[keep] = np.arange(frag.num_rows)
                live = live.take(pa.array(where, mask=~keep))
            written = write_fragment_files(ds._store, arrow_new, iter(live.cast(arrow_new).to_batches()), lance_new,
                                           max_rows_per_file=2**62, data_storage_version=ds.data_storage_version)
            files = tuple(df for w in written for df in w.files)
            keys.extend(data_file_key(df.path) for df in files)
            frags.append(dataclasses.replace(frag, files=frag.files + files))
        rows.check_drained()
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    schema = LanceSchema(ds.lance_schema.fields + lance_new.fields, ds.lance_schema.metadata)
    _commit(ds, LanceOperation.Merge(frags, schema, preserves_nullability=True), keys, properties)
