"""Building blocks of row-rewriting operations (merge_insert, update, replace_where).

Each of them ends the same way: delete some existing rows through deletion vectors,
write replacement/new rows as new fragments, and commit one ``Update`` transaction
(``update_mode`` REWRITE_ROWS, as pylance 14.0.2 writes for merge_insert and update).
A commit that loses against a conflicting concurrent writer removes every file the
attempt wrote, then the whole operation is re-run on the newest version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import RetryableCommitConflictError
from lance_format.scanner import LanceScanner
from lance_format.table.commit import commit_transaction
from lance_format.table.delete import apply_deletions, by_fragment
from lance_format.table.discard import discard_keys
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import DELETIONS_DIR, data_file_key
from lance_format.table.rebase import DeletionRebase
from lance_format.table.rowids import encode_row_ids, encode_versions
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.writing import write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

T = TypeVar("T")

#: Upper bound of rows per new fragment (pylance's default ``max_rows_per_file``).
MAX_ROWS_PER_FILE = 1024 * 1024
#: Rows per step of the whole-table scans these operations run (fewer, larger
#: decode and filter calls than the default 8192; the result is materialized anyway).
SCAN_BATCH = 65536


@dataclass(frozen=True)
class RowChanges:
    """What one attempt wrote and wants to commit."""

    updated_fragments: tuple[FragmentMetadata, ...]
    removed_fragment_ids: tuple[int, ...]
    new_fragments: tuple[FragmentMetadata, ...]
    written_keys: tuple[str, ...]  # store keys of every file written (for cleanup)


def delete_addresses(ds: LanceDataset, addresses: npt.NDArray[np.uint64]
                     ) -> tuple[list[FragmentMetadata], list[int], list[str]]:
    """Write deletion vectors for row ``addresses`` (``fragment id << 32 | offset``).

    Returns:
        ``(updated fragments, ids of fragments now fully deleted, written keys)``.
    """

    updated: list[FragmentMetadata] = []
    removed: list[int] = []
    keys: list[str] = []
    if addresses.size == 0:
        return updated, removed, keys
    for fid, part in by_fragment(np.unique(addresses)):
        frag = ds.manifest.fragment(fid)
        assert frag is not None, f"row address of unknown fragment {fid}"
        offsets = (part & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        meta, _n = apply_deletions(ds._ctx, frag, offsets)
        if meta is None:
            removed.append(fid)
        else:
            updated.append(meta)
            if meta.deletion_file is not None:
                keys.append(meta.deletion_file.path(meta.id))
    return updated, removed, keys


def write_rows(ds: LanceDataset, table: pa.Table, *, row_ids: npt.NDArray[np.uint64] | None = None,
               created_at: npt.NDArray[np.uint64] | None = None,
               file_limits: Mapping[str, int] | None = None) -> tuple[list[FragmentMetadata], list[str]]:
    """Write ``table`` (already in the dataset's Arrow schema) as new, uncommitted fragments.

    ``file_limits`` may hold ``max_rows_per_file``, ``max_rows_per_group`` and
    ``max_bytes_per_file`` (``write_dataset``'s meaning; pylance's defaults otherwise).

    With stable row ids, ``row_ids`` are the ids the first rows keep (rows moved by an
    update); like pylance the new fragment then carries only those ids and the commit
    assigns fresh ids to the rest (``_complete_moved_rows`` in table/commit.py). ``created_at``
    holds the creation version of each kept row.

    Returns:
        ``(fragments, written keys relative to the dataset root)``.
    """

    if table.num_rows == 0:
        return [], []
    schema = ds.lance_schema
    target = ds.schema
    table = table.select(target.names)
    if not table.schema.equals(target):
        table = table.cast(target)
    limits = {"max_rows_per_file": MAX_ROWS_PER_FILE, **(file_limits or {})}
    frags = write_fragment_files(ds._store, target, iter(table.to_batches(max_chunksize=1024)), schema,
                                 data_storage_version=ds.data_storage_version, **limits)
    keys = [data_file_key(df.path) for f in frags for df in f.files]
    if row_ids is not None and ds.has_stable_row_ids and row_ids.size:
        out = []
        start = 0
        for frag in frags:
            stop = min(start + frag.physical_rows, int(row_ids.size))
            if stop > start:
                ids = row_ids[start:stop]
                meta: dict[str, Any] = {"row_id_meta": encode_row_ids(ids)}
                if created_at is not None:
                    meta["created_at_version_meta"] = encode_versions(created_at[start:stop])
                frag = _replace(frag, **meta)
            out.append(frag)
            start += frag.physical_rows
        frags = out
    return frags, keys


def _replace(frag: FragmentMetadata, **changes: Any) -> FragmentMetadata:
    import dataclasses

    return dataclasses.replace(frag, **changes)


def rewrite_rows(ds: LanceDataset, gone: npt.NDArray[np.uint64], new_rows: pa.Table, *,
                 row_ids: npt.NDArray[np.uint64] | None, created_at: npt.NDArray[np.uint64] | None,
                 fields_for_preserving_frag_bitmap: Sequence[int],
                 properties: dict[str, str] | None = None,
                 file_limits: Mapping[str, int] | None = None) -> Manifest:
    """Delete the rows at ``gone`` and write ``new_rows``, committed as one ``Update``.

    The shared step of ``update`` and ``merge_insert``: ``row_ids`` / ``created_at`` are
    those of the rows moved (see :func:`write_rows`). Files of a failed attempt are removed.
    """
    updated, removed, keys = delete_addresses(ds, gone)
    try:
        frags, data_keys = write_rows(ds, new_rows, row_ids=row_ids, created_at=created_at,
                                      file_limits=file_limits)
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    changes = RowChanges(tuple(updated), tuple(removed), tuple(frags), tuple(keys + data_keys))
    return commit_changes(ds, changes, fields_for_preserving_frag_bitmap=fields_for_preserving_frag_bitmap,
                          properties=properties)


def commit_changes(ds: LanceDataset, changes: RowChanges, *, fields_for_preserving_frag_bitmap: Sequence[int],
                   properties: dict[str, str] | None = None) -> Manifest:
    """Commit ``changes`` as one ``Update`` transaction built on ``ds``'s version.

    Concurrent deletes/updates of other rows of the same fragments are merged (their
    deletion vectors are combined); anything else that conflicts raises and the files
    of this attempt are removed.

    Raises:
        RetryableCommitConflictError: re-run the operation on the newest version.
        CommitConflictError: an incompatible concurrent commit.
    """
    op = LanceOperation.Update(
        removed_fragment_ids=changes.removed_fragment_ids,
        updated_fragments=changes.updated_fragments,
        new_fragments=changes.new_fragments,
        fields_modified=(),
        fields_for_preserving_frag_bitmap=tuple(fields_for_preserving_frag_bitmap),
        update_mode="rewrite_rows",
    )
    txn = Transaction(ds.version, op, transaction_properties=dict(properties or {}))
    try:
        manifest = commit_transaction(ds._store, txn, base=ds.manifest,
                                      rebase_deletions=DeletionRebase(ds.manifest))
    except BaseException:
        discard_keys(ds._store, changes.written_keys)
        raise
    # A rebase over a concurrent delete/update replaced some of our deletion vectors by
    # merged ones: the originals are referenced by no version, so remove them.
    kept = {f.deletion_file.path(f.id) for f in manifest.fragments if f.deletion_file is not None}
    discard_keys(ds._store, [k for k in changes.written_keys if k.startswith(f"{DELETIONS_DIR}/") and k not in kept])
    return manifest


def with_retries(ds: LanceDataset, attempt: Callable[[LanceDataset], T], conflict_retries: int) -> T:
    """Run ``attempt`` on ``ds`` and, after a retryable conflict, on the newest version again."""
    check_feature_flags(ds.manifest, ds._store.uri(""), for_write=True)
    for n in range(conflict_retries + 1):
        current = ds if n == 0 else ds.checkout_latest()
        try:
            return attempt(current)
        except RetryableCommitConflictError:
            if n == conflict_retries:
                raise
    raise AssertionError("unreachable")


#: Fragments scanned at the same time by :func:`scan_fragments_concurrently`.
SCAN_THREADS = 2


def scan_fragments_concurrently(ds: LanceDataset, opts: Any) -> pa.Table:
    """The result of scanning ``opts`` (no limit/offset), fragments decoded by a few threads.

    Page decoding spends most of its time in numpy/pyarrow outside the GIL, so fragments
    overlap; the pieces are concatenated in fragment order, as one sequential scan orders them.
    """
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor


    frags = list(ds.manifest.fragments) if opts.fragments is None else list(opts.fragments)
    if len(frags) <= 1:
        return LanceScanner(ds._ctx, opts).to_table()

    def one(frag: Any) -> pa.Table:
        return LanceScanner(ds._ctx, dataclasses.replace(opts, fragments=[frag])).to_table()

    with ThreadPoolExecutor(max_workers=SCAN_THREADS) as pool:
        parts = list(pool.map(one, frags))
    return pa.concat_tables(parts)
