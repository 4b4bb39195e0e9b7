"""Conflict checks between our transaction and ones committed since our read version.

The matrix follows lance's ``TransactionRebase::check_*`` (``rust/lance/src/io/commit/conflict_resolver.rs``)
as pylance 14.0.2 behaves: ``tests/parity/test_conflict_matrix.py`` commits every pair with both
libraries. Rows are our operation, columns the already committed one. ``.`` = compatible (re-apply
ours on top), ``R`` = retryable conflict, ``I`` = incompatible, letters = conditional. pylance 14
is stricter than the older upstream source in a few cells: an Append, Update or Project over a
schema change (Merge / Project) is retried, as is an Overwrite over another Overwrite (``o``) and
a CreateIndex over a CreateIndex of the same index name (``n``). We differ from pylance 14 in two
cells. ``d``: a rewrite over a delete/update of its fragments is rebased. A CreateIndex over a
DataReplacement is always retried, where pylance lets it through when the index's fields are not
the replaced ones: a DataReplacement (only pylance writes one) reaches us as an
``UnknownOperation`` that records its fragments but not its fields.

UpdateConfig (measured on pylance 14.0.2, ``tests/parity/test_api_config.py``): config and table
metadata edits pass every other operation; schema or field metadata edits are retried next to a
Merge (``m``) and refused next to a Restore (``s``) or, when ours, an Overwrite (``S``); two
UpdateConfigs clash as ``_update_configs_overlap`` says (``u``). A Restore is checked like the
others when it has a read version (``LanceDataset.restore`` reads the latest); committed with
read version 0 it is blind, as in pylance.
"""

from __future__ import annotations

import enum
from typing import Any

from lance_format.errors import CommitConflictError, RetryableCommitConflictError
from lance_format.table.transaction import LanceOperation, Transaction, UnknownOperation

_COLUMNS = (
    "append", "delete", "update", "overwrite", "create_index", "rewrite", "merge", "project", "restore",
    "reserve_fragments", "update_config", "data_replacement", "update_mem_wal_state", "clone", "update_bases",
)

_MATRIX: dict[str, tuple[str, ...]] = {
    "append":            (".", ".", ".", "I", ".", ".", "R", "R", "I", ".", ".", ".", "I", ".", "."),
    "delete":            (".", "a", "a", "I", ".", "b", "R", ".", "I", ".", ".", "b", "I", ".", "."),
    "update":            (".", "a", "a", "I", ".", "b", "R", "R", "I", ".", ".", "b", "I", ".", "."),
    "overwrite":         (".", ".", ".", "o", ".", ".", ".", ".", ".", ".", "k", ".", "I", ".", "."),
    "create_index":      (".", ".", ".", "I", "n", "c", ".", ".", "I", ".", ".", "R", "I", ".", "."),
    "rewrite":           (".", "d", "d", "I", "c", "e", "R", ".", "I", ".", ".", "b", ".", ".", "."),
    "merge":             ("R", "R", "R", "I", ".", "R", "R", "I", "I", ".", "m", "R", "I", ".", "."),
    "project":           ("R", ".", "R", "I", ".", ".", "R", "R", "I", ".", ".", "R", "I", ".", "."),
    "restore":           (".", ".", ".", ".", ".", ".", ".", ".", ".", ".", "s", ".", "I", ".", "."),
    "reserve_fragments": (".", ".", ".", "I", ".", ".", ".", ".", "I", ".", ".", ".", ".", ".", "."),
    "update_config":     (".", ".", ".", "S", ".", ".", "m", ".", "s", ".", "u", ".", ".", ".", "."),
}

FRAG_REUSE_INDEX = "__lance_frag_reuse"


class Outcome(enum.Enum):
    """Result of checking one pair of transactions."""

    COMPATIBLE = "compatible"
    #: Both touched the same fragments through deletion vectors only: merge them.
    REBASE_DELETIONS = "rebase_deletions"
    RETRYABLE = "retryable"
    INCOMPATIBLE = "incompatible"


