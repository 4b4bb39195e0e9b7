"""The public dataset API, mirroring pylance: ``dataset()``, ``LanceDataset``, ``LanceOperation``."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import (
    CommitConflictError,
    DatasetNotFoundError,
    InvalidInputError,
    LanceError,
    RetryableCommitConflictError,
    TagNotFoundError,
)
from lance_format.scanner import (
    DEFAULT_BATCH_SIZE,
    ROW_ADDR,
    ROW_ID,
    LanceScanner,
    ReadContext,
    ScanOptions,
    referenced_columns,
    take_rows,
)
from lance_format.schema import LanceSchema
from lance_format.storage import ObjectStore, open_store
from lance_format.table import tags as _tags
from lance_format.table.commit import DEFAULT_MAX_RETRIES, commit_transaction
from lance_format.table.fragment import FragmentMetadata
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.transaction import COMMIT_MESSAGE_KEY, LanceOperation, Transaction
from lance_format.table.versions import (
    find_latest,
    load_manifest,
    load_transaction,
    version_summaries,
)

UriLike = Union[str, Path]
Filter = Union[str, pc.Expression, None]


def dataset(uri: UriLike, version: int | str | None = None, *,
            storage_options: Mapping[str, str] | None = None) -> LanceDataset:
    """Open the Lance dataset at ``uri``.

    Args:
        uri: Dataset location.
        version: Version number or tag name; latest when ``None``.
        storage_options: Backend options.

    Raises:
        DatasetNotFoundError: if there is no dataset at ``uri``.
        VersionNotFoundError / TagNotFoundError: for a missing version or tag.
    """
    return LanceDataset(uri, version, storage_options=storage_options)


class Tags:
    """Tags of a dataset (``_refs/tags/{name}.json``), as ``LanceDataset.tags``."""

    def __init__(self, ds: LanceDataset):
        self._ds = ds

    def list(self) -> dict[str, _tags.Tag]:
        """All tags by name."""
        return _tags.list_tags(self._ds._store)

    def get_version(self, tag: str) -> int:
        """Version a tag points at."""
        return _tags.read_tag(self._ds._store, tag).version

    def create(self, tag: str, version: int) -> None:
        """Create ``tag`` at ``version``."""
        size = self._ds._manifest_size(version)
        _tags.write_tag(self._ds._store, tag, version, size)

    def update(self, tag: str, version: int) -> None:
        """Move ``tag`` to ``version``."""
        _tags.update_tag(self._ds._store, tag, version, self._ds._manifest_size(version))

    def delete(self, tag: str) -> None:
        """Delete ``tag``."""
        _tags.delete_tag(self._ds._store, tag)


class LanceDataset:
    """A Lance dataset checked out at one version."""

    def __init__(self, uri: UriLike, version: int | str | None = None, *,
                 storage_options: Mapping[str, str] | None = None):
        self._uri = str(uri)
        self._storage_options = dict(storage_options) if storage_options else None
        self._store = open_store(self._uri, self._storage_options)
        if isinstance(version, str):
            try:
                version = _tags.read_tag(self._store, version).version
            except TagNotFoundError:
                if find_latest(self._store) is None:
                    raise DatasetNotFoundError(f"{self._store.uri('')}: no Lance dataset found") from None
                raise
        self._set_manifest(load_manifest(self._store, version))

    @classmethod
    def _from_manifest(cls, uri: str, store: ObjectStore, manifest: Manifest,
                       storage_options: Mapping[str, str] | None = None) -> LanceDataset:
        ds = cls.__new__(cls)
        ds._uri = str(uri)
        ds._storage_options = dict(storage_options) if storage_options else None
        ds._store = store
        ds._set_manifest(manifest)
        return ds

    def _set_manifest(self, manifest: Manifest) -> None:
        self._ctx = ReadContext(self._store, manifest, self._storage_options)
        self._manifest = self._ctx.manifest  # with unknown row counts filled in

    # -- metadata -------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The dataset URI."""
        return self._uri

    @property
    def manifest(self) -> Manifest:
        """The checked-out manifest."""
        return self._manifest

    @property
    def schema(self) -> pa.Schema:
        """Arrow schema of this version."""
        return self._ctx.arrow_schema

    @property
    def lance_schema(self) -> LanceSchema:
        """Lance schema (with field ids) of this version."""
        return self._manifest.schema

    @property
    def version(self) -> int:
        """The checked-out version number."""
        return self._manifest.version

    @property
    def latest_version(self) -> int:
        """The newest version number of the dataset."""
        found = find_latest(self._store)
        return found[0] if found is not None else self.version

    @property
    def data_storage_version(self) -> str:
        """Default data file version of the table (``"2.0"``, ``"2.1"``, ``"2.2"``)."""
        return self._manifest.data_storage_version

    @property
    def has_stable_row_ids(self) -> bool:
        """Whether the table uses stable row ids."""
        return self._manifest.uses_stable_row_ids

    @property
    def max_field_id(self) -> int:
        """Largest field id of the schema."""
        return self._manifest.schema.max_field_id()

    @property
    def config(self) -> dict[str, str]:
        """Table config."""
        return dict(self._manifest.config)

    @property
    def tags(self) -> Tags:
        """Tag management."""
        return Tags(self)

    def __len__(self) -> int:
        return self.count_rows()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Reopen by URI and version on the other side (pickling for Spark / multiprocessing).
        return _reopen, (self._uri, self.version, self._storage_options)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self._uri!r}, version={self.version})"

    def versions(self) -> list[dict[str, Any]]:
        """All versions: ``version``, ``timestamp``, ``operation`` and ``metadata`` (summary)."""
        return [
            {"version": v["version"], "timestamp": _local_time(v["timestamp_ns"]),
             "operation": v["operation"], "metadata": v["metadata"]}
            for v in version_summaries(self._store)
        ]

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """Transaction that produced ``version`` (the checked-out one by default)."""
        m = self._manifest if version is None or version == self.version else load_manifest(self._store, version)
        return load_transaction(self._store, m)

    def _manifest_size(self, version: int) -> int:
        from lance_format.table.versions import manifest_key_of

        return self._store.size(manifest_key_of(self._store, version))

    def checkout_version(self, version: int | str) -> LanceDataset:
        """Return this dataset at ``version`` (number or tag name)."""
        if isinstance(version, str):
            version = _tags.read_tag(self._store, version).version
        if version == self.version:
            return self
        return LanceDataset._from_manifest(self._uri, self._store, load_manifest(self._store, version),
                                           self._storage_options)

    def checkout_latest(self) -> LanceDataset:
        """Return this dataset at its newest version."""
        return LanceDataset._from_manifest(self._uri, self._store, load_manifest(self._store),
                                           self._storage_options)

    def restore(self) -> None:
        """Commit the checked-out version as the newest version (this handle moves to it)."""
        txn = Transaction(self.latest_version, LanceOperation.Restore(self.version))
        self._set_manifest(commit_transaction(self._store, txn))

    # -- fragments ------------------------------------------------------------------

    def get_fragments(self, filter: Any = None) -> list[LanceFragment]:
        """Fragments of this version."""
        if filter is not None:
            raise InvalidInputError("get_fragments() does not support filter")
        return [LanceFragment(self, f) for f in self._manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with ``fragment_id`` or ``None``."""
        f = self._manifest.fragment(fragment_id)
        return None if f is None else LanceFragment(self, f)

    # -- reading --------------------------------------------------------------------

    def scanner(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter = None,
        limit: int | None = None,
        offset: int | None = None,
        *,
        batch_size: int | None = None,
        fragments: Sequence[Any] | None = None,
        with_row_id: bool | None = None,
        with_row_address: bool | None = None,
        **_ignored: Any,
    ) -> LanceScanner:
        """Return a scanner with projection, filter, limit/offset and row id options.

        Args:
            columns: Top-level column names (all when ``None``).
            filter: A pyarrow compute expression or a SQL predicate string.
            limit: Maximum rows to return.
            offset: Rows to skip (after filtering).
            batch_size: Rows read per step.
            fragments: Restrict the scan to these fragments.
            with_row_id: Append ``_rowid`` (row address unless stable row ids).
            with_row_address: Append ``_rowaddr``.
        """
        names = self.schema.names
        if columns is None:
            cols = list(names)
        elif isinstance(columns, Mapping):
            raise InvalidInputError("column expressions (dict columns) are not supported; pass a list of names")
        else:
            cols = list(columns)
            for c in cols:
                if c not in names:
                    raise InvalidInputError(f"column {c!r} is not in the dataset schema {names}")
        expr = _filter_expression(filter, self.schema)
        if limit is not None and limit < 0:
            raise InvalidInputError(f"limit must be >= 0, got {limit}")
        if offset is not None and offset < 0:
            raise InvalidInputError(f"offset must be >= 0, got {offset}")
        frag_list = None
        if fragments is not None:
            frag_list = [f.metadata if isinstance(f, LanceFragment) else f for f in fragments]
        opts = ScanOptions(cols, expr, limit, offset or 0, bool(with_row_id), bool(with_row_address),
                           batch_size or DEFAULT_BATCH_SIZE, frag_list)
        return LanceScanner(self._ctx, opts)

    def to_table(self, columns: Sequence[str] | None = None, filter: Filter = None, limit: int | None = None,
                 offset: int | None = None, *, batch_size: int | None = None, with_row_id: bool | None = None,
                 with_row_address: bool | None = None, **kwargs: Any) -> pa.Table:
        """Read the (projected, filtered) data into a Table."""
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address, **kwargs).to_table()

    def to_batches(self, columns: Sequence[str] | None = None, filter: Filter = None, limit: int | None = None,
                   offset: int | None = None, *, batch_size: int | None = None,
                   with_row_id: bool | None = None,
                   with_row_address: bool | None = None, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """Stream the (projected, filtered) data as record batches."""
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address, **kwargs).to_batches()

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:
        """The first ``num_rows`` rows."""
        kwargs["limit"] = num_rows
        return self.scanner(**kwargs).to_table()

    def count_rows(self, filter: Filter = None, **kwargs: Any) -> int:
        """Number of live rows (matching ``filter`` if given)."""
        if filter is None:
            return sum(f.num_rows for f in self._manifest.fragments)
        expr = _filter_expression(filter, self.schema)
        assert expr is not None
        cols = referenced_columns(expr, self.schema.names)
        return self.scanner(cols, expr).count_rows()

    def take(self, indices: Sequence[int] | pa.Array | np.ndarray[Any, Any],
             columns: Sequence[str] | None = None) -> pa.Table:
        """Rows at global live-row positions ``indices``, in the given order."""
        cols = list(columns) if columns is not None else list(self.schema.names)
        return take_rows(self._ctx, indices, cols)

    # -- writing --------------------------------------------------------------------

    def delete(self, predicate: str | pc.Expression, *, conflict_retries: int = 10) -> dict[str, int]:
        """Delete the rows matching ``predicate``; this handle moves to the new version.

        Returns:
            ``{"num_deleted_rows": n}``.
        """
        for attempt in range(conflict_retries + 1):
            ds = self if attempt == 0 else self.checkout_latest()
            try:
                manifest, n = _delete_rows(ds, predicate)
            except RetryableCommitConflictError:
                if attempt == conflict_retries:
                    raise
                continue
            self._set_manifest(manifest)
            return {"num_deleted_rows": n}
        raise AssertionError("unreachable")

    @staticmethod
    def commit(
        base_uri: UriLike | LanceDataset,
        operation: LanceOperation.BaseOperation | Transaction,
        read_version: int | None = None,
        *,
        storage_options: Mapping[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        commit_message: str | None = None,
    ) -> LanceDataset:
        """Commit an operation whose data files were written elsewhere (e.g. on Spark executors).

        Args:
            base_uri: Dataset URI or dataset.
            operation: An operation from :class:`LanceOperation`, or a :class:`Transaction`.
            read_version: Version the operation was built on (required except for
                Overwrite and Restore).
            storage_options: Backend options.
            enable_v2_manifest_paths: V2 manifest names for a new dataset (default True).
            max_retries: Retries after lost races.
            commit_message: Stored in the transaction properties.

        Raises:
            CommitConflictError: if a concurrent commit conflicts.
        """
        if isinstance(base_uri, LanceDataset):
            store, uri = base_uri._store, base_uri.uri
            storage_options = storage_options or base_uri._storage_options
        else:
            uri = str(base_uri)
            store = open_store(uri, storage_options)
        if isinstance(operation, Transaction):
            txn = operation
        elif isinstance(operation, LanceOperation.BaseOperation):
            if read_version is None:
                if not isinstance(operation, (LanceOperation.Overwrite, LanceOperation.Restore)):
                    raise InvalidInputError("read_version is required for all operations except "
                                            "Overwrite and Restore")
                read_version = 0
            props = {COMMIT_MESSAGE_KEY: commit_message} if commit_message is not None else {}
            txn = Transaction(read_version, operation, transaction_properties=props)
        else:
            raise InvalidInputError(f"operation must be a LanceOperation or Transaction, got "
                                    f"{type(operation).__name__}")
        base = base_uri.manifest if isinstance(base_uri, LanceDataset) else None
        manifest = commit_transaction(store, txn, max_retries=max_retries, base=base,
                                      enable_v2_manifest_paths=enable_v2_manifest_paths is not False)
        return LanceDataset._from_manifest(uri, store, manifest, storage_options)


def _local_time(ns: int) -> dt.datetime:
    # Naive local time, computed exactly as pylance does (float arithmetic included, so
    # the microseconds agree to the last digit).
    return dt.datetime.fromtimestamp(ns // 1e9) + dt.timedelta(microseconds=(ns % 1e9) // 1e3)


def _reopen(uri: str, version: int, storage_options: Mapping[str, str] | None) -> LanceDataset:
    return LanceDataset(uri, version, storage_options=storage_options)


def _filter_expression(filter: Filter, schema: pa.Schema) -> pc.Expression | None:
    if filter is None or isinstance(filter, pc.Expression):
        return filter
    from lance_format.sql import to_expression  # sqlglot: imported only when SQL is used

    if isinstance(filter, str):
        extra = schema
        for name in (ROW_ID, ROW_ADDR):
            if name in filter and name not in schema.names:
                extra = extra.append(pa.field(name, pa.uint64()))
        return to_expression(filter, extra)
    return to_expression(filter, schema)


def _delete_rows(ds: LanceDataset, predicate: str | pc.Expression) -> tuple[Manifest, int]:
    """Write deletion files for rows matching ``predicate`` and commit a Delete."""
    expr = _filter_expression(predicate, ds.schema)
    if expr is None:
        raise InvalidInputError("delete() needs a predicate")
    updated: list[FragmentMetadata] = []
    removed: list[int] = []
    total = 0
    by_id = {f.id: f for f in ds._manifest.fragments}
    # Refuse before any deletion file is written, so a refused delete leaves no orphans.
    check_feature_flags(ds._manifest, ds._store.uri(""), for_write=True)

    def one(item: tuple[int, np.ndarray[Any, Any]]) -> tuple[int, FragmentMetadata | None, int]:
        return (item[0], *apply_deletions(ds, by_id[item[0]], item[1]))

    # The predicate is evaluated over many fragments at once; then each fragment with
    # matches gets its deletion file. On a remote store those writes overlap (they are
    # latency-bound); on a local disk threads measured slower (the creates serialize
    # in the file system and the GIL), so they are done in order.
    matches = matching_offsets(ds, expr)
    if ds._ctx.low_latency:
        results: Iterator[tuple[int, FragmentMetadata | None, int]] = map(one, matches)
        pool = None
    else:
        pool = ThreadPoolExecutor(max_workers=8)
        results = (f.result() for f in [pool.submit(one, m) for m in matches])
    try:
        for frag_id, meta, hits in results:
            total += hits
            if meta is None:
                removed.append(frag_id)
            elif hits:
                updated.append(meta)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    # Like pylance, a delete that matches nothing still commits a version.
    pred_text = predicate if isinstance(predicate, str) else str(predicate)
    txn = Transaction(ds.version, LanceOperation.Delete(updated, removed, pred_text))
    try:
        return commit_transaction(ds._store, txn, base=ds._manifest), total
    except CommitConflictError:
        # Raised only before the manifest is put: the deletion files written above are
        # referenced by no version, so remove them (a retry writes fresh ones).
        for meta in updated:
            if meta.deletion_file is not None and meta.deletion_file != by_id[meta.id].deletion_file:
                with contextlib.suppress(LanceError):
                    ds._store.delete(meta.deletion_file.path(meta.id))
        raise


from lance_format.fragment import LanceFragment, apply_deletions, matching_offsets  # noqa: E402  (circular import)

__all__ = ["LanceDataset", "LanceOperation", "Tags", "Transaction", "dataset"]
