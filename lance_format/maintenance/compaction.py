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

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from lance_format.errors import CommitConflictError, InvalidInputError
from lance_format.maintenance import _indices
from lance_format.table.codec.fragments import fragment_bytes, fragment_from_wire
from lance_format.table.models import FragmentMetadata

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner


@dataclass(frozen=True)
class CompactionOptions:
    """Options of a compaction, named and defaulted as pylance's ``CompactionOptions``.

    Attributes:
        target_rows_per_fragment: Fragments with fewer physical rows are candidates, and
            output fragments hold about this many rows.
        max_rows_per_group: Rows handed to the file writer at a time.
        max_bytes_per_file: Cap on an output file's size (``None`` = the writer default).
        materialize_deletions: Rewrite fragments whose deleted share is over the threshold.
        materialize_deletions_threshold: Deleted share that triggers a rewrite (>= 1.0
            turns ``materialize_deletions`` off).
        num_threads: Local threads for ``compact_files`` (``None`` = one per core).
        batch_size: Rows per read batch (``None`` = the scanner default).
        defer_index_remap: Record a fragment-reuse index instead of rewriting indices.
        max_source_fragments: Stop adding tasks once this many source fragments are planned.
        max_source_rows: Stop adding tasks once this many live source rows are planned.
        excluded_fragment_ids: Fragments never compacted (they also split bins).
    """

    target_rows_per_fragment: int = 1_048_576
    max_rows_per_group: int = 1024
    max_bytes_per_file: int | None = None
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    num_threads: int | None = None
    batch_size: int | None = None
    defer_index_remap: bool = False
    max_source_fragments: int | None = None
    max_source_rows: int | None = None
    excluded_fragment_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "excluded_fragment_ids", tuple(int(i) for i in self.excluded_fragment_ids))
        for name in ("target_rows_per_fragment", "max_rows_per_group"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidInputError(f"CompactionOptions.{name} must be a positive integer, got {value!r}")
        for name in ("max_bytes_per_file", "num_threads", "batch_size", "max_source_fragments",
                     "max_source_rows"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise InvalidInputError(f"CompactionOptions.{name} must be a positive integer or None, "
                                        f"got {value!r}")

    @property
    def materializes_deletions(self) -> bool:
        """Whether deletions are materialized (a threshold of 1.0 or more turns it off, as in pylance)."""
        return self.materialize_deletions and self.materialize_deletions_threshold < 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the options."""
        out = asdict(self)
        out["excluded_fragment_ids"] = list(self.excluded_fragment_ids)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionOptions:
        """Inverse of :meth:`to_dict`; unknown keys (e.g. pylance-only options) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    @classmethod
    def coerce(cls, options: CompactionOptions | Mapping[str, Any] | None) -> CompactionOptions:
        """Accept options as this class, a pylance-style dict, or ``None`` (defaults)."""
        if options is None:
            return cls()
        if isinstance(options, CompactionOptions):
            return options
        if isinstance(options, Mapping):
            unknown = set(options) - {f.name for f in fields(cls)}
            if unknown:
                raise InvalidInputError(f"unknown compaction option(s): {sorted(unknown)}")
            # pylance's keywords take None for "default"
            return cls(**{k: v for k, v in options.items() if v is not None})
        raise InvalidInputError(f"options must be CompactionOptions or a dict, got {type(options).__name__}")


def _frag_to_json(frag: FragmentMetadata) -> str:
    # Serialized DataFragment bytes, base64: lossless (row ids, version sequences, unknown fields).
    return base64.b64encode(fragment_bytes(frag)).decode("ascii")


def _frag_from_json(text: str) -> FragmentMetadata:
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise InvalidInputError(f"compaction JSON: a fragment is not base64: {exc}") from exc
    return fragment_from_wire(data, "compaction JSON")


@dataclass(frozen=True)
class CompactionMetrics:
    """What a compaction did (pylance's four counters plus rows and bytes written).

    Attributes:
        fragments_removed: Source fragments replaced.
        fragments_added: New fragments written.
        files_removed: Source data files plus deletion files dropped.
        files_added: New data files written.
        rows_rewritten: Live rows copied into the new fragments.
        bytes_written: Size of the new data files.
    """

    fragments_removed: int = 0
    fragments_added: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows_rewritten: int = 0
    bytes_written: int = 0

    def __add__(self, other: CompactionMetrics) -> CompactionMetrics:
        return CompactionMetrics(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


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
        from lance_format.maintenance.compaction_exec import rewrite_task

        return rewrite_task(self, ds)

    def to_json(self) -> str:
        """JSON text of the task (fragments as base64 protobuf, so nothing is lost)."""
        return json.dumps(self._to_obj())

    def _to_obj(self) -> dict[str, Any]:
        return {"uri": self.uri, "storage_options": self.storage_options, "read_version": self.read_version,
                "fragments": [_frag_to_json(f) for f in self.fragments], "options": self.options.to_dict()}

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> CompactionTask:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text) if isinstance(text, str) else text
        return cls(obj["uri"], obj.get("storage_options"), int(obj["read_version"]),
                   tuple(_frag_from_json(f) for f in obj["fragments"]),
                   CompactionOptions.from_dict(obj.get("options", {})))


@dataclass(frozen=True)
class RewriteResult:
    """The output of one executed task, to be passed to :meth:`Compaction.commit`.

    Attributes:
        read_version: Version the task read.
        original_fragments: Source fragments (as in ``read_version``).
        new_fragments: New fragments (ids unassigned until commit).
        metrics: Counters of this task.
        defer_index_remap: The task was planned with ``defer_index_remap`` (as pylance's
            result carries ``changed_row_addrs`` instead of a row-id map), so
            :meth:`Compaction.commit` defers without being told again.
    """

    read_version: int
    original_fragments: tuple[FragmentMetadata, ...]
    new_fragments: tuple[FragmentMetadata, ...]
    metrics: CompactionMetrics = field(default_factory=CompactionMetrics)
    defer_index_remap: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "original_fragments", tuple(self.original_fragments))
        object.__setattr__(self, "new_fragments", tuple(self.new_fragments))

    def to_json(self) -> str:
        """JSON text of the result."""
        return json.dumps({"read_version": self.read_version,
                           "original_fragments": [_frag_to_json(f) for f in self.original_fragments],
                           "new_fragments": [_frag_to_json(f) for f in self.new_fragments],
                           "metrics": asdict(self.metrics), "defer_index_remap": self.defer_index_remap})

    @classmethod
    def from_json(cls, text: str) -> RewriteResult:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text)
        return cls(int(obj["read_version"]), tuple(_frag_from_json(f) for f in obj["original_fragments"]),
                   tuple(_frag_from_json(f) for f in obj["new_fragments"]), CompactionMetrics(**obj["metrics"]),
                   bool(obj.get("defer_index_remap", False)))


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
        from lance_format.maintenance.runner import LocalRunner

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
        from lance_format.maintenance.compaction_commit import commit_compaction

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
    from lance_format.maintenance.compaction_commit import commit_compaction, discard_new_files
    from lance_format.maintenance.runner import LocalRunner

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
