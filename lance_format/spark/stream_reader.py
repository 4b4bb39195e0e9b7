"""Structured Streaming source: ``spark.readStream.format("lance").load(uri)``.

Offsets are dataset versions (``{"version": n}``: every version up to ``n`` has been
read), so a restarted query resumes from the version in its checkpoint and every row
is delivered exactly once. What a version delivers follows its transaction:

* By default the first micro-batch is the whole table at the version that is the latest
  when the query starts (a snapshot, as Delta's streaming source does), and every later
  micro-batch the rows appended after it. With ``starting_version=k`` there is no snapshot:
  the stream starts with the rows version ``k`` appended.
* ``Append``, an insert-only ``Update`` (a ``merge_insert`` that matched nothing) and an
  ``Overwrite`` of an empty table deliver their new fragments, read as they were in that
  version (a row appended and deleted later is still delivered once).
* ``Rewrite`` (compaction), index builds, column additions and drops, config changes and
  reserved fragment ids deliver nothing: the table's rows are the same.
* ``Delete``, ``Update`` of existing rows, ``Overwrite`` of a non-empty table, ``Restore``
  and data replacement change rows already delivered, which an append-only stream cannot
  express: the query fails naming the version, unless ``skip_change_commits=true``, which
  skips those versions entirely (their new rows too).

A version whose manifest was cleaned up before the stream read it fails the query.
Options: ``starting_version``, ``skip_change_commits``, ``max_rows_per_trigger`` (whole
versions are admitted until the next would exceed it; at least one), plus the read
options ``columns``, ``filter``, ``batch_size`` and storage options.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, InvalidInputError, LanceError, VersionNotFoundError
from lance_format.spark.options import StreamReadOptions
from lance_format.spark.reader import (
    RangePartition,
    plan_partitions,
    read_range,
    schema_projection,
    sql_filter,
)
from lance_format.spark.types import spark_arrow_schema, to_spark_batch
from lance_format.table.models import FragmentMetadata
from lance_format.table.transaction import LanceOperation, UnknownOperation

#: Operations that leave the table's rows as they were.
_SAME_ROWS = (LanceOperation.Rewrite, LanceOperation.CreateIndex, LanceOperation.Merge, LanceOperation.Project,
              LanceOperation.ReserveFragments)
_SAME_ROWS_KINDS = frozenset({"update_config", "update_mem_wal_state"})


class ChangeCommitError(LanceError):
    """A version changed rows a stream already delivered (see the module docstring)."""


def _latest(opts: StreamReadOptions) -> LanceDataset | None:
    try:
        return LanceDataset(opts.uri, storage_options=dict(opts.storage_options) or None)
    except DatasetNotFoundError:
        return None  # nothing to stream yet: the offset stays at version 0


def _checkout(ds: LanceDataset, version: int) -> LanceDataset:
    try:
        return ds.checkout_version(version)
    except VersionNotFoundError as exc:
        raise VersionNotFoundError(f"{ds.uri}: version {version} was cleaned up before this stream read it; "
                                   "restart the query from a later starting_version") from exc


def appended_fragments(ds: LanceDataset, version: int, skip_change_commits: bool) -> list[FragmentMetadata]:
    """The fragments whose rows ``version`` added, as they are in that version.

    Raises:
        ChangeCommitError: ``version`` changed existing rows and ``skip_change_commits`` is off.
    """
    current = _checkout(ds, version)
    previous = _checkout(ds, version - 1) if version > 1 else None
    txn = current.read_transaction()
    if txn is None:
        raise InvalidInputError(f"{ds.uri}: version {version} has no transaction file; a stream cannot tell "
                                "which rows it added")
    op = txn.operation
    before = {f.id for f in previous.manifest.fragments} if previous is not None else set()
    new = [f for f in current.manifest.fragments if f.id not in before]
    if isinstance(op, LanceOperation.Append):
        return new
    if isinstance(op, LanceOperation.Update) and not op.removed_fragment_ids and not op.updated_fragments:
        return new  # a merge_insert that only inserted
    if isinstance(op, LanceOperation.Overwrite) and (previous is None or previous.count_rows() == 0):
        return list(current.manifest.fragments)  # creating (or refilling an empty) table appends
    if isinstance(op, _SAME_ROWS) or (isinstance(op, UnknownOperation) and op.kind in _SAME_ROWS_KINDS):
        return []
    if skip_change_commits:
        return []
    kind = op.kind if isinstance(op, UnknownOperation) else type(op).__name__
    raise ChangeCommitError(f"{ds.uri}: version {version} is a {kind} that changes rows this stream may already "
                            "have delivered; set option('skip_change_commits', 'true') to skip such versions")


class LanceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader created by ``LanceDataSource.streamReader`` (see the module docstring).

    Args:
        options: Parsed streaming read options.
        spark_fields: Fields of the stream's schema (the columns read).
    """

    def __init__(self, options: StreamReadOptions, spark_fields: Any) -> None:
        self.options = options
        ds = _latest(options)
        if ds is None:
            raise DatasetNotFoundError(f"{options.uri}: no Lance dataset to stream from")
        self.schema = schema_projection(ds, spark_fields)
        if options.filter:
            sql_filter(options.filter, ds.schema)
        self._cap: int | None = None  # Trigger.AvailableNow: the latest version when it was asked

    def initialOffset(self) -> dict[str, int]:  # noqa: N802  (Spark's name)
        """Before any version (snapshot mode) or before ``starting_version``."""
        start = self.options.starting_version
        return {"version": 0 if start is None else start - 1}

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """Stop at the version that is the latest now."""
        ds = _latest(self.options)
        self._cap = ds.version if ds is not None else 0

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        """``ReadMaxRows`` from ``max_rows_per_trigger``, else everything available."""
        rows = self.options.max_rows_per_trigger
        return ReadMaxRows(rows) if rows else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        """The newest version to read up to (capped by Trigger.AvailableNow and the read limit)."""
        ds = _latest(self.options)
        if ds is None:
            return dict(start)
        first = int(start["version"])
        end = ds.version if self._cap is None else min(ds.version, self._cap)
        if end <= first or not isinstance(limit, ReadMaxRows) or self._snapshot(first):
            return {"version": max(first, end)}
        rows = 0
        for version in range(first + 1, end + 1):  # whole versions while they fit, at least one
            rows += sum(f.num_rows for f in appended_fragments(ds, version, self.options.skip_change_commits))
            if rows > limit.max_rows:
                return {"version": max(version - 1, first + 1)}
        return {"version": end}

    def _snapshot(self, first: int) -> bool:
        return first == 0 and self.options.starting_version is None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """Row ranges of the fragments versions ``(start, end]`` added (the snapshot first)."""
        first, last = int(start["version"]), int(end["version"])
        if last <= first:
            return []
        ds = _latest(self.options)
        if ds is None:
            return []
        max_rows = self.options.max_rows_per_partition
        if self._snapshot(first):
            snap = _checkout(ds, last)
            return [RangePartition(p.fragment_id, p.start, p.stop, version=last)
                    for p in plan_partitions(snap, max_rows) if isinstance(p, RangePartition)]
        parts: list[InputPartition] = []
        for version in range(first + 1, last + 1):
            frags = appended_fragments(ds, version, self.options.skip_change_commits)
            for frag in frags:
                rows = frag.physical_rows
                pieces = max(1, -(-rows // max_rows))
                step = -(-rows // pieces)
                parts.extend(RangePartition(frag.id, s, min(s + step, rows), version=version)
                             for s in range(0, rows, step))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Rows of one partition, read at the version that added them."""
        assert isinstance(partition, RangePartition) and partition.version is not None
        opts = self.options
        ds = LanceDataset(opts.uri, partition.version, storage_options=dict(opts.storage_options) or None)
        target = spark_arrow_schema(self.schema)
        expr = sql_filter(opts.filter, ds.schema) if opts.filter else None
        for batch in read_range(ds, partition, self.schema.names, expr, opts.batch_size):
            yield to_spark_batch(batch, target)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: offsets are versions, kept in Spark's checkpoint."""


__all__ = ["ChangeCommitError", "LanceStreamReader", "appended_fragments"]
