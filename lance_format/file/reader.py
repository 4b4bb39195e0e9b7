"""``LanceFileReader``: read a single Lance 2.x data file (pylance-compatible API)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from google.protobuf.message import DecodeError

from lance_format.errors import (
    CorruptFileError,
    InvalidInputError,
    LanceError,
    SchemaError,
    UnsupportedTypeError,
)
from lance_format.file.container import (
    V2_0,
    ByteSource,
    FileDecoder,
    FileMetadata,
    has_dictionary,
    read_file_metadata,
)
from lance_format.file.metadata import LanceFileMetadata, LanceFileStatistics, file_statistics
from lance_format.file.utf8 import check_utf8, string_columns
from lance_format.file.v2_0.buffers import gather_ranges
from lance_format.file.v2_1 import FileDecoder21
from lance_format.lazy import OnFirstUse
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_from_pb
from lance_format.schema_ext import from_storage, storage_schema
from lance_format.session import CacheKind, default_session
from lance_format.storage import ObjectStore, open_store, split_uri, uri_scheme

if TYPE_CHECKING:
    from lance_format.file.legacy import reader as _legacy
    from lance_format.file.v2_0 import decoder as _v2_0
else:
    # Most data files are 2.1 / 2.2: the 2.0 and legacy decoders load when such a file is first
    # opened, so a process that never meets one (a Spark planner worker, a scan of 2.2 files)
    # does not import them (issue 28 item 7: ~80 ms per fresh planning process).
    _legacy = OnFirstUse("lance_format.file.legacy.reader")
    _v2_0 = OnFirstUse("lance_format.file.v2_0.decoder")

#: Bytes of decoded data the reader aims to hold per internal read (bounded-memory streaming).
_CHUNK_BYTES = 16 * 1024 * 1024
T = TypeVar("T")


class ReaderResults:
    """Result of a read: convert to a table or stream record batches.

    Args:
        schema: Schema of the batches.
        batches: Iterator producing the batches lazily.
    """

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> None:
        self.schema = schema
        self._batches = batches

    def to_batches(self) -> pa.RecordBatchReader:
        """Return the results as a streaming ``pyarrow.RecordBatchReader``."""
        return pa.RecordBatchReader.from_batches(self.schema, self._batches)

    def to_table(self) -> pa.Table:
        """Return all results as one ``pyarrow.Table``."""
        return pa.Table.from_batches(list(self._batches), schema=self.schema)


_DECODE_ERRORS = (
    ValueError,
    IndexError,
    KeyError,
    TypeError,
    OverflowError,
    struct.error,
    pa.ArrowException,
    DecodeError,
)


def _guarded(path: str, fn: Callable[..., T], *args: Any) -> T:
    """Run a decode step; stray low-level errors on malformed input become CorruptFileError."""
    try:
        return fn(*args)
    except InvalidInputError:
        raise
    except LanceError as exc:
        if path in str(exc):
            raise
        try:
            named = type(exc)(f"{path}: {exc}")
        except Exception:  # noqa: BLE001 - exotic constructor; keep the original error
            raise exc from None
        raise named from exc
    except _DECODE_ERRORS as exc:
        raise CorruptFileError(f"{path}: malformed file ({type(exc).__name__}: {exc})") from exc


def _decoder_class(meta: FileMetadata) -> Any:
    if meta.legacy is not None:
        return _legacy.LegacyFileDecoder
    if meta.version == V2_0:
        return _v2_0.FileDecoder20
    return FileDecoder21


#: Parsed tails of recently opened files, in the store's session. Data files are immutable once
#: written, so an entry keyed by URI, size and (local files) modification time stays valid; scans
#: reopen the same files often.
_ParsedTail = tuple[FileMetadata, LanceSchema, pa.Schema]
FILE_TAIL: CacheKind[_ParsedTail] = CacheKind("file_tail")
#: Lance and Arrow schemas by serialized file schema (shared by all files of a dataset version).
FILE_SCHEMA: CacheKind[tuple[LanceSchema, pa.Schema]] = CacheKind("file_schema")
#: Parsed objects hold several times their encoded size (protobuf messages, Python lists).
_PARSED_BYTES_PER_ENCODED_BYTE = 8
_PARSED_FIXED_BYTES = 4096


def _tail_cost(meta: FileMetadata) -> int:
    """Estimated bytes a parsed tail keeps alive (its metadata region, parsed)."""
    encoded = max(0, meta.file_size - meta.num_data_bytes)
    return _PARSED_FIXED_BYTES + len(meta.path) + _PARSED_BYTES_PER_ENCODED_BYTE * encoded


def _parsed_metadata(source: ByteSource) -> _ParsedTail:
    """Container metadata, Lance schema and Arrow schema of ``source``'s file (cached)."""
    path_uri = source.path
    cache = source.store.session.metadata_cache
    cache_key = (path_uri, source.size, source.mtime_ns)
    # in-memory stores have no modification time and see files rewritten in place (tests): skip
    cacheable = source.mtime_ns is not None or uri_scheme(path_uri) != "memory"
    hit = cache.get(FILE_TAIL, cache_key) if cacheable else None
    if hit is not None:
        return hit
    meta = _guarded(path_uri, lambda: read_file_metadata(source))
    if meta.legacy is not None:  # legacy files carry their schema in the parsed tail
        legacy_schema: LanceSchema = meta.legacy.schema
        parsed_legacy = (meta, legacy_schema, _guarded(path_uri, legacy_schema.to_arrow))
        if cacheable:
            cache.put(FILE_TAIL, cache_key, parsed_legacy, _PARSED_FIXED_BYTES + len(path_uri))
        return parsed_legacy
    # every data file of a dataset usually carries the same schema: convert it once
    fields_bytes = tuple(f.SerializeToString(deterministic=True) for f in meta.schema_fields)
    schema_key = (fields_bytes, tuple(sorted(meta.schema_metadata.items())))
    schemas = cache.get(FILE_SCHEMA, schema_key)
    if schemas is None:
        lance_schema: LanceSchema = _guarded(
            path_uri, lambda: schema_from_pb(meta.schema_fields, meta.schema_metadata, where=path_uri)
        )
        schemas = (lance_schema, _guarded(path_uri, lance_schema.to_arrow))
        encoded = sum(len(b) for b in fields_bytes) + sum(len(k) + len(v) for k, v in schema_key[1])
        cache.put(FILE_SCHEMA, schema_key, schemas,
                  _PARSED_FIXED_BYTES + (1 + _PARSED_BYTES_PER_ENCODED_BYTE) * encoded)
    parsed = (meta, schemas[0], schemas[1])
    if cacheable:
        cache.put(FILE_TAIL, cache_key, parsed, _tail_cost(meta))
    return parsed


