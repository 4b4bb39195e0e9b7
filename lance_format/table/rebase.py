"""Rebasing a Delete/Update over a concurrent Delete/Update of the same fragments.

When both transactions only changed deletion vectors of a shared fragment, lance merges
the two vectors and retries (Delete/Update against Delete/Update in
rust/lance/src/io/commit/conflict_resolver.rs). If both deleted the same row, the
commit is a retryable conflict instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from lance_format.errors import LanceError, RetryableCommitConflictError
from lance_format.storage import ObjectStore
from lance_format.table import deletion as _deletion
from lance_format.table.manifest import Manifest
from lance_format.table.models import FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction


def _offsets(store: ObjectStore, frag: FragmentMetadata | None) -> npt.NDArray[np.uint32]:
    if frag is None or frag.deletion_file is None:
        return np.empty(0, dtype=np.uint32)
    return _deletion.read_deletion_file(store, frag.id, frag.deletion_file, physical_rows=frag.physical_rows)


class DeletionRebase:
    """Stateful rebaser: remembers each shared fragment as last seen, version after version."""

    def __init__(self, base: Manifest):
        self._seen: dict[int, FragmentMetadata | None] = {f.id: f for f in base.fragments}
        # (fragment id, file id) -> key of every deletion file this rebaser wrote
        self._written: dict[tuple[int, int], str] = {}

    def discard_written(self, store: ObjectStore, committed: Manifest | None) -> list[str]:
        """Delete the deletion files this rebaser wrote that ``committed`` does not reference.

        Call it once the commit is over: with the committed manifest on success (drops the
        vectors later rebases superseded), with ``None`` when the commit gave up (drops all).
        The files have random, create-only names, so no other writer can reference them.
        Cleanup is best effort: a failed delete leaves an orphan, never an error.

        Returns:
            The keys that were deleted.
        """
        keep: set[tuple[int, int]] = set()
        if committed is not None:
            keep = {(f.id, f.deletion_file.id) for f in committed.fragments if f.deletion_file is not None}
        gone = [key for ident, key in self._written.items() if ident not in keep]
        self._written.clear()
        deleted = []
        for key in gone:
            try:
                store.delete(key)
            except LanceError:
                continue
            deleted.append(key)
        return deleted

    def __call__(self, store: ObjectStore, txn: Transaction, theirs: Manifest, base: Manifest) -> Transaction:
        """Return ``txn`` with its deletion vectors merged into those committed in ``theirs``."""
        del base
        op = txn.operation
        if not isinstance(op, (LanceOperation.Delete, LanceOperation.Update)):
            return txn
        updated = list(op.updated_fragments)
        removed = list(op.deleted_fragment_ids if isinstance(op, LanceOperation.Delete)
                       else op.removed_fragment_ids)
        for i, mine in enumerate(updated):
            current = theirs.fragment(mine.id)
            before = self._seen.get(mine.id)
            if current is None:
                raise RetryableCommitConflictError(
                    f"commit conflict: fragment {mine.id} was removed by version {theirs.version}")
            if before is not None and current.deletion_file == before.deletion_file:
                continue  # this version did not touch the fragment
            old = _offsets(store, before)
            ours_new = np.setdiff1d(_offsets(store, mine), old)
            theirs_all = _offsets(store, current)
            if np.intersect1d(ours_new, np.setdiff1d(theirs_all, old)).size:
                raise RetryableCommitConflictError(
                    f"commit conflict: {op.kind} and the delete/update of version {theirs.version} "
                    f"both changed the same rows of fragment {mine.id}")
            merged = np.union1d(theirs_all, ours_new)
            self._seen[mine.id] = current
            if merged.size >= mine.physical_rows:
                removed.append(mine.id)
                updated[i] = None  # type: ignore[call-overload]
                continue
            deletion, key = _deletion.write_fragment_deletions(store, mine.id, txn.read_version, merged,
                                                               current.deletion_file)
            self._written[(mine.id, deletion.id)] = key
            updated[i] = dataclasses.replace(mine, deletion_file=deletion)
        kept = [f for f in updated if f is not None]
        new_op: LanceOperation.BaseOperation
        if isinstance(op, LanceOperation.Delete):
            new_op = LanceOperation.Delete(kept, removed, op.predicate)
        else:
            new_op = dataclasses.replace(op, updated_fragments=kept, removed_fragment_ids=removed)
        return dataclasses.replace(txn, operation=new_op)
