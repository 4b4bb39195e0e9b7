"""The write pipeline: Arrow input to data files and fragments, and resolving a write's target.

Input is consumed as a stream of record batches; at most one data file is open at a
time and each batch is handed to the file writer as it arrives, so memory is bounded
by the writer's page buffers rather than by the input size. ``lance_format.write``
(``write_dataset``) and ``lance_format.fragment`` (``write_fragments``) are thin wrappers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import pyarrow as pa

from lance_format.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    SchemaError,
    UnsupportedVersionError,
)
from lance_format.file import LanceFileWriter
from lance_format.schema import LanceSchema
from lance_format.storage import ObjectStore
from lance_format.table.apply import DEFAULT_DATA_STORAGE_VERSION
from lance_format.table.discard import discard_fragment_files
from lance_format.table.manifest import Manifest
from lance_format.table.manifest import arrow_schema as table_arrow_schema
from lance_format.table.models import DataFile, FragmentMetadata
from lance_format.table.naming import DATA_DIR, NamingScheme, new_data_file_name
from lance_format.table.versions import find_latest, read_manifest

WriteMode = Literal["create", "append", "overwrite"]
DataStorageVersion = Literal["stable", "legacy", "0.1", "2.0", "2.1", "2.2"]

DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_ROWS_PER_GROUP = 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024 * 1024 * 1024

_VERSION_ALIASES = {"stable": "2.2", "0.3": "2.0", "2.0": "2.0", "2.1": "2.1", "2.2": "2.2",
                    "legacy": "0.1", "0.1": "0.1"}


def normalize_storage_version(version: str | None, default: str = DEFAULT_DATA_STORAGE_VERSION) -> str:
    """Map a ``data_storage_version`` argument to ``"0.1"`` (legacy), ``"2.0"``, ``"2.1"`` or ``"2.2"``.

    Raises:
        UnsupportedVersionError: for unstable (2.3/next) or unknown versions.
    """
    if version is None:
        return default
    norm = _VERSION_ALIASES.get(str(version).lower())
    if norm is None:
        raise UnsupportedVersionError(
            f"data_storage_version {version!r} is not supported (use 'legacy', '2.0', '2.1', '2.2' or 'stable')")
    return norm


def to_batch_stream(data: Any, schema: pa.Schema | None = None) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Normalize writer input to ``(schema, batch iterator)``.

    Accepts a pyarrow Table / RecordBatch / RecordBatchReader, a pandas DataFrame,
    a pyarrow dataset or scanner, a LanceDataset, or an iterable of record batches.

    Raises:
        InvalidInputError: for anything else, or an empty iterable without a schema.
    """
    if isinstance(data, pa.Table):
        if schema is not None and not data.schema.equals(schema):
            data = _cast(data, schema)
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return to_batch_stream(pa.Table.from_batches([data]), schema)
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, _cast_stream(iter(data), schema)
    mod = type(data).__module__
    if mod.startswith("pandas"):
        return to_batch_stream(pa.Table.from_pandas(data, schema=schema, preserve_index=False), None)
    if hasattr(data, "to_reader") and not hasattr(data, "schema"):  # pyarrow / lance scanners
        return to_batch_stream(data.to_reader(), schema)
    if hasattr(data, "to_batches") and hasattr(data, "schema"):  # pyarrow / lance datasets
        return to_batch_stream(pa.RecordBatchReader.from_batches(data.schema, data.to_batches()), schema)
    if isinstance(data, Iterable):
        it = iter(data)
        if schema is None:
            first = next(it, None)
            if first is None:
                raise InvalidInputError("cannot infer a schema from an empty iterable; pass schema=")
            if not isinstance(first, pa.RecordBatch):
                raise InvalidInputError(f"iterable input must yield pyarrow.RecordBatch, got {type(first).__name__}")
            return first.schema, _chain(first, it)
        return schema, _cast_stream(it, schema)
    raise InvalidInputError(f"unsupported input type {type(data).__name__} for write_dataset")


def _cast(data: Any, schema: pa.Schema) -> Any:
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as exc:
        raise SchemaError(f"cannot convert input with schema {data.schema} to {schema}: {exc}") from exc