class _SchemaShape:
    """What a reader derives from a file's Arrow schema and its projection alone."""

    def __init__(self, full: pa.Schema, projection: list[int]) -> None:
        self.full = full  # held so that the cache key's ``id(full)`` is not reused while cached
        self.storage = storage_schema(full)
        self.schema = pa.schema([full.field(i) for i in projection], metadata=full.metadata)
        self.ext = self.schema if storage_schema(self.schema) is not self.schema else None
        self.has_dictionary = any(has_dictionary(f.type) for f in self.schema)
        self.strings = string_columns(self.schema)


#: Schema shapes by ``(id(full schema), projection)``. The files of a dataset share one Arrow
#: schema object (``FILE_SCHEMA``), so a scan of many files works these out once, not per file.
_SHAPES: dict[tuple[int, tuple[int, ...]], _SchemaShape] = {}
_SHAPES_MAX = 256


def _schema_shape(full: pa.Schema, projection: list[int]) -> _SchemaShape:
    key = (id(full), tuple(projection))
    shape = _SHAPES.get(key)
    if shape is None or shape.full is not full:
        shape = _SchemaShape(full, projection)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shape
    return shape


def clear_metadata_cache() -> None:
    """Empty the default session's metadata cache (file tails and schemas included)."""
    default_session().metadata_cache.clear()


class RowCount(int):
    """A row count that can also be called (``reader.num_rows()``, pylance's method) and returns itself."""

    def __call__(self) -> int:
        return int(self)


