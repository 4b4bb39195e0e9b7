"""Maintenance steps on one dataset, on top of ``lance_format``'s plan → execute → commit API.

Each step returns a frozen outcome the ops turn into Dagster events. Rewrite tasks fan out through
a ``lance_format.maintenance.Runner`` (Spark or local threads); commits happen here, on the driver,
once per step. A compaction that loses a commit race to a concurrent writer is planned again on the
new latest version, so a racing materialization never loses rows.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lance_format
from lance_format import LanceDataset
from lance_format.errors import RetryableCommitConflictError
from lance_format.maintenance.compaction import (
    Compaction,
    CompactionOptions,
    execute_compaction_task,
)
from lance_format.maintenance.runner import Runner

from ..coverage import unmaintained_indices

#: How often a compaction is planned again after losing a commit race.
COMPACTION_ATTEMPTS = 3


@dataclass(frozen=True)
class CompactionOutcome:
    """What one compaction did (or, in a dry run, would do).

    Attributes:
        uri: dataset URI.
        dry_run: nothing was written or committed.
        read_version: version the committed plan was made on.
        new_version: version the compaction committed, ``None`` if nothing was committed.
        tasks: rewrite tasks planned.
        fragments_before: fragments in ``read_version``.
        fragments_after: fragments in the new version (planned count in a dry run).
        fragments_rewritten: source fragments replaced.
        files_added: data files written.
        files_removed: data and deletion files the new version no longer references.
        rows_rewritten: live rows copied (planned live rows in a dry run).
        bytes_written: size of the new data files.
        indices_remapped: indices rewritten (or given a fragment-reuse entry) by the commit.
        attempts: plans made (more than one when a concurrent commit won a race).
        duration_s: wall time of the step.
    """

    uri: str
    dry_run: bool
    read_version: int
    new_version: int | None
    tasks: int
    fragments_before: int
    fragments_after: int
    fragments_rewritten: int
    files_added: int
    files_removed: int
    rows_rewritten: int
    bytes_written: int
    indices_remapped: int
    attempts: int
    duration_s: float


def open_latest(uri: str, storage_options: Mapping[str, str] | None) -> LanceDataset:
    """Open the dataset at ``uri`` at its latest version."""
    return lance_format.dataset(uri, storage_options=dict(storage_options) if storage_options else None)


def _rewritten_indices(ds: LanceDataset, version: int) -> int:
    # The Rewrite transaction lists every index it remapped (or gave a fragment-reuse entry).
    txn = ds.read_transaction(version)
    op = getattr(txn, "operation", None)
    return len(getattr(op, "rewritten_indices", None) or ())


def _planned_rows(plan: Any) -> int:
    return sum(f.physical_rows - f.num_deletions for task in plan.tasks for f in task.fragments)


def compact(
    dataset: LanceDataset,
    *,
    options: CompactionOptions,
    runner: Runner,
    dry_run: bool,
    transaction_properties: Mapping[str, str] | None = None,
) -> CompactionOutcome:
    """Compact the latest version of ``dataset``.

    Args:
        dataset: the dataset, opened at its latest version (the first plan is made on it; a
            plan made again after a lost race is made on the newest version).
        options: compaction options (target rows per fragment, deferred remap, ...).
        runner: where rewrite tasks execute.
        dry_run: plan only; report what would be rewritten.
        transaction_properties: stored with the Rewrite commit (Dagster lineage).

    Raises:
        RetryableCommitConflictError: when concurrent deletes/updates keep winning after
            :data:`COMPACTION_ATTEMPTS` plans (nothing of the compaction is committed).
    """
    from lance_format.maintenance.compaction_commit import discard_new_files

    start = time.perf_counter()
    uri = dataset.uri
    for attempt in range(1, COMPACTION_ATTEMPTS + 1):
        ds = dataset if attempt == 1 else dataset.checkout_latest()
        read_version = int(ds.version)
        before = len(ds.manifest.fragments)
        plan = Compaction.plan(ds, options)
        rewritten = sum(len(t.fragments) for t in plan.tasks)
        if dry_run or not plan.tasks:
            planned_out = sum(
                max(1, -(-sum(f.physical_rows - f.num_deletions for f in t.fragments)
                         // options.target_rows_per_fragment))
                for t in plan.tasks
            )
            return CompactionOutcome(
                uri, dry_run, read_version, None, len(plan.tasks), before, before - rewritten + planned_out,
                rewritten, 0, 0, _planned_rows(plan), 0, 0, attempt, time.perf_counter() - start)
        results = runner.map(execute_compaction_task, list(plan.tasks))
        try:
            metrics = Compaction.commit(ds, results, options, transaction_properties=transaction_properties)
        except RetryableCommitConflictError:
            # A concurrent delete/update touched a planned fragment: its rows win, ours are discarded.
            discard_new_files(ds, results)
            if attempt == COMPACTION_ATTEMPTS:
                raise
            continue
        except BaseException:
            discard_new_files(ds, results)
            raise
        after = ds  # Compaction.commit moved the handle to the version it committed
        return CompactionOutcome(
            uri=uri,
            dry_run=False,
            read_version=read_version,
            new_version=int(ds.version),
            tasks=len(plan.tasks),
            fragments_before=before,
            fragments_after=len(after.manifest.fragments),
            fragments_rewritten=metrics.fragments_removed,
            files_added=metrics.files_added,
            files_removed=metrics.files_removed,
            rows_rewritten=metrics.rows_rewritten,
            bytes_written=metrics.bytes_written,
            indices_remapped=_rewritten_indices(after, int(ds.version)),
            attempts=attempt,
            duration_s=time.perf_counter() - start,
        )
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


@dataclass(frozen=True)
class IndexOutcome:
    """What one index optimization did (or would do).

    Attributes:
        uri: dataset URI.
        dry_run: nothing was written or committed.
        read_version: version the step started from.
        new_version: version committed, ``None`` if nothing was committed.
        indices: names of the indices updated (or that would be).
        fragments_indexed: fragments newly covered by an index.
        duration_s: wall time of the step.
        unmaintained: indices behind the data whose kind this package cannot rebuild (left as
            they are, named so the run says why they stay behind).
    """

    uri: str
    dry_run: bool
    read_version: int
    new_version: int | None
    indices: tuple[str, ...]
    fragments_indexed: int
    duration_s: float
    unmaintained: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanupOutcome:
    """What one cleanup removed (or, in a dry run, exactly what it would remove).

    Attributes:
        uri: dataset URI.
        dry_run: nothing was deleted.
        latest_version: the latest version when cleanup ran (never removed).
        versions_removed: versions whose manifests go.
        files_removed: paths (relative to the dataset) of every file that goes.
        bytes_reclaimed: total size of those files.
        protected_versions: old versions kept because a tag (or an asset-input pin) holds them.
        duration_s: wall time of the step.
    """

    uri: str
    dry_run: bool
    latest_version: int
    versions_removed: tuple[int, ...]
    files_removed: tuple[str, ...]
    bytes_reclaimed: int
    protected_versions: tuple[int, ...]
    duration_s: float


def _covered(index: Any) -> frozenset[int]:
    bitmap = getattr(index, "fragment_bitmap", None)
    if bitmap is None:
        return frozenset()
    if isinstance(bitmap, bytes | bytearray):  # protobuf form: a serialized roaring bitmap
        from pyroaring import BitMap

        return frozenset(BitMap.deserialize(bytes(bitmap))) if bitmap else frozenset()
    return frozenset(int(i) for i in bitmap)


def user_indices(ds: LanceDataset) -> dict[str, frozenset[int]]:
    """Fragments each user index covers (system indices such as ``__lance_frag_reuse`` excluded)."""
    out: dict[str, frozenset[int]] = {}
    for index in ds.manifest.indices:
        name = str(index.name)
        if not name.startswith("__"):
            out[name] = out.get(name, frozenset()) | _covered(index)
    return out


def _stale(ds: LanceDataset) -> dict[str, int]:
    """Per index, how many live fragments it does not cover yet."""
    fragments = {int(f.id) for f in ds.manifest.fragments}
    return {name: len(fragments - covered) for name, covered in user_indices(ds).items()}


def _has_frag_reuse(ds: LanceDataset) -> bool:
    return any(str(index.name) == "__lance_frag_reuse" for index in ds.manifest.indices)


def optimize_indices(ds: LanceDataset, *, dry_run: bool, runner: Runner | None = None,
                     transaction_properties: Mapping[str, str] | None = None) -> IndexOutcome:
    """Fold unindexed fragments into every user index and finish deferred remaps.

    ``ds`` is the dataset opened at its latest version; it moves to the version committed, whose
    transaction carries ``transaction_properties`` (Dagster lineage).

    Raises:
        lance_format.errors.LanceError: from the index layer when an index cannot be updated.
    """
    start = time.perf_counter()
    uri = ds.uri
    read_version = int(ds.version)
    behind = {name: n for name, n in _stale(ds).items() if n}
    skipped = tuple(name for name in unmaintained_indices(ds) if name in behind)
    stale = {name: n for name, n in behind.items() if name not in skipped}
    if dry_run or not (stale or _has_frag_reuse(ds)):
        return IndexOutcome(uri, dry_run, read_version, None, tuple(sorted(stale)), sum(stale.values()),
                            time.perf_counter() - start, skipped)
    # A deferred compaction leaves a fragment-reuse index; optimizing folds it into the indices.
    # moves ``ds`` to the version it committed, if any
    done = ds.optimize.optimize_indices(runner=runner, transaction_properties=transaction_properties)
    new_version = int(ds.version)
    left = _stale(ds)
    updated = tuple(sorted(name for name in stale if left.get(name, 0) < stale[name]))
    indexed = sum(stale[name] - left.get(name, 0) for name in updated)
    return IndexOutcome(uri, False, read_version, new_version if new_version != read_version else None,
                        updated, indexed, time.perf_counter() - start,
                        tuple(sorted(set(skipped) | set(done.unmaintained))))


def cleanup(
    ds: LanceDataset,
    *,
    older_than: dt.timedelta,
    retain_versions: int,
    delete_unverified: bool,
    dry_run: bool,
    runner: Runner,
    commit_grace: dt.timedelta | None = None,
) -> CleanupOutcome:
    """Remove versions older than ``older_than`` and outside the newest ``retain_versions``.

    The latest version and every tagged version stay (the caller tags versions pinned by asset
    inputs first). Old manifests are deleted first, on the driver, so no reader can open a version
    whose files are going; the files are then deleted in batches through ``runner``. A dry run
    returns the exact plan. ``ds`` is the dataset opened at its latest version. ``commit_grace``
    (default: lance_format's) keeps every version that was the latest that recently.
    """
    from lance_format.cleanup import execute_cleanup, plan_cleanup

    start = time.perf_counter()
    uri = ds.uri
    # Tagged old versions are kept, not an error: pins are tags, and a nightly job must not fail on them.
    plan = plan_cleanup(ds, older_than, retain_versions, delete_unverified=delete_unverified,
                        error_if_tagged_old_versions=False, commit_grace=commit_grace)
    tagged = sorted({int(t.version) for t in ds.tags.list().values()} - {plan.latest_version})
    if dry_run:
        keys = tuple(f.key for f in (*plan.manifests, *plan.files) if f.key not in plan.protected)
        stats = plan.stats(dry_run=True)
        return CleanupOutcome(uri, True, plan.latest_version, plan.removed_versions, keys,
                              stats.bytes_removed, tuple(tagged), time.perf_counter() - start)
    stats = execute_cleanup(plan, runner=runner, store=ds._store)
    return CleanupOutcome(uri, False, plan.latest_version, plan.removed_versions, tuple(stats.keys),
                          stats.bytes_removed, tuple(tagged), time.perf_counter() - start)
