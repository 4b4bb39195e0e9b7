"""The write side of the ``lance`` data source: executors write files, the driver commits once.

``df.write.format("lance").mode("append" | "overwrite").save(uri)``:

1. On the driver, ``LanceDataSource.writer`` resolves the target: for an append to an
   existing dataset the table's schema, field ids and file version, and the version read;
   otherwise a new schema from the DataFrame (an ``Overwrite`` creates the dataset).
2. Each Spark task streams its Arrow batches into data files (``max_rows_per_file`` rows
   each) and returns their fragment metadata in a :class:`FragmentsMessage`. A task that
   fails removes the files it wrote before re-raising (``write_input_files`` does that).
   Tasks write with what the driver resolved (field ids, file version): they neither list
   versions nor read a manifest. Spark hands a task Arrow batches of
   ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default); they go to the
   encoder as they are (joining them into bigger batches first measured slower: one more copy).
3. The driver commits ONE transaction (``Append`` or ``Overwrite``) carrying the
   ``transaction_properties`` option. Appends commit through the normal conflict
   resolution, so concurrent appends (Spark or local) all land.
4. When the job fails, Spark calls ``abort`` with the messages of the tasks that succeeded;
   their files are deleted and no version is written. A failed commit deletes them too.

Spark (4.x) only passes ``append`` and ``overwrite`` to Python data sources and refuses
``errorifexists``/``ignore`` before the source sees them; give them as an option with
``mode("append")``: ``.option("mode", "errorifexists")`` (or ``create``) fails when a dataset
exists, ``.option("mode", "ignore")`` writes nothing then (no task writes a file).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from lance_format.errors import DatasetAlreadyExistsError, SchemaError
from lance_format.lazy import OnFirstUse
from lance_format.schema import LanceSchema
from lance_format.spark.options import WriteOptions
from lance_format.spark.types import to_table_batch
from lance_format.storage import open_store
from lance_format.table.apply import DEFAULT_DATA_STORAGE_VERSION
from lance_format.table.discard import discard_fragment_files
from lance_format.table.manifest import Manifest, arrow_schema
from lance_format.table.models import FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.versions import find_latest, read_manifest
from lance_format.table.writing import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
    normalize_storage_version,
    write_input_files,
)

if TYPE_CHECKING:
    from lance_format.table import commit as _commit
else:
    # Only the driver commits; a write task (every cold executor worker) skips the retry loop's
    # conflict and rebase modules.
    _commit = OnFirstUse("lance_format.table.commit")


@dataclass(frozen=True)
class FragmentsMessage(WriterCommitMessage):
    """What one write task sends to the driver: the uncommitted fragments it wrote."""

    fragments: tuple[FragmentMetadata, ...]


@dataclass(frozen=True)
class WritePlan:
    """The resolved target of a write (computed on the driver, shipped to every task).

    Attributes:
        options: Parsed write options.
        mode: ``"append"`` to an existing dataset, ``"ignore"`` (a dataset exists: write
            nothing), else ``"overwrite"``/``"create"`` (new schema).
        read_version: Version the write is based on (0 = no dataset yet).
        schema: Arrow schema of the files written (the table's for appends).
        data_storage_version: The ``data_storage_version`` option (``None``: the table's, or
            the library default), as the commit gets it.
        lance_schema: Field ids of ``schema``'s columns (the table's for appends, else from 0).
        file_version: The normalized Lance file version tasks write.
    """

    options: WriteOptions
    mode: str
    read_version: int
    schema: pa.Schema
    data_storage_version: str | None
    lance_schema: LanceSchema | None
    file_version: str | None


def plan_write(options: WriteOptions, input_schema: pa.Schema) -> WritePlan:
    """Resolve mode, schema and read version for a write of ``input_schema`` rows.

    Raises:
        DatasetAlreadyExistsError: ``mode="create"`` and a dataset exists.
        SchemaError: appending columns the table does not have.
    """
    store = open_store(options.uri, dict(options.storage_options) or None)
    found = find_latest(store)
    if found is not None and options.mode == "ignore":
        return WritePlan(options, "ignore", found[0], input_schema, None, None, None)
    if found is not None and options.mode == "create":
        raise DatasetAlreadyExistsError(f"{store.uri('')}: dataset already exists (version {found[0]}); "
                                        "write with mode('append') or mode('overwrite')")
    if found is not None and options.mode == "append":
        base: Manifest = read_manifest(store, found[1], for_write=True)
        table = arrow_schema(base.schema)
        extra = [n for n in input_schema.names if n not in table.names]
        if extra:
            raise SchemaError(f"{store.uri('')}: DataFrame column(s) {extra} are not in the table "
                              f"(columns: {table.names})")
        version = normalize_storage_version(options.data_storage_version, base.data_storage_version)
        return WritePlan(options, "append", found[0], table, options.data_storage_version, base.schema, version)
    # New schema: field ids from 0. An overwrite keeps the table's file version unless the
    # options name one (as write_dataset does).
    lance_schema = LanceSchema.from_arrow(input_schema)
    default = DEFAULT_DATA_STORAGE_VERSION
    if found is not None and options.data_storage_version is None:
        default = read_manifest(store, found[1]).data_storage_version
    version = normalize_storage_version(options.data_storage_version, default)
    mode = "create" if options.mode == "ignore" else options.mode
    return WritePlan(options, mode, found[0] if found is not None else 0, lance_schema.to_arrow(),
                     options.data_storage_version, lance_schema, version)


def write_task(plan: WritePlan, batches: Iterator[pa.RecordBatch]) -> FragmentsMessage:
    """Write one task's batches as uncommitted fragments (runs on an executor).

    Raises:
        SchemaError: a column is missing or a value does not fit the table's type (named).
    """
    if plan.mode == "ignore" or plan.lance_schema is None or plan.file_version is None:
        return FragmentsMessage(())  # only an ignore plan lacks the schema and version
    opts = plan.options
    converted = (to_table_batch(b, plan.schema) for b in batches if b.num_rows)
    store = open_store(opts.uri, dict(opts.storage_options) or None)
    frags = write_input_files(store, plan.schema, converted, plan.lance_schema,
                              max_rows_per_file=opts.max_rows_per_file, max_rows_per_group=DEFAULT_MAX_ROWS_PER_GROUP,
                              max_bytes_per_file=DEFAULT_MAX_BYTES_PER_FILE, data_storage_version=plan.file_version,
                              max_page_bytes=None, progress=None, data_cache_bytes=None, from_python=True)
    return FragmentsMessage(tuple(frags))


def collect(messages: Sequence[Any]) -> list[FragmentMetadata]:
    """Fragments of every successful task (failed tasks send ``None``)."""
    return [f for m in messages if isinstance(m, FragmentsMessage) for f in m.fragments]


def delete_files(options: WriteOptions, fragments: Sequence[FragmentMetadata]) -> None:
    """Delete the data files of uncommitted ``fragments`` (best effort, each file once)."""
    discard_fragment_files(open_store(options.uri, dict(options.storage_options) or None), fragments)


def commit_fragments(plan: WritePlan, fragments: Sequence[FragmentMetadata],
                     extra_properties: Mapping[str, str] | None = None, *,
                     read_version: int | None = None) -> Manifest:
    """Commit ``fragments`` as one Append or Overwrite; on failure delete their files and re-raise."""
    opts = plan.options
    store = open_store(opts.uri, dict(opts.storage_options) or None)
    props = {**opts.transaction_properties, **(extra_properties or {})}
    rv = plan.read_version if read_version is None else read_version
    op: LanceOperation.BaseOperation
    if plan.mode == "append" and rv:
        op = LanceOperation.Append(list(fragments))
    else:
        op = LanceOperation.Overwrite(LanceSchema.from_arrow(plan.schema), list(fragments))
    txn = Transaction(rv, op, transaction_properties=props)
    try:
        return _commit.commit_transaction(store, txn, data_storage_version=_storage_version(plan),
                                  must_not_exist=plan.mode == "create",
                                  enable_stable_row_ids=opts.enable_stable_row_ids)
    except BaseException:
        delete_files(opts, fragments)
        raise


def _storage_version(plan: WritePlan) -> str | None:
    if plan.data_storage_version is None:
        return None
    return normalize_storage_version(plan.data_storage_version)


class LanceBatchWriter(DataSourceArrowWriter):
    """Batch writer created by ``LanceDataSource.writer`` (see the module docstring)."""

    def __init__(self, options: WriteOptions, input_schema: pa.Schema) -> None:
        self.plan = plan_write(options, input_schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FragmentsMessage:
        """Write this task's rows as data files; return their fragments."""
        return write_task(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's fragments as one version (nothing for an ``ignore`` of an existing dataset)."""
        if self.plan.mode != "ignore":
            commit_fragments(self.plan, collect(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the files of the tasks that succeeded; nothing is committed."""
        delete_files(self.plan.options, collect(messages))


__all__ = ["FragmentsMessage", "LanceBatchWriter", "WritePlan", "collect", "commit_fragments", "delete_files",
           "plan_write", "write_task"]