class LanceFileReader:
    """Reader of one Lance data file (versions 2.0, 2.1 and 2.2).

    Args:
        path: File path or URI (ignored when ``store`` and ``key`` are given).
        storage_options: Options for the object store.
        columns: Top-level field names to read (default: all), in output order.
        store: Object store holding the file (with ``key``).
        key: Key of the file in ``store``.
        file_size: Known file size in bytes (saves a request).

    Raises:
        CorruptFileError: the footer or metadata is malformed.
        UnsupportedVersionError: legacy (0.1/0.2) or unknown file version.
        SchemaError: a requested column does not exist.
    """

    def __init__(
        self,
        path: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
        *,
        store: ObjectStore | None = None,
        key: str | None = None,
        file_size: int | None = None,
    ) -> None:
        if store is None or key is None:
            if path is None:
                raise InvalidInputError("LanceFileReader needs a path or a store and key")
            parent, key = split_uri(str(path))
            store = open_store(parent, storage_options)
        self._source = ByteSource(store, key, file_size)
        self._meta, self.lance_schema, full = _parsed_metadata(self._source)
        if columns is None:
            projection = list(range(len(full)))
        else:
            names = full.names
            projection = []
            for name in columns:
                if name not in names:
                    raise SchemaError(f"{self._meta.path}: no column {name!r} (file has {names})")
                projection.append(names.index(name))
        cls = _decoder_class(self._meta)
        shape = _schema_shape(full, projection)
        self._decoder: FileDecoder = _guarded(
            self._source.path, lambda: cls(self._meta, self._source, shape.storage, projection)
        )
        self.schema: pa.Schema = shape.schema
        # decoders make storage arrays; extension columns are wrapped (JSONB as JSON text) here
        self._ext = shape.ext
        # legacy files have no global buffer 0 to mark where data ends: use the file size
        data_bytes = self._meta.num_data_bytes or self._meta.file_size
        self._row_bytes = max(1, data_bytes // max(self._meta.num_rows, 1))
        self._has_dictionary = shape.has_dictionary
        # validated per decoded chunk (utf8.py), unless the decoder checks strings as it makes them
        self._utf8_columns = () if getattr(self._decoder, "validates_strings", False) else shape.strings

    # -- properties --------------------------------------------------------------------------
    @property
    def num_rows(self) -> RowCount:
        """Rows in the file: call it, ``reader.num_rows()``, as pylance's method (reading it as a
        number, our older property, still works)."""
        return RowCount(self._meta.num_rows)

    @property
    def data_bytes_per_row(self) -> int:
        """Average stored bytes per row over all columns (at least 1): sizes read-ahead windows."""
        return self._row_bytes

    @property
    def projected_bytes_per_row(self) -> int:
        """Average stored bytes per row of the projected columns (at least 1), where the file's
        decoder counts them (2.1 / 2.2); :attr:`data_bytes_per_row` otherwise."""
        projected = getattr(self._decoder, "projected_bytes", None)
        if projected is None:
            return self._row_bytes
        return max(1, int(projected) // max(self._meta.num_rows, 1))

    @property
    def file_version(self) -> tuple[int, int]:
        """Logical file version ``(2, x)`` (a 2.0 file's footer says 0.3)."""
        return self._meta.version

    @property
    def path(self) -> str:
        """URI of the file."""
        return self._meta.path

    def metadata(self) -> LanceFileMetadata:
        """The file's metadata as pylance's ``LanceFileMetadata`` (schema, rows, byte counts, columns,
        pages, global buffers); the parsed tail's own attributes read through it too."""
        return LanceFileMetadata(self._meta, self.lance_schema.to_arrow())

    def file_statistics(self) -> LanceFileStatistics:
        """Pages and stored bytes of every column (pylance's ``file_statistics()``)."""
        return file_statistics(self._meta)

    def read_global_buffer(self, index: int) -> bytes:
        """Return global buffer ``index`` (0 is the FileDescriptor)."""
        if not 0 <= index < len(self._meta.global_buffers):
            raise InvalidInputError(f"{self.path}: no global buffer {index}")
        pos, size = self._meta.global_buffers[index]
        return bytes(self._source.read_range(pos, size, f"global buffer {index}"))

    # -- reads -------------------------------------------------------------------------------
    def _chunk_rows(self, batch_size: int) -> int:
        if self._has_dictionary:
            # the real reader builds each batch's dictionary from the pages that batch touches
            return batch_size
        rows = max(batch_size, _CHUNK_BYTES // self._row_bytes)
        return max(batch_size, rows - rows % batch_size)

    def _stream(self, start: int, stop: int, batch_size: int) -> Iterator[pa.RecordBatch]:
        chunk = self._chunk_rows(batch_size)
        pos = start
        while pos < stop:
            end = min(stop, pos + chunk)
            batch = _guarded(self.path, self._decoder.read_range, pos, end)
            if self._ext is not None:
                batch = from_storage(batch, self._ext, f"{self.path}: ")
            if self._utf8_columns:
                check_utf8(batch, self._utf8_columns, self.path)
            for off in range(0, len(batch), batch_size):
                yield batch.slice(off, batch_size)
            pos = end

    def _check_batch_size(self, batch_size: int) -> int:
        if int(batch_size) <= 0:
            raise InvalidInputError(f"batch_size must be positive, got {batch_size}")
        return int(batch_size)

    def read_all(self, *, batch_size: int = 1024, batch_readahead: int = 16) -> ReaderResults:
        """Read every row of the projected columns.

        Args:
            batch_size: Rows per yielded batch (the last may be shorter).
            batch_readahead: Accepted for pylance compatibility; reads are synchronous.
        """
        batch_size = self._check_batch_size(batch_size)
        return ReaderResults(self.schema, self._stream(0, self.num_rows(), batch_size))

    def read_range(
        self, start: int, num_rows: int, *, batch_size: int = 1024, batch_readahead: int = 16
    ) -> ReaderResults:
        """Read ``num_rows`` rows starting at row ``start``.

        Raises:
            InvalidInputError: the range reaches past the end of the file.
        """
        batch_size = self._check_batch_size(batch_size)
        if start < 0 or num_rows < 0 or start + num_rows > self.num_rows():
            raise InvalidInputError(
                f"{self.path}: range [{start}, {start + num_rows}) outside the file's {self.num_rows()} rows"
            )
        return ReaderResults(self.schema, self._stream(start, start + num_rows, batch_size))

    def take_rows(
        self, indices: Sequence[int] | np.ndarray, *, batch_size: int = 1024, batch_readahead: int = 16
    ) -> ReaderResults:
        """Read the rows at ``indices`` (any order; repeats allowed), reading only their pages' bytes.

        Raises:
            InvalidInputError: an index is negative or not below ``num_rows``.
        """
        batch_size = self._check_batch_size(batch_size)
        try:
            idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(f"{self.path}: row indices must be integers") from exc
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_rows()):
            raise InvalidInputError(f"{self.path}: row index out of range (file has {self.num_rows()} rows)")

        def gen() -> Iterator[pa.RecordBatch]:
            chunk = self._chunk_rows(batch_size)
            for off in range(0, int(idx.size), chunk):
                batch = _guarded(self.path, self._decoder.take, idx[off : off + chunk])
                if self._ext is not None:
                    batch = from_storage(batch, self._ext, f"{self.path}: ")
                if self._utf8_columns:
                    check_utf8(batch, self._utf8_columns, self.path)
                for sub in range(0, len(batch), batch_size):
                    yield batch.slice(sub, batch_size)

        return ReaderResults(self.schema, gen())

    def blob_descriptions(self, column: str, rows: Sequence[int] | np.ndarray) -> pa.StructArray:
        """Where a blob column's values are stored: ``struct<position, size>`` at sorted unique ``rows``.

        Args:
            column: A projected blob (``lance-encoding:blob``) column of a 2.0, 2.1 or 2.2 file.
            rows: Sorted, unique row offsets in the file.

        Raises:
            UnsupportedTypeError: the file's decoder has no blob descriptions (legacy files).
        """
        fn = getattr(self._decoder, "blob_descriptions", None)
        if fn is None:
            raise UnsupportedTypeError(f"{self.path}: blob column {column!r} in a legacy file")
        result: pa.StructArray = _guarded(self.path, fn, column, np.asarray(rows, dtype=np.int64))
        return result

    def read_ranges_binary(self, positions: np.ndarray, sizes: np.ndarray) -> pa.Array:
        """Byte ranges of the file as a ``large_binary`` array (value ``i``: ``sizes[i]`` bytes at
        ``positions[i]``); used for blob values stored outside the column's pages."""
        pos, lens = np.asarray(positions, np.int64), np.asarray(sizes, np.int64)
        offsets = np.zeros(len(lens) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        keep = np.flatnonzero(lens > 0)
        data = np.zeros(0, np.uint8)
        if len(keep):
            blob, at = self._source.gather(pos[keep], lens[keep], "blob")
            data = gather_ranges(blob, at, lens[keep])
        return pa.Array.from_buffers(pa.large_binary(), len(lens), [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    def close(self) -> None:
        """Release the file handle."""
        self._source.close()

    def __enter__(self) -> LanceFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["LanceFileReader", "ReaderResults"]
