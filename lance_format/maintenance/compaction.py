"""Compaction as plan → execute → commit over picklable values.

API (what ``lance_format.optimize`` re-exports, and what Spark / Dagster build on)::

    plan = Compaction.plan(ds, CompactionOptions(target_rows_per_fragment=...))  # driver (or a dict)
    results = runner.map(execute_compaction_task, plan.tasks)                    # anywhere
    metrics = Compaction.commit(ds, results, plan.options)                       # driver, once
    # or all of it (ds moves to the new version):
    metrics = ds.optimize.compact_files(target_rows_per_fragment=..., runner=None)
    metrics = compact_files(ds, runner=SparkRunner(spark), **pylance_keywords)

* ``task.execute(ds)`` runs one task with an open handle (it checks out
  ``task.read_version``); ``execute_compaction_task(task)`` opens the dataset itself.
  ``runner=None`` means local threads (``LocalRunner(num_threads)``); ``ProcessRunner``
  runs tasks in local worker processes.
* ``compact_files`` deletes the files it wrote when its commit is refused
  (``CommitConflictError`` / ``InvalidInputError``); with ``Compaction.commit`` the
  caller decides (``compaction_commit.discard_new_files(ds, results)``), because a
  result may have been committed already.

* ``CompactionTask`` / ``RewriteResult`` / ``CompactionPlan`` are frozen, picklable and
  JSON-serialisable (``to_json()`` / ``from_json()``); a task carries the dataset URI,
  storage options, its ``read_version``, its source fragments and the options, so
  ``execute_compaction_task(task)`` can run on a machine that only has the task.
* Execution writes new data files and nothing else; a result is committed by
  ``Compaction.commit``, which commits one ``ReserveFragments`` (to learn the new
  fragment ids, as pylance does) and then ONE ``Rewrite`` transaction whose read version
  is the oldest task read version, so concurrent deletes/updates on rewritten
  fragments are caught by the conflict check (``RetryableCommitConflictError``) and
  never lost; concurrent appends both land.

Planning follows pylance (``DefaultCompactionPlanner`` in
``rust/lance/src/dataset/optimize.rs``): fragments in id order; a fragment is a
candidate on its own when its deleted share exceeds ``materialize_deletions_threshold``
(and ``materialize_deletions``), else with its neighbours when it has fewer than
``target_rows_per_fragment`` physical rows; runs of candidates covered by the same
set of indices form bins; a one-fragment "with neighbours" bin is dropped; bins are
split greedily so each piece has at least the target of live rows; the source
budgets (``max_source_fragments`` / ``max_source_rows``) cut the task list.
Indices (see ``_indices``): without stable row ids, BTREE/BITMAP are remapped through
INDEX's ``remap_indices`` in the same ``Rewrite`` (the table layer moves their fragment
bitmaps); kinds pylance answers correctly from with a stale bitmap (INVERTED, NGRAM,
vector…) are left as they are; fragments of an unknown kind are held back. With stable
row ids the table layer's ``Rewrite`` moves every index's fragment bitmap (checked by a
dry run of ``build_manifest``; indexed fragments are held back if it does not) and only
segments holding row addresses are remapped. ``defer_index_remap`` rewrites no index:
the ``Rewrite`` carries a ``__lance_frag_reuse`` entry (``lance_format.index.frag_reuse``)
through which readers remap, until ``optimize_indices`` folds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lance_format.errors import CommitConflictError, InvalidInputError
from lance_format.maintenance import _indices
from lance_format.maintenance.compaction_commit import commit_compaction, discard_new_files
from lance_format.maintenance.compaction_exec import rewrite_task
from lance_format.maintenance.compaction_models import (
    CompactionMetrics,
    CompactionOptions,
    RewriteResult,
    frag_from_json,
    frag_to_json,
)
from lance_format.maintenance.runner import LocalRunner
from lance_format.table.models import FragmentMetadata

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner


@dataclass(frozen=True)
class CompactionTask:
    """One group of adjacent fragments to rewrite; runs anywhere via :func:`execute_compaction_task`.

    Attributes:
        uri: Dataset URI.
        storage_options: Backend options for opening the dataset.
        read_version: Version the plan was made on (the task reads exactly this version).
        fragments: Source fragments, in order, as they are in ``read_version``.
        options: The plan's options.
    """

    uri: str
    storage_options: Mapping[str, str] | None = field(repr=False)  # credentials: never in reprs or logs
    read_version: int
    fragments: tuple[FragmentMetadata, ...]
    options: CompactionOptions = field(default_factory=CompactionOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fragments", tuple(self.fragments))
        if self.storage_options is not None:
            object.__setattr__(self, "storage_options", dict(self.storage_options))

    @property
    def fragment_ids(self) -> tuple[int, ...]:
        """Ids of the source fragments."""
        return tuple(f.id for f in self.fragments)

    def execute(self, ds: LanceDataset | None = None) -> RewriteResult:
        """Rewrite the task's fragments into new data files (nothing is committed).

        Args:
            ds: An open handle on the dataset (any version); ``None`` opens ``uri``.

        Raises:
            VersionNotFoundError: if ``read_version`` no longer exists (cleaned up).
            InvalidInputError: if the task's fragments are not those of ``read_version``.
        """

        return rewrite_task(self, ds)

    def to_json(self) -> str:
        """JSON text of the task (fragments as base64 protobuf, so nothing is lost)."""
        return json.dumps(self._to_obj())

    def _to_obj(self) -> dict[str, Any]:
        return {"uri": self.uri, "storage_options": self.storage_options, "read_version": self.read_version,
                "fragments": [frag_to_json(f) for f in self.fragments], "options": self.options.to_dict()}

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> CompactionTask:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text) if isinstance(text, str) else text
        return cls(obj["uri"], obj.get("storage_options"), int(obj["read_version"]),
                   tuple(frag_from_json(f) for f in obj["fragments"]),
                   CompactionOptions.from_dict(obj.get("options", {})))


@dataclass(frozen=True)
class CompactionPlan:
    """Tasks planned on one version.

    Attributes:
        tasks: The tasks, in fragment order.
        read_version: Version the plan was made on.
        options: Options the plan was made with.
    """

    tasks: tuple[CompactionTask, ...]
    read_version: int
    options: CompactionOptions

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))

    def num_tasks(self) -> int:
        """Number of tasks (pylance name)."""
        return len(self.tasks)

    def to_json(self) -> str:
        """JSON text of the plan."""
        return json.dumps({"read_version": self.read_version, "options": self.options.to_dict(),
                           "tasks": [t._to_obj() for t in self.tasks]})

    @classmethod
    def from_json(cls, text: str) -> CompactionPlan:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text)
        return cls(tuple(CompactionTask.from_json(t) for t in obj["tasks"]), int(obj["read_version"]),
                   CompactionOptions.from_dict(obj["options"]))


# -- planning -------------------------------------------------------------------------


def _candidacy(frag: FragmentMetadata, opts: CompactionOptions) -> str | None:
    physical = frag.physical_rows
    if opts.materializes_deletions and physical > 0 and \
            frag.num_deletions / physical > opts.materialize_deletions_threshold:
        return "itself"
    if physical < opts.target_rows_per_fragment:
        return "neighbours"
    return None


def _split_for_size(frags: list[FragmentMetadata], min_rows: int) -> list[list[FragmentMetadata]]:
    # Cut once the piece holds enough live rows and enough are left for another piece.
    remaining = sum(f.num_rows for f in frags)
    out: list[list[FragmentMetadata]] = []
    current: list[FragmentMetadata] = []
    rows = 0
    for f in frags:
        current.append(f)
        rows += f.num_rows
        remaining -= f.num_rows
        if rows >= min_rows and remaining > 0 and remaining >= min_rows:
            out.append(current)
            current, rows = [], 0
    if current:
        out.append(current)
    return out


def plan_compaction(ds: LanceDataset, options: CompactionOptions | Mapping[str, Any] | None = None
                    ) -> CompactionPlan:
    """Plan a compaction of ``ds`` at its checked-out version (see the module docstring).

    Raises:
        InvalidInputError: for bad options, or ``defer_index_remap`` on stable row ids.
    """
    opts = CompactionOptions.coerce(options)
    manifest = ds.manifest
    stable = manifest.uses_stable_row_ids
    if opts.defer_index_remap and stable:
        raise InvalidInputError(f"{ds.uri}: defer_index_remap=True is not supported on a dataset with stable "
                                "row ids (compaction keeps row ids, so there is nothing to remap)")
    excluded = set(opts.excluded_fragment_ids)
    # Fragments covered by an index that could not follow the rewrite stay where they
    # are (pylance holds back fragments of indices it cannot read the same way).
    held = _indices.unremappable_coverage(manifest, stable_row_ids=stable)
    if -1 in held:
        held = {f.id for f in manifest.fragments}
    excluded |= held
    coverage = _indices.effective_coverage(manifest, ds._store)

    bins: list[tuple[list[FragmentMetadata], list[str]]] = []
    cur: tuple[list[FragmentMetadata], list[str]] | None = None
    cur_key: tuple[int, ...] = ()
    for frag in sorted(manifest.fragments, key=lambda f: f.id):
        cand = None if frag.id in excluded else _candidacy(frag, opts)
        if cand is None:
            if cur is not None:
                bins.append(cur)
                cur = None
            continue
        key = tuple(n for n, cov in enumerate(coverage) if frag.id in cov)
        if cur is not None and key == cur_key:
            cur[0].append(frag)
            cur[1].append(cand)
        else:
            if cur is not None:
                bins.append(cur)
            cur, cur_key = ([frag], [cand]), key
    if cur is not None:
        bins.append(cur)

    groups: list[list[FragmentMetadata]] = []
    for frags, cands in bins:
        if len(frags) == 1 and cands[0] == "neighbours":
            continue  # compacting one small fragment alone gains nothing
        groups.extend(_split_for_size(frags, opts.target_rows_per_fragment))

    tasks: list[CompactionTask] = []
    n_frags = n_rows = 0
    for group in groups:
        n_frags += len(group)
        n_rows += sum(f.num_rows for f in group)
        if (opts.max_source_fragments is not None and n_frags > opts.max_source_fragments) or \
                (opts.max_source_rows is not None and n_rows > opts.max_source_rows):
            break
        tasks.append(CompactionTask(ds.uri, ds._storage_options, manifest.version, tuple(group), opts))
    return CompactionPlan(tuple(tasks), manifest.version, opts)


def execute_compaction_task(task: CompactionTask) -> RewriteResult:
    """Execute one task, opening the dataset from the task itself (for any :class:`Runner`)."""
    return task.execute(None)


class Compaction:
    """pylance's ``lance.optimize.Compaction``: ``plan`` / ``commit`` as static methods."""

    @staticmethod
    def plan(ds: LanceDataset, options: CompactionOptions | Mapping[str, Any] | None = None) -> CompactionPlan:
        """See :func:`plan_compaction`."""
        return plan_compaction(ds, options)

    @staticmethod
    def execute(tasks: Sequence[CompactionTask], runner: Runner | None = None) -> list[RewriteResult]:
        """Execute tasks through ``runner`` (local threads by default)."""

        return (runner or LocalRunner()).map(execute_compaction_task, list(tasks))

    @staticmethod
    def commit(ds: LanceDataset, results: Sequence[RewriteResult],
               options: CompactionOptions | Mapping[str, Any] | None = None, *,
               transaction_properties: Mapping[str, str] | None = None) -> CompactionMetrics:
        """Commit executed tasks as one ``Rewrite``; ``ds`` moves to the new version.

        ``transaction_properties`` are stored with the Rewrite's transaction (e.g. the
        orchestrator run that compacted).

        Raises:
            RetryableCommitConflictError: a concurrent delete/update touched a rewritten
                fragment (nothing of the compaction is committed; plan again).
            CommitConflictError: another conflict (e.g. an overwrite or restore).
        """

        return commit_compaction(ds, results, CompactionOptions.coerce(options), transaction_properties)


