"""``LanceDataSource``: the ``lance`` format for ``spark.read``, ``spark.readStream``, ``df.write``
and ``df.writeStream``.

Register it once per session with :func:`lance_format.spark.register` (or build a session
with :func:`lance_format.spark.local_session`). Options are documented in
:mod:`lance_format.spark.options`; the read path in :mod:`lance_format.spark.reader`, the
write path in :mod:`lance_format.spark.writer`, the streaming source in
:mod:`lance_format.spark.stream_reader`, the streaming sink in
:mod:`lance_format.spark.streaming`, the type mapping in :mod:`lance_format.spark.types`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource

from lance_format.errors import InvalidInputError
from lance_format.lazy import OnFirstUse
from lance_format.spark.options import (
    READ_KEYS,
    STREAM_READ_KEYS,
    ReadOptions,
    StreamReadOptions,
    WriteOptions,
)
from lance_format.spark.reader import LanceReader, open_version, projected_schema, search_schema
from lance_format.spark.types import spark_schema, table_uri, with_table_uri, write_schema

if TYPE_CHECKING:
    from lance_format.spark import writer as _writer
    from lance_format.spark.stream_reader import LanceStreamReader
    from lance_format.spark.streaming import LanceStreamWriter
    from lance_format.spark.writer import LanceBatchWriter
else:
    # Spark's planner workers unpickle this source for every read's schema and partitions: the
    # batch writer's module (file encoders, the commit protocol) loads when a write is planned.
    _writer = OnFirstUse("lance_format.spark.writer")


class LanceDataSource(DataSource):
    """The ``lance`` Python data source (batch and streaming reads and writes)."""

    @classmethod
    def name(cls) -> str:
        """Format name: ``spark.read.format("lance")``."""
        return "lance"

    #: The version ``schema()`` read, so the DataFrame's rows come from the version its schema
    #: came from (Spark pickles this instance after ``schema()`` and plans reads with it).
    pinned_version: int | None = None

    def schema(self) -> Any:
        """Spark schema of the requested version and columns.

        Raises:
            UnsupportedTypeError: a column has no lossless Spark type (named in the message).
        """
        # Spark asks for the schema of batch and streaming reads alike: accept both's options
        # here, and let reader() / streamReader() refuse the other kind's.
        opts = ReadOptions.parse(self.options, keys=READ_KEYS | STREAM_READ_KEYS)
        ds = open_version(opts)
        self.pinned_version = ds.version
        arrow = search_schema(ds, opts.columns) if opts.nearest is not None else projected_schema(ds, opts.columns)
        schema = spark_schema(arrow)
        if self.options.get("provider") is not None:
            # CREATE TABLE ... USING lance LOCATION: PySpark hands a catalog table's reads no
            # options, only the schema it stored, so the location travels in the schema.
            return with_table_uri(schema, opts.uri)
        return schema

    def reader(self, schema: Any) -> LanceReader:
        """A reader of the pinned version; the fields of ``schema`` are the columns read."""
        opts = ReadOptions.parse(self.options, fallback_uri=table_uri(schema))
        auto = not any(k.lower() == "max_rows_per_partition" for k in self.options)
        return LanceReader(opts, schema.fields, self.pinned_version, auto_partitions=auto)

    def streamReader(self, schema: Any) -> LanceStreamReader:  # noqa: N802  (Spark's name)
        """A micro-batch reader whose offsets are versions (appended rows, exactly once)."""
        # Deferred: every Spark task unpickles this source; only streaming queries need
        # LanceDataset's module (index, search, maintenance: ~0.5 s of CPU on a cold worker).
        from lance_format.spark.stream_reader import LanceStreamReader

        opts = StreamReadOptions.parse(self.options, fallback_uri=table_uri(schema))
        return LanceStreamReader(opts, schema.fields)

    def writer(self, schema: Any, overwrite: bool) -> LanceBatchWriter:
        """A batch writer: tasks write files, the driver commits one transaction.

        Raises:
            InvalidInputError: no ``path`` option. ``INSERT INTO`` a catalog table reaches a
                Python data source without the table's location, and the query's schema may
                carry another table's (:data:`TABLE_URI_KEY`), so such writes are refused.
        """
        if not any(k.lower() == "path" for k in self.options):
            raise InvalidInputError(
                "lance data source: a write needs a path; PySpark does not tell a Python data source which "
                "catalog table an INSERT INTO / insertInto targets. Write with df.write.format('lance')"
                ".save(uri) or lance_format.spark.save_as_table(df, name, uri)")
        opts = WriteOptions.parse(dict(self.options), overwrite=overwrite)
        return _writer.LanceBatchWriter(opts, write_schema(schema, dict(opts.fixed_sizes), opts.blob_columns))

    def streamWriter(self, schema: Any, overwrite: bool) -> LanceStreamWriter:  # noqa: N802  (Spark's name)
        """A streaming writer: one commit per micro-batch, exactly once."""
        from lance_format.spark.streaming import LanceStreamWriter  # deferred: see streamReader

        opts = WriteOptions.parse(dict(self.options), overwrite=overwrite)
        return LanceStreamWriter(opts, write_schema(schema, dict(opts.fixed_sizes), opts.blob_columns))


__all__ = ["LanceDataSource"]
