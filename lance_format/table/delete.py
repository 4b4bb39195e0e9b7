"""The delete pipeline: find matching rows, write deletion vectors, commit a Delete.

Works on a :class:`~lance_format.table.read.ReadContext` (the table state of one
version); ``LanceDataset.delete`` and ``LanceFragment.delete`` are thin wrappers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import numbers
from lance_format.errors import CommitConflictError, InvalidInputError
from lance_format.table import deletion as _deletion
from lance_format.table.commit import commit_transaction
from lance_format.table.discard import discard_keys
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import ROW_ADDR, ROW_ID, ReadContext
from lance_format.table.scan import Scan, ScanOptions, apply_filter, referenced_columns
from lance_format.table.transaction import LanceOperation, Transaction

#: Rows (and bytes) gathered before the delete predicate is evaluated once over all
#: of them: one compute plan per chunk instead of one per fragment, bounded memory.
DELETE_CHUNK_ROWS = 1 << 20
DELETE_CHUNK_BYTES = 64 << 20
#: Rows per batch of the scans that find the rows to delete: they read only the predicate's
#: columns, so large batches stay small in bytes and spare the per-batch work (row addresses,
#: slicing) that dominated a 1M-row delete at the default 8,192 rows.
DELETE_SCAN_BATCH_ROWS = 1 << 17

_LOW32 = np.uint64(0xFFFFFFFF)


def by_fragment(addresses: npt.NDArray[np.uint64]) -> Iterator[tuple[int, npt.NDArray[np.uint64]]]:
    """Split row ``addresses`` grouped by fragment (sorted, say) into ``(fragment id, its addresses)`` runs."""
    if addresses.size == 0:
        return
    frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
    cuts = np.flatnonzero(np.diff(frag_ids)) + 1
    for part in np.split(addresses, cuts):
        yield int(part[0] >> np.uint64(32)), part


def delete_from_fragment(ctx: ReadContext, frag: FragmentMetadata, expr: pc.Expression
                         ) -> tuple[FragmentMetadata | None, int]:
    """Write the deletion file for rows of ``frag`` matching ``expr`` (nothing is committed).

    Returns:
        ``(metadata, rows newly deleted)``; metadata is ``None`` when every row is now
        deleted (the fragment is to be dropped) and ``frag`` itself when nothing matched.
    """
    opts = ScanOptions(referenced_columns(expr, ctx.arrow_schema.names), expr, with_row_address=True,
                       fragments=[frag], batch_size=DELETE_SCAN_BATCH_ROWS)
    hits = [numbers(b.column(ROW_ADDR)) for b in Scan(ctx, opts).to_batches()]  # to_numpy imports pandas
    new = (np.concatenate(hits) & _LOW32).astype(np.uint32) if hits else None
    return apply_deletions(ctx, frag, new)


def apply_deletions(ctx: ReadContext, frag: FragmentMetadata, new: npt.NDArray[np.uint32] | None
                    ) -> tuple[FragmentMetadata | None, int]:
    """Add the (live) row offsets ``new`` to ``frag``'s deletion vector and write its file.

    Returns:
        As :func:`delete_from_fragment`.
    """
    if new is None or new.size == 0:
        return frag, 0
    # numpy 2's union1d hashes before sorting: tens of ms per 100k offsets; sorted_unique sorts once.
    merged = _deletion.sorted_unique(np.concatenate((ctx.deleted_offsets(frag), new.astype(np.uint32, copy=False))))
    if merged.size >= frag.physical_rows:
        return None, int(new.size)
    deletion, _key = _deletion.write_fragment_deletions(ctx.store, frag.id, ctx.manifest.version, merged,
                                                        frag.deletion_file)
    return dataclasses.replace(frag, deletion_file=deletion), int(new.size)


def matching_offsets(ctx: ReadContext, expr: pc.Expression) -> Iterator[tuple[int, npt.NDArray[np.uint32]]]:
    """Yield ``(fragment id, sorted live row offsets matching expr)`` for fragments with matches.

    Only the columns ``expr`` references are read; deleted rows are skipped. Matches
    of one fragment are yielded together, in fragment order.
    """
    names = ctx.arrow_schema.names
    text = str(expr)
    opts = ScanOptions(referenced_columns(expr, names), None, with_row_id=ROW_ID in text,
                       with_row_address=True, batch_size=DELETE_SCAN_BATCH_ROWS)
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    carry: tuple[int, list[npt.NDArray[np.uint64]]] | None = None

    def flush() -> Iterator[tuple[int, npt.NDArray[np.uint32]]]:
        nonlocal carry
        table = pa.Table.from_batches(pending)
        pending.clear()
        hit = numbers(apply_filter(table, expr).column(ROW_ADDR))
        for fid, part in by_fragment(hit):
            if carry is not None and carry[0] != fid:
                yield carry[0], (np.concatenate(carry[1]) & _LOW32).astype(np.uint32)
                carry = None
            if carry is None:
                carry = (fid, [])
            carry[1].append(part)

    for batch in Scan(ctx, opts).to_batches():
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= DELETE_CHUNK_ROWS or size >= DELETE_CHUNK_BYTES:
            yield from flush()
            rows = size = 0
    if pending:
        yield from flush()
    if carry is not None:
        yield carry[0], (np.concatenate(carry[1]) & _LOW32).astype(np.uint32)


def delete_rows(ctx: ReadContext, expr: pc.Expression, predicate_text: str) -> tuple[Manifest, int]:
    """Write deletion files for rows matching ``expr`` and commit a Delete on ``ctx``'s version.

    Returns:
        The committed manifest and the number of rows deleted.

    Raises:
        CommitConflictError: if a concurrent commit conflicts (the deletion files written
            are removed first).
    """
    manifest, store = ctx.manifest, ctx.store
    updated: list[FragmentMetadata] = []
    removed: list[int] = []
    total = 0
    by_id = {f.id: f for f in manifest.fragments}
    # Refuse before any deletion file is written, so a refused delete leaves no orphans.
    check_feature_flags(manifest, store.uri(""), for_write=True)

    def one(item: tuple[int, npt.NDArray[np.uint32]]) -> tuple[int, FragmentMetadata | None, int]:
        return (item[0], *apply_deletions(ctx, by_id[item[0]], item[1]))

    # The predicate is evaluated over many fragments at once; then each fragment with
    # matches gets its deletion file. On a remote store those writes overlap (they are
    # latency-bound); on a local disk threads measured slower (the creates serialize
    # in the file system and the GIL), so they are done in order.
    matches = matching_offsets(ctx, expr)
    pool: ThreadPoolExecutor | None = None
    results: Iterator[tuple[int, FragmentMetadata | None, int]]
    if ctx.low_latency:
        results = map(one, matches)
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
    txn = Transaction(manifest.version, LanceOperation.Delete(updated, removed, predicate_text))
    try:
        return commit_transaction(store, txn, base=manifest), total
    except CommitConflictError:
        # Raised only before the manifest is put: the deletion files written above are
        # referenced by no version, so remove them (a retry writes fresh ones).
        discard_keys(store, [meta.deletion_file.path(meta.id) for meta in updated
                             if meta.deletion_file is not None and meta.deletion_file != by_id[meta.id].deletion_file])
        raise


def require_predicate(expr: Any) -> pc.Expression:
    """``expr`` if it is a predicate; deleting needs one.

    Raises:
        InvalidInputError: for ``None``.
    """
    if expr is None:
        raise InvalidInputError("delete() needs a predicate")
    return expr


__all__ = [
    "DELETE_CHUNK_BYTES",
    "DELETE_CHUNK_ROWS",
    "DELETE_SCAN_BATCH_ROWS",
    "apply_deletions",
    "by_fragment",
    "delete_from_fragment",
    "delete_rows",
    "matching_offsets",
    "require_predicate",
]
