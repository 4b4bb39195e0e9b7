"""``write_dataset``: write Arrow data as a new version of a dataset (pylance's ``lance.write_dataset``).

The pipeline (input streaming, data files, target schema and read version) lives in
``lance_format.table.writing``; its names are re-exported here for callers of this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from lance_format.dataset import LanceDataset, register_writer
from lance_format.errors import InvalidInputError
from lance_format.evolution.arguments import write_options
from lance_format.evolution.bases import DatasetBasePath, write_into_bases
from lance_format.evolution.inputs import coerce_write_input
from lance_format.storage import open_store
from lance_format.table.apply import DEFAULT_DATA_STORAGE_VERSION
from lance_format.table.auto_cleanup import AutoCleanupConfig, auto_cleanup_config_values
from lance_format.table.commit import CommitLock, check_commit_lock, commit_transaction
from lance_format.table.discard import discard_fragment_files
from lance_format.table.transaction import COMMIT_MESSAGE_KEY, LanceOperation, Transaction
from lance_format.table.writing import (
    DEFAULT_MAX_BYTES_PER_FILE,
    DEFAULT_MAX_ROWS_PER_FILE,
    DEFAULT_MAX_ROWS_PER_GROUP,
    DataStorageVersion,
    WriteMode,
    normalize_storage_version,
    prepare_write,
    prepare_write_with_scheme,
    to_batch_stream,
    write_fragment_files,
    write_input_files,
)


def write_dataset(
    data_obj: Any,
    uri: str | Any = None,
    schema: pa.Schema | None = None,
    mode: WriteMode = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    data_storage_version: DataStorageVersion | None = None,
    commit_message: str | None = None,
    transaction_properties: Mapping[str, str] | None = None,
    enable_v2_manifest_paths: bool = True,
    storage_options: Mapping[str, str] | None = None,
    max_page_bytes: int | None = None,
    enable_stable_row_ids: bool = False,
    use_legacy_format: bool | None = None,
    initial_bases: Sequence[DatasetBasePath] | None = None,
    target_bases: Sequence[str] | None = None,
    data_cache_bytes: int | None = None,
    progress: Any = None,
    commit_lock: CommitLock | None = None,
    auto_cleanup_options: AutoCleanupConfig | None = None,
) -> LanceDataset:
    """Write ``data_obj`` as a Lance dataset at ``uri`` and return it at the new version.

    Args:
        data_obj: A pyarrow Table / RecordBatchReader / RecordBatch, a dict of columns, a list of
            row dicts, a pandas or polars DataFrame, a dataset or scanner, or an iterable of
            RecordBatches (streamed; the first batch's schema unless ``schema`` is given).
        uri: Dataset location (local path, ``file://``, ``memory://``, ``s3://``) or a LanceDataset.
        schema: Schema to cast the input to (and the schema of an empty iterable).
        mode: ``"create"`` (fails if it exists), ``"append"`` (creates if missing) or ``"overwrite"``.
        max_rows_per_file: Rows per data file (one fragment per file).
        max_rows_per_group: Rows handed to the file writer at a time.
        max_bytes_per_file: Soft cap on a data file's size: a file ends once its writer has written
            this many bytes, counted as pylance's writer counts them (pages are written when a
            column has buffered 8 MiB; see ``lance_format.table.writing.WrittenBytes``).
        data_storage_version: Lance file version; ``None`` = library default for new
            datasets and the table's version on append.
        commit_message: Stored in the transaction properties.
        transaction_properties: Extra key/values stored with the transaction.
        enable_v2_manifest_paths: Use V2 manifest names for a new dataset.
        storage_options: Backend options (credentials, endpoint...).
        max_page_bytes: Passed to the file writer.
        enable_stable_row_ids: Assign stable row ids (new datasets only).
        use_legacy_format: pylance's older switch: ``True`` is ``data_storage_version="legacy"``,
            ``False`` is ``"stable"``.
        initial_bases: Base paths of a new multi-base dataset (see :func:`write_dataset_with_bases`).
        target_bases: Names or paths of the bases the data files go to.
        data_cache_bytes: pylance's page cache of a data file, shared by its top-level columns
            (default 8 MiB each); here it only decides when ``max_bytes_per_file`` sees bytes written.
        progress: A ``lance_format.progress.FragmentWriteProgress`` (pylance's protocol): ``begin``
            as each data file starts, ``complete`` as each but the last ends (as pylance calls it).
        commit_lock: pylance's ``CommitLock``: ``commit_lock(version)`` returns a context manager held
            while that version's manifest is written.
        auto_cleanup_options: ``{"interval": n, "older_than_seconds": s}``: a new dataset cleans up
            versions older than ``s`` seconds after every ``n``-th commit (ignored for an existing
            dataset, as in pylance).

    Raises:
        DatasetAlreadyExistsError: ``mode="create"`` on an existing dataset.
        SchemaError: appending data whose schema does not match the table.
        InvalidInputError: ``transaction_properties`` not a str -> str mapping, ``commit_message`` not a str.
        CommitConflictError: a concurrent commit conflicts.

    A write that fails after writing data files deletes them before raising (unless its commit
    landed after all), so a failed write leaves nothing behind.
    """
    data = coerce_write_input(data_obj, schema)
    if use_legacy_format is not None and data_storage_version is None:
        data_storage_version = "legacy" if use_legacy_format else "stable"
    if initial_bases is not None or target_bases is not None:
        return write_dataset_with_bases(data, uri.uri if isinstance(uri, LanceDataset) else str(uri),
                                        mode=mode,  # type: ignore[arg-type]
                                        initial_bases=initial_bases, target_bases=target_bases,
                                        storage_options=storage_options,
                                        data_storage_version=data_storage_version,
                                        max_rows_per_file=max_rows_per_file,
                                        enable_stable_row_ids=enable_stable_row_ids)
    given = uri if isinstance(uri, LanceDataset) else None
    if given is not None:
        uri = given.uri
    elif not isinstance(uri, (str, os.PathLike)):
        # str() of anything else (an int, bytes) would become a relative path nobody asked for.
        raise InvalidInputError(f"write_dataset(): uri must be a str or a path, got {type(uri).__name__} {uri!r}")
    # Checked before anything is written, as pylance converts them.
    write_options(schema_arg=schema, max_rows_per_file=max_rows_per_file, max_rows_per_group=max_rows_per_group,
                  max_bytes_per_file=max_bytes_per_file, data_storage_version=data_storage_version,
                  commit_message=commit_message, transaction_properties=transaction_properties)
    mode = _mode(mode)
    lock = check_commit_lock(commit_lock)
    cleanup = None if auto_cleanup_options is None else auto_cleanup_config_values(auto_cleanup_options,
                                                                                     "write_dataset()")
    props = dict(transaction_properties or {})
    if commit_message is not None:
        props[COMMIT_MESSAGE_KEY] = commit_message
    # A dataset given as the target is written through its own store, as pylance does (a
    # memory:// dataset's store exists only there; reopening its URI would start an empty one).
    store = given._store if given is not None and storage_options is None else open_store(str(uri), storage_options)
    target, batches, data_schema, base, read_version, version, scheme = prepare_write_with_scheme(
        data, store, schema=schema, mode=mode, data_storage_version=data_storage_version)
    frags = write_input_files(store, target, batches, data_schema, max_rows_per_file=max_rows_per_file,
                              max_rows_per_group=max_rows_per_group, max_bytes_per_file=max_bytes_per_file,
                              data_storage_version=version, max_page_bytes=max_page_bytes, progress=progress,
                              data_cache_bytes=data_cache_bytes, from_python=True)
    op: LanceOperation.BaseOperation
    if mode == "append" and read_version:
        op = LanceOperation.Append(frags)
    else:  # the auto cleanup settings go into a new dataset's config only (as pylance)
        op = LanceOperation.Overwrite(data_schema, frags, config_upsert_values=cleanup if not read_version else None)
    observed = (read_version, scheme) if base is not None and scheme else None
    built_on = read_version
    if given is not None and 0 < given.version < read_version:
        # As pylance: a write to a dataset object is built on the version it has checked out, so
        # what landed since is checked for conflicts (an Append over a Restore or Overwrite fails).
        built_on, base = given.version, given.manifest
    try:
        txn = Transaction(built_on, op, transaction_properties=props)
        manifest = commit_transaction(store, txn, enable_v2_manifest_paths=enable_v2_manifest_paths,
                                      data_storage_version=version, must_not_exist=(mode == "create"),
                                      enable_stable_row_ids=enable_stable_row_ids, base=base, commit_lock=lock,
                                      observed=observed)
    except BaseException:
        # A refused commit leaves the files unreferenced; an interrupt or a storage error may also
        # strike after the manifest landed, so they go only if no newer version references them.
        discard_fragment_files(store, frags, unless_committed_after=read_version)
        raise
    if lock is not None:  # the returned dataset commits under the same lock (as pylance's)
        store.commit_lock = lock
    return LanceDataset._from_manifest(str(uri), store, manifest, storage_options)


def write_dataset_with_bases(data: Any, uri: str, *, mode: Literal["create", "append"] = "create",
                             initial_bases: Sequence[DatasetBasePath] | None = None,
                             target_bases: Sequence[str] | None = None,
                             storage_options: Mapping[str, str] | None = None,
                             data_storage_version: str | None = None,
                             max_rows_per_file: int = 1024 * 1024,
                             enable_stable_row_ids: bool = False) -> LanceDataset:
    """Create a multi-base dataset, or append to one, writing data files into a target base.

    See :func:`lance_format.evolution.bases.write_into_bases` for the arguments; an append
    without ``target_bases`` is an ordinary :func:`write_dataset` append.
    """
    if mode == "append" and target_bases is None and not initial_bases:
        return write_dataset(data, uri, mode="append", storage_options=storage_options)
    store, manifest = write_into_bases(data, uri, mode=mode, initial_bases=initial_bases, target_bases=target_bases,
                                       storage_options=storage_options, data_storage_version=data_storage_version,
                                       max_rows_per_file=max_rows_per_file,
                                       enable_stable_row_ids=enable_stable_row_ids)
    return LanceDataset._from_manifest(uri, store, manifest, storage_options)


register_writer(write_dataset)


def _mode(mode: Any) -> WriteMode:
    """pylance's reading of ``mode``: ``None`` is ``"create"``, and case does not matter."""
    if mode is None:
        return "create"
    if isinstance(mode, str) and mode.lower() in ("create", "append", "overwrite"):
        return mode.lower()  # type: ignore[return-value]
    raise InvalidInputError(f"write_dataset(): mode must be 'create', 'append' or 'overwrite', got {mode!r}")


__all__ = [
    "DEFAULT_DATA_STORAGE_VERSION",
    "DEFAULT_MAX_BYTES_PER_FILE",
    "DEFAULT_MAX_ROWS_PER_FILE",
    "DEFAULT_MAX_ROWS_PER_GROUP",
    "DataStorageVersion",
    "WriteMode",
    "normalize_storage_version",
    "prepare_write",
    "to_batch_stream",
    "write_dataset",
    "write_dataset_with_bases",
    "write_fragment_files",
]
