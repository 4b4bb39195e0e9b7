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
from lance_format.table.write_defaults import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
)

WriteMode = Literal["create", "append", "overwrite"]
DataStorageVersion = Literal["stable", "legacy", "0.1", "2.0", "2.1", "2.2"]


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


#: Arrow bytes a column of pylance's 2.x file writer buffers before it encodes and writes a page
#: (``cache_bytes_per_column`` in upstream ``rust/lance-encoding/src/encoder.rs``): until then
#: nothing of that column counts towards the file's written size.
PAGE_CACHE_BYTES = 8 * 1024 * 1024


class WrittenBytes:
    """How many bytes pylance's file writer would have written so far (its ``tell()``).

    ``max_bytes_per_file`` counts written bytes, as upstream ``rust/lance/src/dataset/write.rs``
    does: after each write it compares the file writer's position with the limit. A 2.x writer
    buffers each column until the Arrow memory it holds exceeds :data:`PAGE_CACHE_BYTES` (per
    ``rust/lance-encoding/src/utils/accumulation.rs``), then encodes and writes it, so a small
    file has written nothing until it is finished. Our encoders cut pages by their own rule, so
    the count follows pylance's rule rather than our file position. A flushed column counts its
    rows' Arrow size (what a 2.0 page stores; 2.1+ compression makes pylance's pages smaller,
    so with compressible data a file may end one flush earlier than pylance's). Legacy (v1)
    files are written batch by batch; their writer's position is exact (see ``_FileSink``).
    """

    def __init__(self, *, cache_bytes: int = PAGE_CACHE_BYTES, imported: bool = False) -> None:
        self.written = 0
        self._imported = imported
        self._cache = cache_bytes
        self._weight: list[int] = []  # Arrow memory held per column, as upstream weighs it
        self._held: list[int] = []  # bytes of the rows held per column
        self._bits: list[int | None] = []  # bits per value of fixed-width columns

    def add(self, batch: pa.RecordBatch, whole: pa.RecordBatch | None = None) -> None:
        """Account for one batch handed to the file writer.

        Args:
            batch: The batch written.
            whole: The input batch ``batch`` was cut from at a file boundary, if it was: such a
                piece shares its buffers with the whole batch, and Arrow counts a column's
                memory by its buffers, so upstream's accumulation weighs it as the whole batch.
        """
        pieces = list(_leaves(batch.columns))
        wholes = pieces if whole is None else list(_leaves(whole.columns))
        if len(self._weight) < len(pieces):
            self._weight = [0] * len(pieces)
            self._held = [0] * len(pieces)
            self._bits = [_bit_width(a.type) for a in pieces]
        for i, (arr, full) in enumerate(zip(pieces, wholes, strict=True)):
            bits = self._bits[i]
            weighed = _size(full, bits, self._imported)
            own = weighed if full is arr and not (self._imported and arr.offset) else _size(arr, bits, False)
            weight = self._weight[i] + weighed
            held = self._held[i] + own  # the rows' own bytes
            if weight > self._cache:  # the column's buffer is encoded and written out
                self.written += held
                weight = held = 0
            self._weight[i], self._held[i] = weight, held


def _bit_width(typ: pa.DataType) -> int | None:
    """Bits per value of a fixed-width type (``None`` for variable-width and nested ones)."""
    try:
        return int(typ.bit_width)
    except ValueError:
        return None


def _size(arr: pa.Array, bits: int | None, imported: bool) -> int:
    """``arr.nbytes`` (computed from the width where it is fixed: ``nbytes`` costs ~15 us a call),
    or with ``imported``, :func:`_imported_size`."""
    if bits is None:
        return _imported_size(arr) if imported and arr.offset else int(arr.nbytes)
    n = len(arr) + (arr.offset if imported else 0)
    return (n * bits + 7) // 8 + ((n + 7) // 8 if arr.null_count else 0)