def touched_fragment_ids(op: LanceOperation.BaseOperation) -> set[int]:
    """Existing fragment ids an operation modifies or removes."""
    L = LanceOperation
    if isinstance(op, L.Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, L.Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, L.Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    if isinstance(op, UnknownOperation):
        return set(op.fragment_ids)  # e.g. data_replacement written by pylance
    return set()


def _files_changed(op: LanceOperation.BaseOperation, ids: set[int], base_files: dict[int, Any]) -> bool:
    """Whether ``op`` changed the data files (not just deletions) of any fragment in ``ids``."""
    L = LanceOperation
    if isinstance(op, L.Update) and set(op.removed_fragment_ids) & ids:
        return True
    if isinstance(op, L.Delete) and set(op.deleted_fragment_ids) & ids:
        return True
    for frag in getattr(op, "updated_fragments", ()):
        if frag.id in ids and base_files.get(frag.id) != frag.files:
            return True
    return False


def check(mine: Transaction, theirs: Transaction, base_files: dict[int, Any]) -> Outcome:
    """Classify ``mine`` against an already committed ``theirs``.

    Args:
        mine: The transaction being committed.
        theirs: A transaction committed after ``mine.read_version``.
        base_files: ``{fragment id: files}`` of the version ``mine`` read.
    """
    my_kind = mine.operation.kind
    their_kind = theirs.operation.kind
    row = _MATRIX.get(my_kind)
    if row is None:
        return Outcome.INCOMPATIBLE
    cell = row[_COLUMNS.index(their_kind)] if their_kind in _COLUMNS else "I"
    if cell == ".":
        return Outcome.COMPATIBLE
    if cell == "R":
        return Outcome.RETRYABLE
    if cell == "I":
        return Outcome.INCOMPATIBLE
    mo, to = mine.operation, theirs.operation
    if cell == "a":
        shared = touched_fragment_ids(mo) & touched_fragment_ids(to)
        if not shared:
            return Outcome.COMPATIBLE
        if _files_changed(to, shared, base_files) or _files_changed(mo, shared, base_files):
            return Outcome.RETRYABLE
        return Outcome.REBASE_DELETIONS
    if cell == "b":
        shared = touched_fragment_ids(mo) & touched_fragment_ids(to)
        return Outcome.RETRYABLE if shared else Outcome.COMPATIBLE
    if cell == "d":
        # Our rewrite against their delete/update: their deletions can be carried to our new
        # fragments (lance_format.table.rebase.RewriteRebase) unless they rewrote a shared
        # fragment's data files in place. lance 14 makes every shared pair retryable.
        shared = touched_fragment_ids(mo) & touched_fragment_ids(to)
        if not shared:
            return Outcome.COMPATIBLE
        rewritten = any(f.id in shared and base_files.get(f.id) != f.files
                        for f in getattr(to, "updated_fragments", ()))
        return Outcome.RETRYABLE if rewritten else Outcome.REBASE_DELETIONS
    if cell == "e":
        shared = touched_fragment_ids(mo) & touched_fragment_ids(to)
        return Outcome.RETRYABLE if shared else Outcome.COMPATIBLE
    if cell == "c":
        index_op, rewrite = (mo, to) if my_kind == "create_index" else (to, mo)
        old = touched_fragment_ids(rewrite)
        for idx in getattr(index_op, "new_indices", ()):
            if idx.fragment_bitmap is None or idx.fragment_bitmap & old:
                return Outcome.RETRYABLE
        return Outcome.COMPATIBLE
    if cell == "n":
        # Two segments of one index name built side by side would both claim the name (the
        # ``__lance_frag_reuse`` entry included): the later one rebuilds on the new version.
        def names(op: Any) -> set[str]:
            return {i.name for i in op.new_indices}
        return Outcome.RETRYABLE if names(mo) & names(to) else Outcome.COMPATIBLE
    if cell == "o":
        # An Overwrite built on a version another Overwrite replaced would silently drop it.
        return Outcome.INCOMPATIBLE if _config_keys(mo) & _config_keys(to) else Outcome.RETRYABLE
    if cell == "k":
        return Outcome.INCOMPATIBLE if _config_keys(mo) & _config_keys(to) else Outcome.COMPATIBLE
    uc = mo if my_kind == "update_config" else to
    schema_edit = isinstance(uc, LanceOperation.UpdateConfig) and uc.touches_schema
    if cell == "m":
        # Schema or field metadata edited next to a Merge (a new schema) is retried on it.
        return Outcome.RETRYABLE if schema_edit else Outcome.COMPATIBLE
    if cell == "s":
        # ... and refused next to a Restore, whose schema would silently win or lose.
        return Outcome.INCOMPATIBLE if schema_edit else Outcome.COMPATIBLE
    if cell == "S":
        if schema_edit or _config_keys(mo) & _config_keys(to):
            return Outcome.INCOMPATIBLE
        return Outcome.COMPATIBLE
    if cell == "u":
        return Outcome.INCOMPATIBLE if _update_configs_overlap(mo, to) else Outcome.COMPATIBLE
    return Outcome.INCOMPATIBLE


def _map_keys(m: LanceOperation.UpdateMap | None) -> set[str]:
    return set(m.updates) if m is not None else set()


def _update_configs_overlap(a: LanceOperation.BaseOperation, b: LanceOperation.BaseOperation) -> bool:
    """Whether two UpdateConfigs edit the same thing (pylance 14.0.2, measured pair by pair).

    Config and table metadata clash by key (a ``replace`` counts only its listed keys), schema
    metadata whenever both edit it, field metadata when both edit the same field.
    """
    if not (isinstance(a, LanceOperation.UpdateConfig) and isinstance(b, LanceOperation.UpdateConfig)):
        return True
    if _map_keys(a.config_updates) & _map_keys(b.config_updates):
        return True
    if _map_keys(a.table_metadata_updates) & _map_keys(b.table_metadata_updates):
        return True
    if a.schema_metadata_updates is not None and b.schema_metadata_updates is not None:
        return True
    return bool(set(a.field_metadata_updates or {}) & set(b.field_metadata_updates or {}))


def _config_keys(op: LanceOperation.BaseOperation) -> set[str]:
    if isinstance(op, LanceOperation.Overwrite):
        return set(op.config_upsert_values or {})
    if isinstance(op, LanceOperation.UpdateConfig):
        return _map_keys(op.config_updates)
    if isinstance(op, UnknownOperation):
        return set(op.config_keys)
    return set()


def raise_for(outcome: Outcome, mine: Transaction, theirs: Transaction, their_version: int) -> None:
    """Raise the error for a failed check, naming both operations."""
    what = (f"{mine.operation.kind} (read version {mine.read_version}) conflicts with "
            f"{theirs.operation.kind} committed as version {their_version}")
    if outcome is Outcome.RETRYABLE:
        raise RetryableCommitConflictError(f"commit conflict: {what}; retry the operation on the new version")
    if outcome is Outcome.INCOMPATIBLE:
        raise CommitConflictError(f"commit conflict: {what}")
