"""``LanceFileWriter``: write a single Lance data file (pylance-compatible API)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, BinaryIO

import pyarrow as pa

from lance_format.errors import InvalidInputError, LanceError
from lance_format.file.container import V2_0, ContainerWriter, parse_version_string
from lance_format.file.legacy.writer import LegacyFileEncoder
from lance_format.file.v2_0.encoder import FileEncoder20
from lance_format.file.v2_1 import FileEncoder21
from lance_format.io_stats import record_write
from lance_format.schema import LanceSchema
from lance_format.schema_codec import schema_to_pb
from lance_format.schema_ext import storage_schema, to_storage
from lance_format.storage import ObjectStore, open_store, split_uri


def _encoder_class(version: tuple[int, int]) -> Any:
    if version == V2_0:

        return FileEncoder20

    return FileEncoder21


class LanceFileWriter:
    """Writer of one Lance data file.

    Args:
        path: Destination path or URI (ignored when ``store`` and ``key`` are given).
        schema: Arrow schema; when omitted, taken from the first batch (or ``lance_schema``).
        version: File version, ``"2.0"`` (default), ``"2.1"``, ``"2.2"``, ``"stable"`` or ``"legacy"``
            (the v1 format, footer version 0.2).
        storage_options: Options for the object store.
        max_page_bytes: Bytes buffered per column before a page is written (default 16 MiB).
        store: Object store to write into (with ``key``).
        key: Key of the file in ``store``.
        lance_schema: Schema with dataset field ids for the file's FileDescriptor.
        data_cache_bytes: Accepted for pylance compatibility; unused.

    After :meth:`close`: ``num_rows``, ``file_size`` (also ``size_bytes``), ``field_ids`` and
    ``column_indices`` (``DataFile.fields`` / ``column_indices``) and ``file_version`` as the
    DataFile records it (2.0 -> ``(2, 0)`` although the footer says 0.3).
    """

    def __init__(
        self,
        path: str | None = None,
        schema: pa.Schema | None = None,
        *,
        version: str | None = "2.0",
        storage_options: Mapping[str, str] | None = None,
        max_page_bytes: int | None = None,
        store: ObjectStore | None = None,
        key: str | None = None,
        lance_schema: LanceSchema | None = None,
        data_cache_bytes: int | None = None,
    ) -> None:
        if store is None or key is None:
            if path is None:
                raise InvalidInputError("LanceFileWriter needs a path or a store and key")
            parent, key = split_uri(str(path))
            store = open_store(parent, storage_options)
        self._store = store
        self._key = key
        self.path = store.uri(key)
        self.file_version: tuple[int, int] = parse_version_string(version)
        self._max_page_bytes = max_page_bytes
        self._lance_schema = lance_schema
        self._extra_metadata: dict[str, bytes] = {}
        self._global_buffers: list[bytes] = []
        if schema is None and lance_schema is not None:
            schema = lance_schema.to_arrow()
        self.schema: pa.Schema | None = None
        self._stream: BinaryIO | None = None
        self._container: ContainerWriter | None = None
        self._encoder: Any = None
        self.num_rows = 0
        self.file_size = 0
        self.field_ids: list[int] = []
        self.column_indices: list[int] = []
        self.closed = False
        if schema is not None:
            self._start(schema)

    @property
    def size_bytes(self) -> int:
        """Final file size (pylance name), valid after :meth:`close`."""
        return self.file_size

    def _start(self, schema: pa.Schema) -> None:
        if self._lance_schema is None:
            self._lance_schema = LanceSchema.from_arrow(schema)
        self.schema = schema
        self._stream = self._store.open_writer(self._key)
        if self.file_version[0] == 0:

            try:
                self._encoder = LegacyFileEncoder(self._stream, self.path, self._lance_schema, storage_schema(schema))
            except BaseException:
                self.abort()
                raise
            return
        cls = _encoder_class(self.file_version)
        try:
            self._container = ContainerWriter(self._stream, self.path, self.file_version)
            self._encoder = cls(
                self._container, storage_schema(schema), max_page_bytes=self._max_page_bytes,
                version=self.file_version
            )
        except BaseException:
            # The encoder refuses schemas it cannot store (e.g. maps before 2.2): leave no
            # partial file behind.
            self.abort()
            raise

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        assert self.schema is not None
        if batch.schema.equals(self.schema, check_metadata=False):
            return batch
        try:
            if batch.schema.names != self.schema.names:
                batch = batch.select(self.schema.names)
            return batch.cast(self.schema)
        except (KeyError, ValueError, TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InvalidInputError(
                f"{self.path}: batch schema {batch.schema} does not match the file schema "
                f"{self.schema}: {exc}"
            ) from exc

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append a record batch or table (tables are written chunk by chunk).

        Raises:
            InvalidInputError: the data does not match the schema, a 2.0 struct holds nulls,
                or the writer is closed.
        """
        if self.closed:
            raise InvalidInputError(f"{self.path}: writer is closed")
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        if self.schema is None:
            self._start(batch.schema)
        for b in batches:
            b = self._conform(b)
            # encoders see storage arrays only (extension columns; JSON text as JSONB)
            self._encoder.write_batch(to_storage(b, f"{self.path}: "))
            self.num_rows += b.num_rows

    def add_schema_metadata(self, key: str, value: str | bytes) -> None:
        """Add a schema metadata entry to the file (before :meth:`close`)."""
        self._extra_metadata[key] = value if isinstance(value, bytes) else str(value).encode()

    def add_global_buffer(self, data: bytes) -> int:
        """Add a global buffer to the file (before :meth:`close`); pylance's method.

        Returns:
            Its index in the global buffer table (1 for the first: 0 is the file descriptor).

        Raises:
            InvalidInputError: the writer is closed, or the file is a legacy (v1) file.
        """
        if self.closed:
            raise InvalidInputError(f"{self.path}: writer is closed")
        if self.file_version[0] == 0:
            raise InvalidInputError(f"{self.path}: legacy (v1) files have no global buffers")
        self._global_buffers.append(bytes(data))
        return len(self._global_buffers)

    def close(self) -> int:
        """Finish the file; returns the number of rows written."""
        if self.closed:
            return self.num_rows
        if self.schema is None:
            raise InvalidInputError(f"{self.path}: no schema given and no batch written")
        assert self._stream is not None and self._lance_schema is not None
        if self.file_version[0] == 0:  # legacy: every field id, no column indices (as pylance records)
            self.file_size = self._encoder.finish()
            self._stream.close()
            self.field_ids = self._lance_schema.field_ids()
            self.column_indices = []
            self.closed = True
            return self.num_rows
        assert self._container is not None
        columns = self._encoder.finish()
        fields, metadata = schema_to_pb(self._lance_schema)
        metadata.update(self._extra_metadata)
        # Global buffers 1.. sit after the pages (any place will do: the GBO table says where).
        extra = [self._container.write_buffer(b) for b in self._global_buffers]
        self.file_size = self._container.finish(fields, metadata, self.num_rows, columns, self.file_version,
                                                extra_global_buffers=extra)
        self._stream.close()
        record_write(self._store.root, self.file_size)  # LanceDataset.io_stats_*
        flat = self._lance_schema.flat()
        self.field_ids = [flat[i].id for i in self._encoder.owning_fields]
        self.column_indices = list(range(len(self.field_ids)))
        self.closed = True
        return self.num_rows

    def abort(self) -> None:
        """Discard the partially written file."""
        self.closed = True
        drop = getattr(self._encoder, "abort", None)  # pages still encoding on the pool
        if drop is not None:
            drop()
        stream = self._stream
        if stream is not None:
            abort = getattr(stream, "abort", None)
            if abort is not None:
                abort()
            else:
                stream.close()
                self._store.delete(self._key)

    def __enter__(self) -> LanceFileWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            with contextlib.suppress(LanceError):
                self.abort()