def _chain(first: pa.RecordBatch, rest: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    yield first
    for b in rest:
        if not isinstance(b, pa.RecordBatch):
            raise InvalidInputError(f"iterable input must yield pyarrow.RecordBatch, got {type(b).__name__}")
        yield b


def _cast_stream(it: Iterator[Any], schema: pa.Schema | None) -> Iterator[pa.RecordBatch]:
    for b in it:
        if isinstance(b, pa.Table):
            yield from _cast_stream(iter(b.to_batches()), schema)
            continue
        if not isinstance(b, pa.RecordBatch):
            raise InvalidInputError(f"input must yield pyarrow.RecordBatch, got {type(b).__name__}")
        yield _cast(b, schema) if schema is not None and not b.schema.equals(schema) else b


class _FileSink:
    """Writes one data file and returns its fragment when closed."""

    def __init__(self, data_store: ObjectStore, lance_schema: LanceSchema, arrow_schema: pa.Schema, version: str,
                 max_page_bytes: int | None):

        self.store = data_store
        self.name = new_data_file_name()
        self.rows = 0
        self.bytes = 0
        self.writer = LanceFileWriter(None, arrow_schema, version=version, store=data_store, key=self.name,
                                      lance_schema=lance_schema, max_page_bytes=max_page_bytes)

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        self.bytes += batch.nbytes

    def close(self) -> FragmentMetadata:
        self.writer.close()
        w = self.writer
        major, minor = w.file_version
        df = DataFile(self.name, tuple(w.field_ids), tuple(w.column_indices), major, minor, int(w.file_size))
        return FragmentMetadata(0, (df,), int(w.num_rows))


def write_fragment_files(
    store: ObjectStore,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
    lance_schema: LanceSchema,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_storage_version: str = DEFAULT_DATA_STORAGE_VERSION,
    max_page_bytes: int | None = None,
) -> list[FragmentMetadata]:
    """Write batches into data files under ``data/``; one fragment per file, ids unassigned (0).

    ``lance_schema`` carries the dataset field ids for the columns of ``schema`` (same
    order). On error every file written so far is deleted, so nothing dangles.
    """
    if max_rows_per_file <= 0 or max_rows_per_group <= 0 or max_bytes_per_file <= 0:
        raise InvalidInputError("max_rows_per_file, max_rows_per_group and max_bytes_per_file must be positive")
    data_store = store.child(DATA_DIR)
    required = [i for i, f in enumerate(schema) if not f.nullable]
    frags: list[FragmentMetadata] = []
    sink: _FileSink | None = None
    # Row groups only shape legacy and 2.0 files.  The 2.1+ encoder cuts its own pages, so it gets
    # whole input batches: slicing them into 1024-row groups only to concatenate the slices again
    # before each page costs a copy of every column and per-batch overhead.
    group = max_rows_per_group
    if normalize_storage_version(data_storage_version) not in ("0.1", "2.0"):
        group = max_rows_per_file
    try:
        for batch in batches:
            if batch.schema.names != schema.names:
                try:
                    batch = batch.select(schema.names)
                except KeyError as exc:
                    raise SchemaError(f"input batch lacks column(s) of {schema.names}: {exc}") from exc
            if not batch.schema.equals(schema):
                batch = _cast(batch, schema)
            for i in required:
                if batch.column(i).null_count:
                    raise SchemaError(f"column {schema.names[i]!r} is not nullable but the data has nulls")
            pos = 0
            while pos < batch.num_rows:
                if sink is None:
                    sink = _FileSink(data_store, lance_schema, schema, data_storage_version, max_page_bytes)
                take = min(batch.num_rows - pos, max_rows_per_file - sink.rows, group)
                sink.write(batch.slice(pos, take))
                pos += take
                if sink.rows >= max_rows_per_file or sink.bytes >= max_bytes_per_file:
                    frags.append(sink.close())
                    sink = None
        if sink is not None and sink.rows:
            frags.append(sink.close())
            sink = None
    except BaseException:
        if sink is not None:
            with contextlib.suppress(Exception):  # drop the half-written file
                sink.writer.abort()
        discard_fragment_files(data_store, frags, in_data_dir=False)  # best effort: the error wins
        raise
    return frags


def prepare_write(
    data: Any,
    store: ObjectStore,
    *,
    schema: pa.Schema | None,
    mode: WriteMode,
    data_storage_version: str | None,
) -> tuple[pa.Schema, Iterator[pa.RecordBatch], LanceSchema, Manifest | None, int, str]:
    """Resolve input, target schema, field ids and read version for a write.

    Returns:
        ``(arrow schema of the data, batches, lance schema of the data columns,
        manifest appended to (or None), read version (0 = new), storage version)``.
    """
    return prepare_write_with_scheme(data, store, schema=schema, mode=mode, data_storage_version=data_storage_version)[:6]


def prepare_write_with_scheme(
    data: Any,
    store: ObjectStore,
    *,
    schema: pa.Schema | None,
    mode: WriteMode,
    data_storage_version: str | None,
) -> tuple[pa.Schema, Iterator[pa.RecordBatch], LanceSchema, Manifest | None, int, str, NamingScheme | None]:
    """As :func:`prepare_write`, plus the naming scheme of the versions seen (``None`` = no dataset yet)."""
    arrow_schema, batches = to_batch_stream(data, schema)
    found = find_latest(store)
    latest = found[0] if found is not None else None
    if mode == "create" and latest is not None:
        raise DatasetAlreadyExistsError(f"{store.uri('')}: dataset already exists (version {latest}); "
                                        "use mode='append' or mode='overwrite'")
    if mode == "append" and latest is not None:
        assert found is not None
        base = read_manifest(store, found[1], for_write=True)
        table_arrow = table_arrow_schema(base.schema)
        if arrow_schema.equals(table_arrow):
            # The common append: same columns, order and types; nothing to check or project.
            data_schema, target = base.schema, table_arrow
        else:
            base.schema.check_compatible(arrow_schema)
            # Reorder columns to table order; the file gets the table's field ids.
            order = [n for n in table_arrow.names if n in arrow_schema.names]
            data_schema = base.schema.project(order)
            target = data_schema.to_arrow()
        version = normalize_storage_version(data_storage_version, base.data_storage_version)
        return target, batches, data_schema, base, latest, version, found[2]
    if mode not in ("create", "append", "overwrite"):
        raise InvalidInputError(f"mode must be 'create', 'append' or 'overwrite', got {mode!r}")
    lance_schema = LanceSchema.from_arrow(arrow_schema)
    default = DEFAULT_DATA_STORAGE_VERSION
    if found is not None and data_storage_version is None:
        # An overwrite keeps the table's storage version unless asked otherwise (as pylance).
        default = read_manifest(store, found[1]).data_storage_version
    version = normalize_storage_version(data_storage_version, default)
    scheme = found[2] if found is not None else None
    return lance_schema.to_arrow(), batches, lance_schema, None, latest or 0, version, scheme


__all__ = [
    "DEFAULT_MAX_BYTES_PER_FILE",
    "DEFAULT_MAX_ROWS_PER_FILE",
    "DEFAULT_MAX_ROWS_PER_GROUP",
    "DataStorageVersion",
    "WriteMode",
    "normalize_storage_version",
    "prepare_write",
    "prepare_write_with_scheme",
    "to_batch_stream",
    "write_fragment_files",
]
