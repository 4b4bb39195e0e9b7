"""The public dataset API, mirroring pylance: ``dataset()``, ``LanceDataset``, ``LanceOperation``."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format import io_stats as _io_stats
from lance_format.dataset_types import Branch, Tag, Version, VersionRef  # noqa: F401 - pylance's names
from lance_format.errors import (
    DatasetNotFoundError,
    InvalidInputError,
    NotSupportedError,
    RetryableCommitConflictError,
    TagNotFoundError,
)
from lance_format.evolution import arguments as _arg
from lance_format.evolution.blobs import take_blobs as _take_blobs
from lance_format.evolution.reading import sample, take_projected, take_row_ids, version_asof
from lance_format.evolution.scan_options import ColumnOrdering, check_unsupported, normalize_order_by
from lance_format.evolution.take_columns import names_row_columns, take_with_row_columns
from lance_format.index.api import describe_indices, list_indices
from lance_format.io_stats import IOStats  # noqa: F401 - pylance's lance.dataset.IOStats
from lance_format.lazy import OnFirstUse
from lance_format.projection import ProjectedScanner, plan
from lance_format.scanner import (
    DEFAULT_BATCH_SIZE,
    LanceScanner,
    ReadContext,
    ScanOptions,
    ScanStatistics,  # noqa: F401 - pylance's lance.dataset.ScanStatistics
    configure_scan,
    referenced_columns,
    take_rows,
)
from lance_format.schema import LanceSchema
from lance_format.search.placement import split_column
from lance_format.session import Session
from lance_format.stats import DatasetStatsDict as DatasetStats  # noqa: F401 - pylance's dataset_stats() dict
from lance_format.stats import DataStatistics, FieldStatistics, LanceStats  # noqa: F401 - pylance's names
from lance_format.storage import ObjectStore, check_storage_options, open_store, uri_text
from lance_format.table import tags as _tags
from lance_format.table.commit_hooks import (
    DEFAULT_MAX_RETRIES,
    CommitLock,
    check_commit_lock,
    register_after_commit,
)
from lance_format.table.manifest import Manifest
from lance_format.table.models import FragmentMetadata
from lance_format.table.results import DeleteResult, UpdateResult
from lance_format.table.scan import filter_expression as _filter_expression
from lance_format.table.versions import (
    check_version_arg,
    find_latest,
    load_manifest,
    load_transaction,
    local_time,
    manifest_key_of,
    version_summaries,
)

if TYPE_CHECKING:  # write-side modules loaded on first use (OnFirstUse below): a read never needs them
    from lance_format import fragment as _fragment
    from lance_format.evolution import bases as _bases
    from lance_format.evolution import batch_commit as _batch_commit
    from lance_format.evolution import branches as _branches
    from lance_format.evolution import columns as _columns
    from lance_format.evolution import inspection as _inspection
    from lance_format.evolution import merge_columns as _merge_columns
    from lance_format.evolution import metadata as _meta
    from lance_format.evolution import reader_columns as _reader_columns
    from lance_format.evolution import update as _update
    from lance_format.evolution.bases import DatasetBasePath
    from lance_format.evolution.branches import Branches
    from lance_format.evolution.udf import BatchUDF, BatchUDFCheckpoint, batch_udf  # noqa: F401 - pylance's names
    from lance_format.fragment import LanceFragment
    from lance_format.table import commit as _commit
    from lance_format.table import delete as _delete
    from lance_format.table import detached as _detached
    from lance_format.table import transaction as _txn
    from lance_format.table.auto_cleanup import AutoCleanupConfig
    from lance_format.table.transaction import LanceOperation, Transaction

if TYPE_CHECKING:  # verbs loaded on first use (OnFirstUse below); the type checker reads them here
    from lance_format import optimize as _optimize
    from lance_format import sql_query as _sql_query
    from lance_format import write as _write
    from lance_format.evolution import merge_insert as _merge_insert
    from lance_format.evolution.merge_insert import MergeInsertBuilder
    from lance_format.index import build as _index_build
    from lance_format.maintenance import cleanup as _cleanup
    from lance_format.maintenance.cleanup import CleanupStats
    from lance_format.maintenance.compaction_models import CompactionMetrics
    from lance_format.optimize import Optimize
    from lance_format.search import fulltext as _fulltext
    from lance_format.search import nearest as _nearest
    from lance_format.sql_query import SqlQuery, SqlQueryBuilder  # noqa: F401 - pylance's names


# Opening a dataset and scanning it needs none of the search, index-build, maintenance or SQL query
# modules (vector search alone ~0.15 s of CPU to import, issue 28): the verbs that use them load them
# on first use, once. The type checker sees the real modules (``TYPE_CHECKING`` above).
if not TYPE_CHECKING:
    _nearest = OnFirstUse("lance_format.search.nearest")
    _fulltext = OnFirstUse("lance_format.search.fulltext")
    _index_build = OnFirstUse("lance_format.index.build")
    _cleanup = OnFirstUse("lance_format.maintenance.cleanup")
    _optimize = OnFirstUse("lance_format.optimize")
    _sql_query = OnFirstUse("lance_format.sql_query")
    _merge_insert = OnFirstUse("lance_format.evolution.merge_insert")
    # ``insert`` on a dataset opened by a read-only process: ``lance_format.write`` registers
    # itself when imported, but nothing on the read path imports it
    _write = OnFirstUse("lance_format.write")
    # Writes, commits, schema evolution, branches: opening, scanning and querying load none of
    # them (with the file encoders: ~0.1 s of CPU on a cold start, issue 28).
    _fragment = OnFirstUse("lance_format.fragment")
    _batch_commit = OnFirstUse("lance_format.evolution.batch_commit")
    _bases = OnFirstUse("lance_format.evolution.bases")
    _branches = OnFirstUse("lance_format.evolution.branches")
    _columns = OnFirstUse("lance_format.evolution.columns")
    _inspection = OnFirstUse("lance_format.evolution.inspection")
    _merge_columns = OnFirstUse("lance_format.evolution.merge_columns")
    _meta = OnFirstUse("lance_format.evolution.metadata")
    _reader_columns = OnFirstUse("lance_format.evolution.reader_columns")
    _update = OnFirstUse("lance_format.evolution.update")
    _commit = OnFirstUse("lance_format.table.commit")
    _delete = OnFirstUse("lance_format.table.delete")
    _detached = OnFirstUse("lance_format.table.detached")
    _txn = OnFirstUse("lance_format.table.transaction")

#: pylance's names this module offers from the verbs' modules (PEP 562: loaded on first read).
_LAZY_NAMES = {"AutoCleanupConfig": "lance_format.table.auto_cleanup",
               "BatchUDF": "lance_format.evolution.udf", "BatchUDFCheckpoint": "lance_format.evolution.udf",
               "batch_udf": "lance_format.evolution.udf", "DatasetBasePath": "lance_format.evolution.bases",
               "Branches": "lance_format.evolution.branches", "LanceFragment": "lance_format.fragment",
               "LanceOperation": "lance_format.table.transaction", "Transaction": "lance_format.table.transaction",
               "CleanupStats": "lance_format.maintenance.cleanup",
               "CompactionMetrics": "lance_format.maintenance.compaction_models",
               "MergeInsertBuilder": "lance_format.evolution.merge_insert", "Optimize": "lance_format.optimize",
               "SqlQuery": "lance_format.sql_query", "SqlQueryBuilder": "lance_format.sql_query"}


def __getattr__(name: str) -> Any:
    home = _LAZY_NAMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later reads are plain attribute reads
    return value

UriLike = Union[str, Path]
Filter = Union[str, pc.Expression, None]


def dataset(uri: UriLike, version: int | str | None = None, *,
            storage_options: Mapping[str, str] | None = None, session: Session | None = None,
            asof: dt.datetime | str | None = None, commit_lock: CommitLock | None = None) -> LanceDataset:
    """Open the Lance dataset at ``uri``.

    Args:
        uri: Dataset location.
        version: Version number or tag name; latest when ``None``.
        storage_options: Backend options.
        session: Caches to use (see :mod:`lance_format.session`); the process-wide default
            session when ``None``.
        commit_lock: pylance's ``CommitLock``, held around every commit made through this dataset
            (and the versions checked out from it).

    Raises:
        DatasetNotFoundError: if there is no dataset at ``uri``.
        VersionNotFoundError / TagNotFoundError: for a missing version or tag (or no
            version before ``asof``: the newest version committed strictly before that time
            opens, compared as pylance compares, at ``versions()`` microseconds).
    """
    lock = check_commit_lock(commit_lock)
    ds = LanceDataset(uri, version, storage_options=storage_options, session=session)
    ds._root_store.commit_lock = ds._store.commit_lock = lock
    if asof is not None and version is None:

        return ds.checkout_version(version_asof(version_summaries(ds._store), asof, ds.uri))
    return ds


class Tags:
    """Tags of a dataset (``_refs/tags/{name}.json``), as ``LanceDataset.tags``."""

    def __init__(self, ds: LanceDataset):
        self._ds = ds

    def list(self) -> dict[str, _tags.Tag]:
        """All tags by name."""
        return _tags.list_tags(self._ds._root_store)

    def get_version(self, tag: str) -> int:
        """Version a tag points at."""
        return _tags.read_tag(self._ds._root_store, tag).version

    def create(self, tag: str, reference: _tags.TagReference = None, *, version: _tags.TagReference = None) -> None:
        """Create ``tag`` at ``reference`` (pylance's name; ``version=`` is our older keyword for it).

        ``reference``: ``None`` (the checked-out version), a version of the checked-out branch, a tag
        name, or ``(branch, version)`` (``(None, None)``: the newest version of the main branch).
        """
        branch, number, size = self._target(_tags.reference_arg(reference, version))
        _tags.write_tag(self._ds._root_store, tag, number, size, branch=branch)

    def update(self, tag: str, reference: _tags.TagReference = None, *, version: _tags.TagReference = None) -> None:
        """Move ``tag`` to ``reference`` (as :meth:`create`)."""
        branch, number, size = self._target(_tags.reference_arg(reference, version))
        _tags.update_tag(self._ds._root_store, tag, number, size, branch=branch)

    def _target(self, reference: _tags.TagReference) -> tuple[str | None, int, int]:
        ds = self._ds if reference is None else self._ds.checkout_version(reference)
        return ds._branch, ds.version, ds._manifest_size(ds.version)

    def delete(self, tag: str) -> None:
        """Delete ``tag``."""
        _tags.delete_tag(self._ds._root_store, tag)


class LanceDataset:
    """A Lance dataset checked out at one version."""

    def __init__(self, uri: UriLike, version: int | str | None = None, *,
                 storage_options: Mapping[str, str] | None = None, session: Session | None = None):
        self._uri = uri_text(uri)
        check_storage_options(storage_options)
        self._storage_options = dict(storage_options) if storage_options else None
        self._store = open_store(self._uri, self._storage_options, session=session)
        self._root_store = self._store  # tags and branch files live at the root dataset
        self._root_uri = self._uri
        self._branch: str | None = None
        if isinstance(version, str):
            try:
                tag = _tags.read_tag(self._store, version)
            except TagNotFoundError:
                if find_latest(self._store) is None:
                    raise DatasetNotFoundError(f"{self._store.uri('')}: no Lance dataset found") from None
                raise
            version = tag.version
            if tag.branch is not None:  # the version number is one of the branch's, in tree/{branch}/
                self._branch = tag.branch
                self._store = _tags.branch_store(self._root_store, tag.branch)
        self._set_manifest(load_manifest(self._store, version))

    @classmethod
    def _from_manifest(cls, uri: str, store: ObjectStore, manifest: Manifest,
                       storage_options: Mapping[str, str] | None = None) -> LanceDataset:
        ds = cls.__new__(cls)
        ds._uri = str(uri)
        ds._storage_options = dict(storage_options) if storage_options else None
        ds._store = store
        ds._root_store = store
        ds._root_uri = ds._uri
        ds._branch = None
        ds._set_manifest(manifest)
        return ds

    def _on_branch(self, branch: str | None, at: Manifest | int | None = None) -> LanceDataset:
        """This dataset on ``branch`` (``None`` = main) at ``at``: a manifest of the branch, a version
        number of the branch or ``None`` (its latest version).

        The one place a checked-out branch's store is built (checkouts by version, tag, branch,
        ``(branch, version)``, latest, and unpickling).
        """
        store = _tags.branch_store(self._root_store, branch)
        manifest = at if isinstance(at, Manifest) else load_manifest(store, at)
        # On a branch the URI is the branch's tree (a dataset of its own, as pylance reports it);
        # an s3+ddb:// root keeps its scheme and table, so writes to that URI commit through it.
        uri = self._root_uri if branch is None else store.uri("").rstrip("/")
        if branch is not None and self._root_uri.startswith("s3+ddb://"):
            base, _, query = self._root_uri.partition("?")
            uri = f"{base.rstrip('/')}/{_tags.branch_dir(branch)}?{query}"
        ds = LanceDataset._from_manifest(uri, store, manifest, self._storage_options)
        ds._root_store, ds._root_uri, ds._branch = self._root_store, self._root_uri, branch
        return ds

    def _set_manifest(self, manifest: Manifest) -> None:
        self._ctx = ReadContext(self._store, manifest, self._storage_options)
        self._manifest = self._ctx.manifest  # with unknown row counts filled in
        _io_stats.track(self, self._store.root)  # io_stats_* count from the handle's first version

    # -- metadata -------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The dataset URI."""
        return self._uri

    @property
    def manifest(self) -> Manifest:
        """The checked-out manifest."""
        return self._manifest

    def session(self) -> Session:
        """The session whose caches this dataset uses (pylance's ``LanceDataset.session()``)."""
        return self._store.session

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

    def config(self) -> dict[str, str]:
        """Table config (a method, as in pylance 14)."""
        return dict(self._manifest.config)

    # pylance's config and metadata edits: each commits one UpdateConfig (evolution/metadata.py).

    def _commit_update_config(self, op: LanceOperation.UpdateConfig) -> None:
        self._set_manifest(_meta.commit_update_config(self._store, self._manifest, op))

    def update_config(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (``None``: delete) table config keys, or ``replace`` the config; returns the new config."""
        self._commit_update_config(_meta.config_op(values, replace))
        return self.config()

    def delete_config_keys(self, keys: list[str]) -> None:
        """Delete table config keys (missing ones are ignored)."""
        self._commit_update_config(_meta.delete_keys_op(keys))

    @property
    def metadata(self) -> dict[str, str]:
        """Table metadata (``update_metadata``)."""
        return dict(self._manifest.table_metadata)

    def update_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (``None``: delete) table metadata keys, or ``replace`` them; returns the new metadata."""
        self._commit_update_config(_meta.table_metadata_op(values, replace))
        return self.metadata

    @property
    def schema_metadata(self) -> dict[str, str]:
        """Schema metadata as text."""
        return _arg.as_text(self._manifest.schema.metadata)

    def update_schema_metadata(self, values: Mapping[str, str | None], *, replace: bool = False) -> dict[str, str]:
        """Set (``None``: delete) schema metadata keys, or ``replace`` them; returns the new schema metadata."""
        self._commit_update_config(_meta.schema_metadata_op(values, replace))
        return self.schema_metadata

    def update_field_metadata(self, field_updates: Mapping[str, Mapping[str, str | None]], *,
                              replace: bool = False) -> None:
        """Edit the metadata of fields named by dotted path (``{"s.x": {"k": "v"}}``)."""
        self._commit_update_config(_meta.field_metadata_op(self._manifest.schema, field_updates, replace))

    def replace_schema_metadata(self, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: ``update_schema_metadata(new_metadata, replace=True)``."""
        warnings.warn("replace_schema_metadata is deprecated. Use update_schema_metadata(metadata, replace=True) "
                      "instead.", DeprecationWarning, stacklevel=2)
        self.update_schema_metadata(new_metadata, replace=True)

    def replace_field_metadata(self, field_name: str, new_metadata: Mapping[str, str]) -> None:
        """Deprecated in pylance: ``update_field_metadata({field_name: new_metadata}, replace=True)``."""
        warnings.warn("replace_field_metadata is deprecated. Use update_field_metadata with field paths and "
                      "replace=True instead.", DeprecationWarning, stacklevel=2)
        self.update_field_metadata({field_name: new_metadata}, replace=True)

    def get_transactions(self, recent_transactions: int = 10) -> list[Transaction | None]:
        """Transactions of this version and the ones before it, newest first (``None`` where absent)."""
        return _inspection.recent_transactions(self, _arg.integer(recent_transactions, "get_transactions(): count"))

    def validate(self) -> None:
        """Check the manifest against its files (``CorruptFileError`` naming the fragment at fault)."""
        _inspection.validate(self)

    def io_stats_snapshot(self) -> _io_stats.IOStats:
        """Reads and writes of data files under this dataset since it opened or the last
        :meth:`io_stats_incremental` (lance_format.io_stats says what is counted)."""
        return _io_stats.snapshot(self, self._store.root)

    def io_stats_incremental(self) -> _io_stats.IOStats:
        """As :meth:`io_stats_snapshot`, then reset the counters."""
        return _io_stats.incremental(self, self._store.root)

    @property
    def tags(self) -> Tags:
        """Tag management."""
        return Tags(self)

    @property
    def optimize(self) -> Optimize:
        """Maintenance verbs: ``ds.optimize.compact_files(...)`` (see ``lance_format.optimize``)."""

        return _optimize.Optimize(self)

    def cleanup_old_versions(self, older_than: dt.timedelta | None = None, retain_versions: int | None = None,
                             *, delete_unverified: bool = False, error_if_tagged_old_versions: bool = True,
                             dry_run: bool = False, commit_grace: dt.timedelta | None = None) -> CleanupStats:
        """Remove old versions and the files only they use (pylance semantics; see ``lance_format.cleanup``).

        Args:
            older_than: Remove versions older than this (14 days when neither policy is given).
            retain_versions: Keep at least the newest N versions.
            delete_unverified: Also delete unreferenced files younger than 7 days.
            error_if_tagged_old_versions: Raise ``CleanupError`` if a tagged version is old.
            dry_run: Delete nothing; report the figures and the exact keys.
            commit_grace: Keep every version that was the latest this recently, so commits in
                flight find the version they read (not in pylance; default
                ``$LANCE_FORMAT_COMMIT_GRACE`` or 5 minutes; ``timedelta(0)`` is pylance's behaviour).
        """

        if older_than is not None and not isinstance(older_than, dt.timedelta):
            raise InvalidInputError(f"{self.uri}: cleanup_old_versions(): older_than must be a datetime.timedelta, "
                                    f"got {type(older_than).__name__} {older_than!r:.80}")
        if retain_versions is not None:
            retain_versions = _arg.integer(retain_versions, "cleanup_old_versions(): retain_versions",
                                           maximum=_arg.U64_MAX)
        return _cleanup.cleanup_old_versions(self, older_than, retain_versions, delete_unverified=delete_unverified,
                                            error_if_tagged_old_versions=error_if_tagged_old_versions,
                                            dry_run=dry_run, commit_grace=commit_grace)

    def __len__(self) -> int:
        return self.count_rows()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Reopen by URI and version on the other side (pickling for Spark / multiprocessing).
        return _reopen, (self._root_uri, self.version, self._storage_options, self._branch)

    def __repr__(self) -> str:
        return f"LanceDataset(uri={self._uri!r}, version={self.version})"

    def versions(self) -> list[dict[str, Any]]:
        """All versions: ``version``, ``timestamp``, ``operation`` and ``metadata`` (summary)."""
        return [
            {"version": v["version"], "timestamp": local_time(v["timestamp_ns"]),
             "operation": v["operation"], "metadata": v["metadata"]}
            for v in version_summaries(self._store)
        ]

    def read_transaction(self, version: int | None = None) -> Transaction | None:
        """Transaction that produced ``version`` (the checked-out one by default)."""
        m = self._manifest if version is None or version == self.version else load_manifest(self._store, version)
        return load_transaction(self._store, m)

    def _manifest_size(self, version: int) -> int:

        return self._store.size(manifest_key_of(self._store, version))

    def checkout_version(self, version: int | str | tuple[str | None, int | None]) -> LanceDataset:
        """Return this dataset at ``version``: a number, a tag name, or ``(branch, version)``.

        In the tuple, branch ``None``/``"main"`` is main and version ``None`` the branch's latest.
        """
        if isinstance(version, tuple):
            if len(version) != 2 or not isinstance(version[0], (str, type(None))) \
                    or not isinstance(version[1], (int, type(None))):
                raise InvalidInputError(f"{self.uri}: version tuple must be (branch: str | None, version: "
                                        f"int | None), got {version!r:.80}")
            return self.checkout_branch(version[0], version[1])
        if isinstance(version, str):
            tag = _tags.read_tag(self._root_store, version)
            if tag.branch != self._branch:
                return self._on_branch(tag.branch, tag.version)
            version = tag.version
        check_version_arg(self._store, version)  # before the shortcut: True == 1, 1.0 == 1
        if version == self.version:
            return self
        return self._on_branch(self._branch, version)

    def checkout_latest(self) -> LanceDataset:
        """Return this dataset at its newest version."""
        return self._on_branch(self._branch)

    def restore(self) -> None:
        """Commit the checked-out version as the newest version (this handle moves to it)."""
        txn = _txn.Transaction(self.latest_version, _txn.LanceOperation.Restore(self.version))
        self._set_manifest(_commit.commit_transaction(self._store, txn))

    # -- fragments ------------------------------------------------------------------

    def get_fragments(self, filter: Any = None) -> list[LanceFragment]:
        """Fragments of this version."""
        if filter is not None:
            raise InvalidInputError("get_fragments() does not support filter")
        return [_fragment.LanceFragment(self, f) for f in self._manifest.fragments]

    def get_fragment(self, fragment_id: int) -> LanceFragment | None:
        """The fragment with ``fragment_id`` or ``None``."""
        f = self._manifest.fragment(_arg.integer(fragment_id, "fragment_id", maximum=_arg.U64_MAX))
        return None if f is None else _fragment.LanceFragment(self, f)

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
        order_by: Sequence[Any] | None = None,
        nearest: Any = None,
        full_text_query: Any = None,
        include_deleted_rows: bool | None = None,
        blob_handling: str | None = None,
        batch_size_bytes: int | None = None,
        index_segments: Any = None,
        scan_stats_callback: Any = None,
        row_addr_allowlist: Any = None,
        row_addr_blocklist: Any = None,
        with_fragments: Any = None,
        substrait_filter: Any = None,
        batch_readahead: int | None = None,
        fragment_readahead: int | None = None,
        scan_in_order: bool | None = None,
        prefilter: bool | None = None,
        use_stats: bool | None = None,
        fast_search: bool | None = None,
        io_buffer_size: int | None = None,
        late_materialization: Any = None,
        use_scalar_index: bool | None = None,
        strict_batch_size: bool | None = None,
        disable_scoring_autoprojection: bool | None = None,
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
            order_by: Column names or ``ColumnOrdering`` values; sorts before offset/limit.

        The remaining keyword arguments are pylance's: performance hints
        (``batch_readahead``, ``use_scalar_index``, ...) are accepted and have no effect;
        result-changing options that are not implemented (``nearest``,
        ``full_text_query``, ...) raise :class:`NotSupportedError`. Unknown names are a
        ``TypeError``.
        """

        check_unsupported({"blob_handling": blob_handling,
                           "batch_size_bytes": batch_size_bytes, "index_segments": index_segments,
                           "row_addr_allowlist": row_addr_allowlist,
                           "row_addr_blocklist": row_addr_blocklist, "with_fragments": with_fragments,
                           "substrait_filter": substrait_filter})

        names = self.schema.names
        # Types and ranges as pylance converts them (i64 limit/offset, u32 batch size, bools),
        # before the projection is planned or anything is read.
        _arg.columns(columns)
        limit = _arg.optional_integer(limit, "limit")
        offset = _arg.optional_integer(offset, "offset")
        batch_size = _arg.optional_integer(batch_size, "batch_size", minimum=1, maximum=_arg.U32_MAX)
        with_row_id = _arg.flag(with_row_id, "with_row_id")
        with_row_address = _arg.flag(with_row_address, "with_row_address")
        # a search may name its own column (_distance / _score) where it wants it (search.placement)
        order = None
        if nearest is not None:
            columns, order = split_column(columns, _nearest.DISTANCE)
        elif full_text_query is not None:
            columns, order = split_column(columns, _fulltext.SCORE)
        # Nested paths, SQL expressions and row id / lineage columns (lance_format.projection).
        projection = plan(self.schema, columns)
        cols = projection.read_columns
        expr = _filter_expression(filter, self.schema)
        frag_list = None if fragments is None else _fragment_list(fragments)
        opts = ScanOptions(cols, expr, limit, offset or 0, bool(with_row_id) or projection.with_row_id,
                           bool(with_row_address) or projection.with_row_address,
                           batch_size or DEFAULT_BATCH_SIZE, frag_list, normalize_order_by(order_by, names),
                           filter_sql=filter if isinstance(filter, str) else None, blob_descriptions=True)
        scanner: Any
        if full_text_query is not None:  # BM25 over INVERTED indices (lance_format.search.fulltext)
            scanner = _fulltext.FullTextSearch(self._ctx, full_text_query, opts,
                                               prefilter=bool(prefilter), fast_search=bool(fast_search), order=order)
        elif nearest is not None:  # k nearest neighbours (lance_format.search.nearest)
            kinds = None if projection.outputs is None else [o.kind for o in projection.outputs]
            scanner = _nearest.nearest_scanner(self._ctx, opts, nearest, kinds, prefilter=prefilter, order=order)
        elif projection.outputs is None and not strict_batch_size:
            scanner = LanceScanner(self._ctx, opts)
        else:
            scanner = ProjectedScanner(self._ctx, opts, projection.outputs, user_row_id=bool(with_row_id),
                                       user_row_address=bool(with_row_address),
                                       strict_batch_size=bool(strict_batch_size))
        # deleted rows and scan statistics (lance_format.scanner / scan_stats)
        deleted_rows = _arg.flag(include_deleted_rows, "include_deleted_rows")
        return configure_scan(scanner, self._ctx, include_deleted_rows=deleted_rows,  # type: ignore[no-any-return]
                              scan_stats_callback=scan_stats_callback)

    def to_table(self, columns: Sequence[str] | None = None, filter: Filter = None, limit: int | None = None,
                 offset: int | None = None, *, batch_size: int | None = None, with_row_id: bool | None = None,
                 with_row_address: bool | None = None, **kwargs: Any) -> pa.Table:
        """Read the (projected, filtered) data into a Table."""
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address, **kwargs).to_table()

    def sql(self, sql: str) -> SqlQueryBuilder:
        """A SQL SELECT over this dataset, queried as ``dataset`` (see :mod:`lance_format.sql_query` for the subset)."""
        return _sql_query.SqlQueryBuilder(self, sql)

    def to_batches(self, columns: Sequence[str] | None = None, filter: Filter = None, limit: int | None = None,
                   offset: int | None = None, *, batch_size: int | None = None,
                   with_row_id: bool | None = None,
                   with_row_address: bool | None = None, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        """Stream the (projected, filtered) data as record batches."""
        return self.scanner(columns, filter, limit, offset, batch_size=batch_size, with_row_id=with_row_id,
                            with_row_address=with_row_address, **kwargs).to_batches()

    def to_pandas(self, columns: Sequence[str] | Mapping[str, str] | None = None, filter: Filter = None,
                  limit: int | None = None, offset: int | None = None, nearest: Any = None,
                  batch_size: int | None = None, batch_readahead: int | None = None,
                  fragment_readahead: int | None = None, scan_in_order: bool | None = None, *,
                  prefilter: bool | None = None, with_row_id: bool | None = None,
                  with_row_address: bool | None = None, use_stats: bool | None = None,
                  fast_search: bool | None = None, full_text_query: Any = None, io_buffer_size: int | None = None,
                  late_materialization: Any = None, blob_mode: str = "lazy", use_scalar_index: bool | None = None,
                  include_deleted_rows: bool | None = None, order_by: Sequence[Any] | None = None,
                  disable_scoring_autoprojection: bool | None = None, **kwargs: Any) -> Any:
        """The scan as a pandas DataFrame (``scanner(...).to_table().to_pandas(**kwargs)``); blob columns
        come back as their descriptors (pylance's ``blob_mode="descriptions"``)."""
        scan = self.scanner(columns, filter, limit, offset, nearest=nearest, batch_size=batch_size,  # type: ignore[arg-type]
                            batch_readahead=batch_readahead, fragment_readahead=fragment_readahead,
                            scan_in_order=scan_in_order, prefilter=prefilter, with_row_id=with_row_id,
                            with_row_address=with_row_address, use_stats=use_stats, fast_search=fast_search,
                            full_text_query=full_text_query, io_buffer_size=io_buffer_size,
                            late_materialization=late_materialization, use_scalar_index=use_scalar_index,
                            include_deleted_rows=include_deleted_rows, order_by=order_by,
                            disable_scoring_autoprojection=disable_scoring_autoprojection)
        return scan.to_table().to_pandas(**kwargs)

    @property
    def has_index(self) -> bool:
        """Whether the dataset has any index."""
        return len(self.list_indices()) > 0

    def head(self, num_rows: int, **kwargs: Any) -> pa.Table:
        """The first ``num_rows`` rows."""
        kwargs["limit"] = _arg.integer(num_rows, "head(): num_rows")
        return self.scanner(**kwargs).to_table()

    def count_rows(self, filter: Filter = None, **kwargs: Any) -> int:
        """Number of live rows (matching ``filter`` if given)."""
        if filter is None and not kwargs:
            return sum(f.num_rows for f in self._manifest.fragments)
        if filter is None:  # options are validated like the scanner's, never ignored
            return self.scanner(**kwargs).count_rows()
        expr = _filter_expression(filter, self.schema)
        assert expr is not None
        cols = referenced_columns(expr, self.schema.names)
        # SQL text is passed on as is, so a scalar index can answer it (lance_format.index).
        return self.scanner(cols, filter if isinstance(filter, str) else expr, **kwargs).count_rows()

    def take(self, indices: Sequence[int] | pa.Array | np.ndarray[Any, Any],
             columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """Rows at global live-row positions ``indices``, in the given order.

        ``columns`` may also hold ``"struct.field"`` paths or be ``{name: SQL expression}``.

        Raises:
            InvalidInputError: for indices that are not integers or are out of range, and for
                unknown or duplicated columns.
        """
        if columns is not None:

            _arg.columns(columns)
            if names_row_columns(columns):  # _rowid / _rowaddr / _rowoffset beside data columns
                return take_with_row_columns(self, indices, columns)  # type: ignore[arg-type]
            plan(self.schema, columns)  # unknown / duplicated names fail here, before any read
        if isinstance(columns, Mapping) or (columns is not None and any(c not in self.schema.names
                                                                          for c in columns)):

            return take_projected(self, indices, columns)
        cols = list(columns) if columns is not None else list(self.schema.names)
        return take_rows(self._ctx, indices, cols)

    def take_blobs(self, blob_column: str, ids: Sequence[int] | pa.Array | None = None,
                   addresses: Sequence[int] | pa.Array | None = None,
                   indices: Sequence[int] | pa.Array | None = None, **_kwargs: Any) -> list[Any]:
        """File-like ``BlobFile`` handles on a blob column's values (None for nulls), as pylance's.

        Exactly one of ``ids`` (row ids), ``addresses`` (row addresses) or ``indices`` (live-row
        positions) chooses the rows; the bytes are read only when a handle is read.
        """
        return _take_blobs(self, self._ctx, blob_column, ids, addresses, indices)

    def sample(self, num_rows: int, columns: Sequence[str] | Mapping[str, str] | None = None,
               randomize_order: bool = True) -> pa.Table:
        """``num_rows`` distinct random live rows."""

        return sample(self, num_rows, columns, randomize_order)

    def _take_rows(self, row_ids: Sequence[int] | pa.Array | np.ndarray[Any, Any],
                   columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
        """Rows by row id (stable row ids, else row addresses); deleted or unknown ids are skipped."""

        return take_row_ids(self, row_ids, columns)

    def insert(self, data: Any, *, mode: str = "append", **kwargs: Any) -> None:
        """Write ``data`` into this dataset (``write_dataset(data, self, mode=mode, **kwargs)``); this handle
        moves to the new version, as pylance's ``insert``."""

        writer: Any = _WRITER if _WRITER is not None else _write.write_dataset
        new = writer(data, self, mode=mode, **kwargs)
        self._set_manifest(new.manifest)

    def merge(self, data_obj: Any, left_on: str, right_on: str | None = None, schema: pa.Schema | None = None) -> None:
        """Add the other columns of ``data_obj``, left-joined on ``left_on`` = ``right_on`` (one ``Merge``);
        ``schema`` is that of an iterator of batches (pylance's)."""
        _merge_columns.merge_dataset(self, data_obj, left_on, right_on, schema)

    # -- indices (lance_format.index) ----------------------------------------------

    def create_scalar_index(self, column: str, index_type: str, *,
                            name: str | None = None, replace: bool = True, runner: Any = None,
                            **kwargs: Any) -> LanceDataset:
        """Build a scalar index on ``column`` and commit it; this handle moves to the new version.

        Args:
            column: Top-level column to index.
            index_type: A scalar kind of the registry (``"BTREE"``, ``"BITMAP"``, ``"LABEL_LIST"``…).
            name: Index name (default ``"{column}_idx"``).
            replace: Replace an index of the same name (else ``IndexExistsError``).
            runner: A ``lance_format.maintenance.runner.Runner`` for the build tasks (local threads by default).
            **kwargs: The kind's parameters, as pylance names them.

        Raises:
            InvalidInputError: unknown column; ``UnsupportedIndexTypeError`` / ``IndexExistsError`` subclasses.
        """

        if isinstance(column, (list, tuple)):  # pylance takes a one-column list too
            if len(column) != 1:
                raise NotSupportedError(f"{self.uri}: create_scalar_index(): column must name one column, got "
                                        f"{column!r:.80} (scalar indices cover a single column)")
            column = column[0]
        column = _arg.string(column, "create_scalar_index(): column")
        kind = _arg.string(index_type, "create_scalar_index(): index_type")
        if name is not None:
            name = _arg.string(name, "create_scalar_index(): name")
        self._set_manifest(_index_build.create_index(self, column, kind, name=name, replace=replace, runner=runner,
                                        params=kwargs))
        return self

    def create_index(self, column: str | Sequence[str], index_type: str, name: str | None = None, *,
                     replace: bool = False, runner: Any = None, **kwargs: Any) -> LanceDataset:
        """Build an index of any kind (vector ``IVF_*`` or scalar) and commit it, as pylance's ``create_index``.

        Args:
            column: The column (or a one-column list).
            index_type: ``IVF_FLAT``, ``IVF_PQ``, ``IVF_SQ``, ``IVF_HNSW_FLAT/PQ/SQ`` or a scalar kind.
            name: Index name (default ``"{column}_idx"``).
            replace: Replace an index of the same name (pylance's default: refuse).
            runner: Runs the assign/encode tasks (local threads by default; ``SparkRunner`` for executors).
            **kwargs: pylance's parameters (``metric``, ``num_partitions``, ``num_sub_vectors``, ``num_bits``,
                ``sample_rate``, ``max_iterations``, ``ivf_centroids``, ``pq_codebook``, ``m``, ``ef_construction``…).
        """

        column = _one_column(self, column, "create_index")
        self._set_manifest(_index_build.create_index(self, column, index_type, name=name, replace=replace, runner=runner,
                                        params=kwargs))
        return self

    def create_index_uncommitted(self, column: str | Sequence[str], index_type: str, name: str | None = None, *,
                                 fragment_ids: Sequence[int], runner: Any = None, **kwargs: Any) -> Any:
        """Write one segment over ``fragment_ids`` without committing it (pylance's distributed build).

        Pass the same ``ivf_centroids`` (and ``pq_codebook``) to every worker for segments of one model;
        commit the returned ``IndexMetadata`` values with :meth:`commit_existing_index_segments`.
        """

        column = _one_column(self, column, "create_index_uncommitted")
        plan = _index_build.plan_index_build(self, column, index_type, name=name, replace=True, fragment_ids=fragment_ids,
                                params=kwargs)
        return _index_build.build_change(plan, runner).new[0]

    def commit_existing_index_segments(self, index_name: str, column: str, segments: Sequence[Any]) -> LanceDataset:
        """Commit segments written by :meth:`create_index_uncommitted` as one index (replacing one so named)."""

        field_id = self.lance_schema.field(column).id
        new = tuple(dataclasses.replace(s, name=index_name, fields=(field_id,)) for s in segments)
        old = tuple(m for m in self.manifest.indices or () if m.name == index_name)
        self._set_manifest(_index_build.commit_change(self, _index_build.IndexChange(new, old)))
        return self

    def list_indices(self) -> list[Any]:
        """Index segments of this version (``IndexInfo`` values, pylance's keys)."""

        return list(list_indices(self))

    def describe_indices(self) -> list[Any]:
        """One ``IndexDescription`` per index name."""

        return list(describe_indices(self))

    def drop_index(self, name: str) -> LanceDataset:
        """Remove index ``name`` in a new version (``IndexNotFoundError`` if absent)."""

        self._set_manifest(_index_build.drop_index(self, name))
        return self

    @property
    def stats(self) -> LanceStats:
        """``dataset_stats()``, ``data_stats()`` and ``index_stats(name)``, as pylance's (lance_format.stats)."""
        return LanceStats(self)

    # -- writing --------------------------------------------------------------------

    def delete(self, predicate: str | pc.Expression, *, conflict_retries: int = 10) -> DeleteResult:
        """Delete the rows matching ``predicate``; this handle moves to the new version.

        Returns:
            ``{"num_deleted_rows": n}`` (a dict, as pylance's; also ``.num_deleted_rows``).
        """
        conflict_retries = _arg.integer(conflict_retries, "delete(): conflict_retries", maximum=_arg.U32_MAX)
        for attempt in range(conflict_retries + 1):
            ds = self if attempt == 0 else self.checkout_latest()
            try:
                manifest, n = _delete_rows(ds, predicate)
            except RetryableCommitConflictError:
                if attempt == conflict_retries:
                    raise
                continue
            self._set_manifest(manifest)
            return DeleteResult(n)
        raise AssertionError("unreachable")

    # -- table evolution (lance_format.evolution) -------------------------------------

    def merge_insert(self, on: str | Sequence[str] | None = None) -> MergeInsertBuilder:
        """Start a merge_insert keyed on ``on`` (default: the unenforced primary key).

        Chain ``when_matched_update_all(condition=None)``, ``when_not_matched_insert_all()``
        and ``when_not_matched_by_source_delete(expr=None)``, then ``execute(data)``, which
        commits one version and returns the counts.
        """

        return _merge_insert.MergeInsertBuilder(self, on)

    def update(self, updates: Mapping[str, str], where: str | pc.Expression | None = None, *,
               conflict_retries: int = 10) -> UpdateResult:
        """Set columns to SQL expressions on the rows matching ``where`` (one ``Update`` commit).

        Returns:
            The count, also readable as pylance's ``{"num_rows_updated": n}``.
        """

        return _update.update(self, updates, where, conflict_retries=conflict_retries)

    def add_columns(self, transforms: Any, read_columns: Sequence[str] | None = None,
                    reader_schema: pa.Schema | None = None, batch_size: int | None = None, *,
                    transaction_properties: Mapping[str, str] | None = None) -> None:
        """Add columns: ``{name: SQL}``, a function over record batches (``batch_udf``), Arrow fields
        (all null), or a reader / iterator of batches (``reader_schema=``) holding the new values of the
        live rows in order (lance_format.evolution.reader_columns).

        An all-null struct field named like an existing struct adds its new children to it, as
        pylance merges the schemas. Existing data files are kept; each fragment gets one new data file (one ``Merge`` commit)
        whose transaction carries ``transaction_properties``.
        """
        if _reader_columns.is_reader_like(transforms):
            _reader_columns.add_columns_from_reader(self, transforms, reader_schema, properties=transaction_properties)
            return
        _columns.add_columns(self, transforms, read_columns, batch_size=batch_size,
                    transaction_properties=transaction_properties)

    def drop_columns(self, columns: Sequence[str]) -> None:
        """Drop columns (``"struct.field"`` paths allowed) with a schema-only ``Project`` commit."""

        _columns.drop_columns(self, columns)

    def alter_columns(self, *alterations: Mapping[str, Any],
                      transaction_properties: Mapping[str, str] | None = None) -> None:
        """Rename, change nullability or cast columns (dicts: ``path`` plus ``name``/``nullable``/``data_type``).

        The commit's transaction carries ``transaction_properties`` (an extension: pylance 14 takes none).
        """

        _columns.alter_columns(self, *alterations, transaction_properties=transaction_properties)

    # -- branches and clones (lance_format.evolution.branches) --------------------------

    @property
    def branch(self) -> str | None:
        """The checked-out branch (``None`` = main)."""
        return self._branch

    def create_branch(self, branch: str, reference: int | str | tuple[str | None, int | None] | None = None
                      ) -> LanceDataset:
        """Create ``branch`` from ``reference`` (version of this branch, tag, or ``(branch, version)``).

        Only metadata is written (``tree/{branch}/`` and ``_refs/branches/``).

        Returns:
            The dataset checked out on the new branch.
        """

        return _branches.create_branch(self, branch, reference)

    def checkout_branch(self, branch: str | None, version: int | None = None) -> LanceDataset:
        """This dataset on ``branch`` (``None``/``"main"`` = main) at ``version`` (latest by default)."""
        name = None if branch in (None, "main") else branch
        if name is not None:

            _branches.read_branch(self._root_store, name)
        return self._on_branch(name, version)

    @property
    def branches(self) -> Branches:
        """Branch management as pylance's ``ds.branches`` (``list()``, ``delete(name)``)."""

        return _branches.Branches(self)

    def base_paths(self) -> dict[int, DatasetBasePath]:
        """Base paths of this version by id (multi-base datasets, branches, shallow clones)."""

        return {b.id: _bases.DatasetBasePath(b.path, b.name, b.is_dataset_root, b.id) for b in self._manifest.base_paths}

    def list_branches(self) -> dict[str, Any]:
        """Every branch by name (values also readable with pylance's dict keys)."""

        return dict(_branches.list_branches(self._root_store))

    def delete_branch(self, branch: str) -> None:
        """Delete ``branch`` (its own files under ``tree/{branch}/`` and its branch file)."""

        _branches.delete_branch(self, branch)

    def shallow_clone(self, target_path: UriLike, reference: int | str | tuple[str | None, int | None] | None = None,
                      *, storage_options: Mapping[str, str] | None = None) -> LanceDataset:
        """A new dataset at ``target_path`` starting at ``reference``; only a manifest is written."""

        store, manifest = _branches.shallow_clone(self, str(target_path), reference, storage_options=storage_options)
        options = storage_options if storage_options is not None else self._storage_options
        return LanceDataset._from_manifest(str(target_path), store, manifest, options)

    @staticmethod
    def commit(
        base_uri: UriLike | LanceDataset,
        operation: LanceOperation.BaseOperation | Transaction,
        read_version: int | None = None,
        commit_lock: CommitLock | None = None,
        storage_options: Mapping[str, str] | None = None,
        enable_v2_manifest_paths: bool | None = None,
        detached: bool | None = False,
        max_retries: int = DEFAULT_MAX_RETRIES,
        *,
        commit_message: str | None = None,
    ) -> LanceDataset:
        """Commit an operation whose data files were written elsewhere (e.g. on Spark executors).

        Args:
            base_uri: Dataset URI or dataset.
            operation: An operation from :class:`LanceOperation`, or a :class:`Transaction`.
            read_version: Version the operation was built on (required except for
                Overwrite and Restore).
            commit_lock: pylance's ``CommitLock``: ``commit_lock(version)`` returns a context manager
                held while that version's manifest is written.
            storage_options: Backend options.
            enable_v2_manifest_paths: V2 manifest names for a new dataset (default True).
            detached: Commit a detached version: built on ``read_version``, never the latest, reached
                only by checking out the returned dataset's (random, top-bit-set) version number.
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
        if isinstance(operation, _txn.Transaction):
            txn = operation
        elif isinstance(operation, _txn.LanceOperation.BaseOperation):
            if read_version is None:
                if not isinstance(operation, (_txn.LanceOperation.Overwrite, _txn.LanceOperation.Restore)):
                    raise InvalidInputError("read_version is required for all operations except "
                                            "Overwrite and Restore")
                read_version = 0
            props = {_txn.COMMIT_MESSAGE_KEY: commit_message} if commit_message is not None else {}
            txn = _txn.Transaction(read_version, operation, transaction_properties=props)
        else:
            raise InvalidInputError(f"operation must be a LanceOperation or Transaction, got "
                                    f"{type(operation).__name__}")
        base = base_uri.manifest if isinstance(base_uri, LanceDataset) else None
        lock = check_commit_lock(commit_lock)
        if detached:
            manifest = _detached.commit_detached(store, txn, base=base, commit_lock=lock)
        else:
            manifest = _commit.commit_transaction(store, txn, max_retries=max_retries, base=base, commit_lock=lock,
                                          enable_v2_manifest_paths=enable_v2_manifest_paths is not False)
        if lock is not None:  # the returned dataset commits under the same lock (as pylance's)
            store.commit_lock = lock
        return LanceDataset._from_manifest(uri, store, manifest, storage_options)

    @staticmethod
    def commit_batch(dest: UriLike | LanceDataset, transactions: Sequence[Transaction], commit_lock: Any = None,
                     storage_options: Mapping[str, str] | None = None, enable_v2_manifest_paths: bool | None = None,
                     detached: bool | None = False, max_retries: int = 20) -> dict[str, Any]:
        """Commit ``Append`` transactions (one per worker) as one version: pylance's ``BulkCommitResult``
        ``{"dataset": ..., "merged": Transaction}``."""

        where = dest.uri if isinstance(dest, LanceDataset) else str(dest)
        merged = _batch_commit.merge_transactions(transactions, where)
        ds = LanceDataset.commit(dest, merged, commit_lock=commit_lock, storage_options=storage_options,
                                 enable_v2_manifest_paths=enable_v2_manifest_paths, detached=detached,
                                 max_retries=max_retries)
        return {"dataset": ds, "merged": merged}


#: ``lance_format.write.write_dataset``, registered by that module (it imports this one).
_WRITER: Any = None


def register_writer(writer: Any) -> None:
    """Let :meth:`LanceDataset.insert` call ``write_dataset`` without an import cycle."""
    global _WRITER
    _WRITER = writer


@register_after_commit
def _auto_cleanup(store: ObjectStore, manifest: Manifest) -> None:
    # Every commit honours ``lance.auto_cleanup.*`` as lance does (the table layer's commit
    # loop calls this; cleanup itself lives above it, in lance_format/maintenance/cleanup.py).
    if "lance.auto_cleanup.interval" in manifest.config:
        _cleanup.auto_cleanup(LanceDataset._from_manifest(store.uri(""), store, manifest))


def _fragment_list(fragments: Any) -> list[FragmentMetadata]:
    """``fragments=`` of a scan as metadata (``LanceFragment`` or ``FragmentMetadata`` items)."""
    if isinstance(fragments, (str, bytes)) or not isinstance(fragments, Iterable):
        raise InvalidInputError(f"fragments must be a list of LanceFragment, got {type(fragments).__name__}")
    out = []
    for f in fragments:
        if isinstance(f, _fragment.LanceFragment):
            out.append(f.metadata)
        elif isinstance(f, FragmentMetadata):
            out.append(f)
        else:
            raise InvalidInputError(f"fragments must hold LanceFragment or FragmentMetadata items, got "
                                    f"{type(f).__name__} {f!r:.60}")
    return out


def _reopen(uri: str, version: int, storage_options: Mapping[str, str] | None,
            branch: str | None = None) -> LanceDataset:
    if branch is None:
        return LanceDataset(uri, version, storage_options=storage_options)
    return LanceDataset(uri, storage_options=storage_options)._on_branch(branch, version)


def _delete_rows(ds: LanceDataset, predicate: str | pc.Expression) -> tuple[Manifest, int]:
    """Write deletion files for rows matching ``predicate`` and commit a Delete (see ``table.delete``)."""
    expr = _delete.require_predicate(_filter_expression(predicate, ds.schema))
    return _delete.delete_rows(ds._ctx, expr, predicate if isinstance(predicate, str) else str(predicate))


__all__ = ["AutoCleanupConfig", "CleanupStats", "ColumnOrdering", "CompactionMetrics", "DeleteResult", "LanceDataset", "LanceOperation", "Tags", "Transaction",
           "UpdateResult", "dataset"]


def _one_column(ds: LanceDataset, column: str | Sequence[str], what: str) -> str:
    """The one column an index covers (pylance accepts a one-column list)."""
    if isinstance(column, (list, tuple)):
        if len(column) != 1:
            raise NotSupportedError(f"{ds.uri}: {what}(): column must name one column, got {column!r:.80}")
        column = column[0]
    return _arg.string(column, f"{what}(): column")