def compact_files(ds: LanceDataset, *, runner: Runner | None = None,
                  transaction_properties: Mapping[str, str] | None = None, **options: Any) -> CompactionMetrics:
    """Plan, execute (through ``runner``) and commit a compaction; ``ds`` moves to the new version.

    Args:
        ds: The dataset (its checked-out version is compacted).
        runner: Where tasks run; ``LocalRunner(num_threads)`` by default.
        transaction_properties: Stored with the Rewrite's transaction.
        **options: :class:`CompactionOptions` fields (pylance's ``compact_files`` keywords).

    Returns:
        Metrics; all zero (and no new version) when there is nothing to compact.
    """

    opts = CompactionOptions.coerce(options)
    plan = plan_compaction(ds, opts)
    if not plan.tasks:
        return CompactionMetrics()
    if runner is None:
        # Locally the open handle is reused instead of reopening the dataset per task.
        results = LocalRunner(opts.num_threads).map(lambda t: t.execute(ds), list(plan.tasks))
    else:
        results = runner.map(execute_compaction_task, list(plan.tasks))
    try:
        return commit_compaction(ds, results, opts, transaction_properties)
    except (CommitConflictError, InvalidInputError):
        # Raised before the Rewrite's manifest was put: these files, written by this call,
        # are referenced by no version. (Anything else is left for cleanup to judge.)
        discard_new_files(ds, results)
        raise


__all__ = [
    "Compaction",
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "RewriteResult",
    "compact_files",
    "execute_compaction_task",
    "plan_compaction",
]