def _row_groups(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream into batches of exactly ``rows`` rows (the last may be shorter)."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows == rows and not held:
            yield batch
            continue
        held.append(batch)
        count += batch.num_rows
        if count < rows:
            continue
        merged = pa.concat_batches(held)
        cut = count - count % rows
        for start in range(0, cut, rows):
            yield merged.slice(start, rows)
        held = [merged.slice(cut)] if cut < count else []
        count -= cut
    if count:
        yield pa.concat_batches(held)


def _imported_size(arr: pa.Array) -> int:
    """The memory size upstream sees for ``arr`` handed over through the Arrow C interface.

    A sliced array crosses as its buffers plus an offset; the importer sizes each buffer from
    its start to the slice's end, so the rows before the slice count too.
    """
    if arr.offset == 0 or arr.type.num_fields:
        return int(arr.nbytes)
    try:
        full = pa.Array.from_buffers(arr.type, arr.offset + len(arr), arr.buffers(), offset=0)
    except (pa.ArrowInvalid, NotImplementedError, TypeError):
        return int(arr.nbytes)
    return int(full.nbytes)


def _leaves(columns: list[pa.Array]) -> Iterator[pa.Array]:
    """The arrays pylance buffers one by one: struct children separately, any other column whole."""
    for arr in columns:
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        if pa.types.is_struct(arr.type) and arr.type.num_fields:
            yield from _leaves([arr.field(k) for k in range(arr.type.num_fields)])
        else:
            yield arr


class _FileSink:
    """Writes one data file and returns its fragment when closed."""

    def __init__(self, data_store: ObjectStore, lance_schema: LanceSchema, arrow_schema: pa.Schema, version: str,
                 max_page_bytes: int | None, cache_bytes: int = PAGE_CACHE_BYTES, imported: bool = False):

        self.store = data_store
        self.name = new_data_file_name()
        self.rows = 0
        self.legacy = normalize_storage_version(version) == "0.1"
        self.bytes = WrittenBytes(cache_bytes=cache_bytes, imported=imported)
        self.writer = LanceFileWriter(None, arrow_schema, version=version, store=data_store, key=self.name,
                                      lance_schema=lance_schema, max_page_bytes=max_page_bytes)

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        if self.legacy:  # a v1 writer writes each row group as it comes: its position is exact
            self.bytes.written = int(getattr(self.writer._encoder, "pos", 0))

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
    progress: Any = None,
    data_cache_bytes: int | None = None,
) -> list[FragmentMetadata]:
    """Write batches into data files under ``data/``; one fragment per file, ids unassigned (0).

    ``lance_schema`` carries the dataset field ids for the columns of ``schema`` (same
    order). A file ends at ``max_rows_per_file`` rows, or once what its writer has written
    reaches ``max_bytes_per_file`` (checked after each input batch, or each row group of a
    legacy file, as pylance checks; see :class:`WrittenBytes`). ``progress`` (pylance's
    ``FragmentWriteProgress``) hears ``begin`` as each file starts and ``complete`` as each
    file but the last ends, as pylance calls it. On error every file written so far is
    deleted, so nothing dangles. ``data_cache_bytes`` is pylance's per-file page cache shared by
    the top-level columns (it only changes where files end here: our pages are cut by
    ``max_page_bytes``).
    """
    return write_input_files(store, schema, batches, lance_schema, max_rows_per_file=max_rows_per_file,
                             max_rows_per_group=max_rows_per_group, max_bytes_per_file=max_bytes_per_file,
                             data_storage_version=data_storage_version, max_page_bytes=max_page_bytes,
                             progress=progress, data_cache_bytes=data_cache_bytes, from_python=False)


def write_input_files(store: ObjectStore, schema: pa.Schema, batches: Iterable[pa.RecordBatch],
                      lance_schema: LanceSchema, *, max_rows_per_file: int, max_rows_per_group: int,
                      max_bytes_per_file: int, data_storage_version: str, max_page_bytes: int | None,
                      progress: Any, data_cache_bytes: int | None, from_python: bool) -> list[FragmentMetadata]:
    """:func:`write_fragment_files`; ``from_python``: the batches are a user's Python input, which
    pylance receives through the Arrow C interface (sliced input then weighs more in its page
    caches; see ``_imported_size``)."""
    if max_rows_per_file <= 0 or max_rows_per_group <= 0 or max_bytes_per_file <= 0:
        raise InvalidInputError("max_rows_per_file, max_rows_per_group and max_bytes_per_file must be positive")
    if data_cache_bytes is not None and (not isinstance(data_cache_bytes, int) or data_cache_bytes <= 0):
        raise InvalidInputError(f"data_cache_bytes must be a positive integer, got {data_cache_bytes!r}")
    cache = PAGE_CACHE_BYTES if data_cache_bytes is None else max(1, data_cache_bytes // max(1, len(schema)))
    data_store = store.child(DATA_DIR)
    required = [i for i, f in enumerate(schema) if not f.nullable]
    frags: list[FragmentMetadata] = []
    sink: _FileSink | None = None
    # Row groups only shape legacy and 2.0 files.  The 2.1+ encoder cuts its own pages, so it gets
    # whole input batches: slicing them into 1024-row groups only to concatenate the slices again
    # before each page costs a copy of every column and per-batch overhead.
    group = max_rows_per_group
    legacy = normalize_storage_version(data_storage_version) == "0.1"
    if normalize_storage_version(data_storage_version) not in ("0.1", "2.0"):
        group = max_rows_per_file
    if legacy:  # pylance's v1 writer takes row groups of exactly max_rows_per_group rows
        batches = _row_groups(batches, max_rows_per_group)
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
                    sink = _FileSink(data_store, lance_schema, schema, data_storage_version, max_page_bytes, cache,
                                     from_python)
                    if progress is not None:
                        progress.begin(FragmentMetadata(0, (), 0))
                # The batch is cut only where a file must end (pylance's stream breaks at
                # max_rows_per_file); row groups, when used, are written piece by piece.
                end = pos + min(batch.num_rows - pos, max_rows_per_file - sink.rows)
                if not sink.legacy:
                    sink.bytes.add(batch, None if end - pos == batch.num_rows else batch)
                while pos < end:
                    take = min(end - pos, group)
                    sink.write(batch.slice(pos, take))
                    pos += take
                    if sink.legacy and sink.bytes.written >= max_bytes_per_file:
                        break  # a legacy writer writes each row group: it checks after each
                if sink.rows >= max_rows_per_file or sink.bytes.written >= max_bytes_per_file:
                    frags.append(sink.close())
                    sink = None
                    if progress is not None:
                        progress.complete(frags[-1])
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
    "PAGE_CACHE_BYTES",
    "WriteMode",
    "WrittenBytes",
    "normalize_storage_version",
    "prepare_write",
    "prepare_write_with_scheme",
    "to_batch_stream",
    "write_fragment_files",
    "write_input_files",
]
