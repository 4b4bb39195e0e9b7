"""The single write path: one Arrow stream in, exactly one Lance commit out.

The IO manager and the resource both write through :func:`commit_arrow`, so mode handling,
schema alignment and lineage properties live in one place. A later Spark path that writes
fragments itself commits them through :func:`commit_fragments` (``LanceDataset.commit``) and
gets the same lineage properties and metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

import pyarrow as pa

import lance_format
from lance_format.errors import DatasetNotFoundError

from .config import LanceSettings, WriteMode
from .lineage import COMMIT_MESSAGE, CommitInfo, read_commit
from .reader import open_dataset

ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader


@dataclass(frozen=True)
class WriteResult:
    """Outcome of one commit.

    Attributes:
        uri: dataset URI.
        mode: the write mode that was asked for (``"overwrite"`` or ``"append"``).
        dataset: the dataset opened at the new version.
        commit: what the new version's transaction records.
        previous_version: version before the write (``None`` if the dataset did not exist).
        previous_rows: row count before the write (0 if the dataset did not exist).
    """

    uri: str
    mode: WriteMode
    dataset: Any
    commit: CommitInfo
    previous_version: int | None
    previous_rows: int = 0

    @property
    def version(self) -> int:
        """The version this write created."""
        return int(self.dataset.version)


def _try_open(settings: LanceSettings, uri: str) -> Any | None:
    try:
        return open_dataset(settings, uri)
    except DatasetNotFoundError:
        return None


def _cast_batches(reader: pa.RecordBatchReader, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        yield batch.cast(target)


def align_to_schema(data: ArrowData, target: pa.Schema) -> ArrowData:
    """Cast ``data`` to an existing dataset's schema for an append.

    Frame libraries lose some Arrow types on a round trip (pandas turns
    ``fixed_size_list<float32>`` into ``list<float>``, strings into ``large_string``), so an
    append of same-named columns is cast to the table's types. Differing column names are left
    alone: the table layer then reports the schema mismatch.
    """
    if data.schema.names != target.names or data.schema.equals(target):
        return data
    if isinstance(data, pa.Table):
        cast_table: pa.Table = data.cast(target)
        return cast_table
    return pa.RecordBatchReader.from_batches(target, _cast_batches(data, target))


def commit_arrow(
    settings: LanceSettings,
    uri: str,
    data: ArrowData,
    *,
    mode: WriteMode,
    properties: Mapping[str, str],
    commit_message: str | None = None,
) -> WriteResult:
    """Write ``data`` to the dataset at ``uri`` as exactly one Lance commit.

    Both modes create the dataset when it does not exist yet (the first commit of an append-only
    table is a create). Retries on commit conflicts happen inside ``lance_format`` only.

    Args:
        settings: storage settings (storage options, data storage version).
        uri: dataset URI.
        data: the rows to write, as an Arrow table or a stream of batches.
        mode: ``"overwrite"`` replaces the table's rows (new version, history kept); ``"append"`` adds.
        properties: transaction properties (Dagster lineage) stored with the commit.
        commit_message: optional human-readable message stored with the commit.
    """
    existing = _try_open(settings, uri)
    if existing is not None and mode == "append":
        data = align_to_schema(data, existing.schema)
    ds = lance_format.write_dataset(
        data,
        uri,
        mode=mode,
        storage_options=settings.options,
        data_storage_version=cast(Any, settings.data_storage_version),
        commit_message=commit_message,
        transaction_properties=dict(properties),
    )
    return describe_write(ds, uri, mode, existing)


def commit_fragments(
    settings: LanceSettings,
    uri: str,
    fragments: Sequence[Any],
    *,
    mode: WriteMode,
    schema: pa.Schema,
    properties: Mapping[str, str],
    read_version: int | None = None,
    commit_message: str | None = None,
) -> WriteResult:
    """Commit fragments whose data files were written elsewhere as exactly one Lance commit.

    For engines that write files in parallel (``lance_format.write_fragments`` on Spark executors):
    the driver gathers the ``FragmentMetadata`` and commits them here with the same lineage
    properties and metadata as :func:`commit_arrow`.

    Args:
        settings: storage settings.
        uri: dataset URI.
        fragments: ``lance_format.FragmentMetadata`` of the new data files.
        mode: ``"append"`` adds the fragments; ``"overwrite"`` makes them the whole table.
        schema: Arrow schema of the fragments (the table schema after an overwrite).
        properties: transaction properties (Dagster lineage).
        read_version: version the fragments were written against (default: the latest).
        commit_message: optional message stored with the commit.
    """
    existing = _try_open(settings, uri)
    if read_version is None:
        read_version = int(existing.version) if existing is not None else 0
    op: Any
    if mode == "append" and existing is not None:
        op = lance_format.LanceOperation.Append(list(fragments))
    else:
        op = lance_format.LanceOperation.Overwrite(schema, list(fragments))
    props = dict(properties)
    if commit_message is not None:
        props[COMMIT_MESSAGE] = commit_message
    txn = lance_format.Transaction(read_version, op, transaction_properties=props)
    ds = lance_format.LanceDataset.commit(uri, txn, storage_options=settings.options)
    return describe_write(ds, uri, mode, existing)


def describe_write(ds: Any, uri: str, mode: WriteMode, existing: Any | None) -> WriteResult:
    """Build the :class:`WriteResult` of a commit that produced ``ds.version``.

    ``existing`` is the dataset as opened before the write, ``None`` if it did not exist.
    """
    return WriteResult(
        uri=uri,
        mode=mode,
        dataset=ds,
        commit=read_commit(ds, int(ds.version)),
        previous_version=None if existing is None else int(existing.version),
        previous_rows=0 if existing is None else int(existing.count_rows()),
    )
