"""Structured Streaming sink: each micro-batch is one Lance commit, exactly once across restarts.

``df.writeStream.format("lance").option("checkpointLocation", ckpt).start(uri)``

Executors write a micro-batch's rows into data files as the batch writer does; the driver
commits them as one ``Append`` (``Overwrite`` in ``complete`` output mode) whose transaction
properties record the stream id and the batch id. Before committing batch ``n`` the
sink looks up the newest version this stream committed: if it already holds batch ``n``
or later, the batch is a replay (the query restarted after the Lance commit but before
Spark recorded the batch as done) and its freshly written files are deleted instead.

The stream id is the ``stream_id`` option, else the ``checkpointLocation`` — stable across
restarts of the same query, distinct between queries writing the same table.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, InvalidInputError
from lance_format.spark.options import WriteOptions
from lance_format.spark.writer import FragmentsMessage, collect, commit_fragments, delete_files, plan_write
from lance_format.spark.writer import write_task as _write_task
from lance_format.storage import open_store
from lance_format.table.versions import find_latest

#: Transaction property keys a streaming commit carries.
STREAM_ID_KEY = "lance.spark.stream_id"
BATCH_ID_KEY = "lance.spark.batch_id"


def last_committed_batch(uri: str, stream_id: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The newest micro-batch id stream ``stream_id`` committed to the dataset at ``uri``.

    Walks the versions back from the latest until one written by this stream is found.
    """
    try:
        ds = LanceDataset(uri, storage_options=storage_options)
    except DatasetNotFoundError:
        return None
    for version in range(ds.version, 0, -1):
        txn = ds.read_transaction(version)
        if txn is None:
            continue
        props = txn.transaction_properties
        if props.get(STREAM_ID_KEY) == stream_id and BATCH_ID_KEY in props:
            return int(props[BATCH_ID_KEY])
    return None


class LanceStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writer created by ``LanceDataSource.streamWriter``."""

    def __init__(self, options: WriteOptions, input_schema: pa.Schema) -> None:
        if not options.stream_id:
            raise InvalidInputError(f"{options.uri}: a Lance streaming sink needs a stable id for exactly-once "
                                    "commits: set option('checkpointLocation', ...) or option('stream_id', ...)")
        self.stream_id = options.stream_id
        self.plan = plan_write(options, input_schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FragmentsMessage:
        """Write this task's share of the micro-batch as data files."""
        return _write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Commit the micro-batch as one version, unless this stream already committed it."""
        opts = self.plan.options
        frags = collect(messages)
        if self.plan.mode == "ignore":
            return  # option mode=ignore and the dataset exists: the tasks wrote nothing
        storage = dict(opts.storage_options) or None
        done = last_committed_batch(opts.uri, self.stream_id, storage)
        if done is not None and done >= batchId:
            delete_files(opts, frags)  # a replay after a restart: already in the table
            return
        found = find_latest(open_store(opts.uri, storage))
        read_version = found[0] if found is not None else 0
        commit_fragments(self.plan, frags, {STREAM_ID_KEY: self.stream_id, BATCH_ID_KEY: str(batchId)},
                         read_version=read_version)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Delete the files the micro-batch's successful tasks wrote."""
        delete_files(self.plan.options, collect(messages))


__all__ = ["BATCH_ID_KEY", "STREAM_ID_KEY", "LanceStreamWriter", "last_committed_batch"]
