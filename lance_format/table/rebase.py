"""Rebasing a transaction over concurrent deletes: merge deletion vectors instead of failing.

* :class:`DeletionRebase`, a Delete/Update over a concurrent Delete/Update of the same
  fragments: when both only changed deletion vectors, lance merges the two vectors and
  retries (Delete/Update against Delete/Update in rust/lance/src/io/commit/conflict_resolver.rs).
  If both deleted the same row, the commit is a retryable conflict instead.
* :class:`RewriteRebase`, a compaction's Rewrite over deletes/updates committed while it ran:
  the rows they deleted from the old fragments are deleted from the new fragments too (each
  old row's new address is known: the surviving rows of a group's old fragments land in its
  new fragments in order). lance 14 refuses this pair instead (a retryable conflict), which
  starves compaction under continuous deletes; carrying the deletions over keeps both.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from lance_format.errors import RetryableCommitConflictError
from lance_format.storage import ObjectStore
from lance_format.table import deletion as _deletion
from lance_format.table.discard import discard_keys
from lance_format.table.manifest import Manifest
from lance_format.table.models import FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction


def _offsets(store: ObjectStore, frag: FragmentMetadata | None) -> npt.NDArray[np.uint32]:
    if frag is None or frag.deletion_file is None:
        return np.empty(0, dtype=np.uint32)
    return _deletion.read_deletion_file(store, frag.id, frag.deletion_file, physical_rows=frag.physical_rows)


class Rebase:
    """State shared by the rebasers: fragments as last seen, and the deletion files written."""

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
        return discard_keys(store, gone)

    def _write(self, store: ObjectStore, frag: FragmentMetadata, read_version: int,
               deleted: npt.NDArray[np.uint32]) -> FragmentMetadata:
        deletion, key = _deletion.write_fragment_deletions(store, frag.id, read_version, deleted,
                                                           frag.deletion_file)
        self._written[(frag.id, deletion.id)] = key
        return dataclasses.replace(frag, deletion_file=deletion)


class DeletionRebase(Rebase):
    """Delete/Update over Delete/Update: remembers each shared fragment as last seen, version after version."""

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
            updated[i] = self._write(store, dataclasses.replace(mine, deletion_file=current.deletion_file),
                                     txn.read_version, merged)
        kept = [f for f in updated if f is not None]
        new_op: LanceOperation.BaseOperation
        if isinstance(op, LanceOperation.Delete):
            new_op = LanceOperation.Delete(kept, removed, op.predicate)
        else:
            new_op = dataclasses.replace(op, updated_fragments=kept, removed_fragment_ids=removed)
        return dataclasses.replace(txn, operation=new_op)


class RewriteRebase(Rebase):
    """A Rewrite (compaction) over deletes/updates committed since its read version.

    Stateful like :class:`DeletionRebase`: one instance follows one Rewrite through every
    newer version, in order.

    The rows those commits deleted from a group's old fragments are deleted from its new
    fragments (see the module docstring). A rewrite whose new fragments do not hold exactly
    the surviving rows of its old fragments cannot be mapped, and stays a retryable conflict.
    """

    def __init__(self, base: Manifest):
        super().__init__(base)
        # Row positions come from the groups as planned: a later call sees groups whose
        # removed old fragments were already dropped.
        self._planned: list[LanceOperation.RewriteGroup] | None = None

    def __call__(self, store: ObjectStore, txn: Transaction, theirs: Manifest, base: Manifest) -> Transaction:
        """Return ``txn`` with the deletions committed in ``theirs`` carried to its new fragments."""
        del base
        op = txn.operation
        if not isinstance(op, LanceOperation.Rewrite):
            return txn
        if self._planned is None:
            self._planned = list(op.groups)
        groups = [self._group(store, planned, g, theirs, txn.read_version)
                  for planned, g in zip(self._planned, op.groups, strict=True)]
        return dataclasses.replace(txn, operation=dataclasses.replace(op, groups=groups))

    def _group(self, store: ObjectStore, planned: LanceOperation.RewriteGroup, group: LanceOperation.RewriteGroup,
               theirs: Manifest, read_version: int) -> LanceOperation.RewriteGroup:
        hits: list[npt.NDArray[np.int64]] = []  # positions among the group's surviving rows
        survivors = 0
        removed: set[int] = set()  # old fragments a delete or update removed whole
        for old in planned.old_fragments:
            live = np.setdiff1d(np.arange(old.physical_rows, dtype=np.uint32), _offsets(store, old))
            before = self._seen.get(old.id, old)
            current = theirs.fragment(old.id)
            if before is not None and (current is None or current.deletion_file != before.deletion_file):
                if current is not None and current.files != old.files:
                    raise RetryableCommitConflictError(
                        f"commit conflict: version {theirs.version} changed the data files of fragment "
                        f"{old.id}, which this compaction rewrites")
                # A fragment removed by a delete or update lost every row.
                dead = live if current is None else np.intersect1d(live, _offsets(store, current))
                hits.append(survivors + np.searchsorted(live, dead).astype(np.int64))
                self._seen[old.id] = current
            if self._seen.get(old.id, old) is None:
                removed.add(old.id)
            survivors += int(live.size)
        if not hits:
            return LanceOperation.RewriteGroup([f for f in planned.old_fragments if f.id not in removed],
                                               group.new_fragments)
        if sum(f.physical_rows for f in group.new_fragments) != survivors:
            raise RetryableCommitConflictError(
                f"commit conflict: version {theirs.version} deleted rows of fragments "
                f"{sorted(f.id for f in group.old_fragments)}, whose rewrite does not keep their rows in order")
        positions = np.concatenate(hits)
        new_frags = list(group.new_fragments)
        start = 0
        for i, frag in enumerate(new_frags):
            end = start + frag.physical_rows
            mine = positions[(positions >= start) & (positions < end)] - start
            start = end
            if not mine.size:
                continue
            merged = np.union1d(_offsets(store, frag), mine.astype(np.uint32))
            new_frags[i] = self._write(store, frag, read_version, merged)
        # A removed fragment is no longer there to replace; its rows are deleted in the new ones.
        return LanceOperation.RewriteGroup([f for f in planned.old_fragments if f.id not in removed], new_frags)


def rebaser_for(txn: Transaction, base: Manifest) -> DeletionRebase | RewriteRebase | None:
    """The rebaser that can carry concurrent deletions into ``txn``, or ``None`` if none can."""
    if isinstance(txn.operation, (LanceOperation.Delete, LanceOperation.Update)):
        return DeletionRebase(base)
    if isinstance(txn.operation, LanceOperation.Rewrite):
        return RewriteRebase(base)
    return None
