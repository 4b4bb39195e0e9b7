"""Version cleanup as plan → execute → finish.

API (re-exported by ``lance_format.cleanup``; Spark / Dagster build on it)::

    plan = plan_cleanup(ds, older_than=timedelta(days=14), retain_versions=None)   # driver
    plan = refresh_plan(plan)                          # driver: protect keys newer commits use
    gone = delete_old_manifests(plan)                  # driver: old versions disappear first
    deleted = runner.map(execute_cleanup_batch, plan.batches(1000))   # anywhere
    stats = finish_cleanup(plan, deleted, gone)        # driver
    # or all of it: ds.cleanup_old_versions(...) / cleanup_old_versions(ds, ..., runner=...)

What pylance does (``cleanup_old_versions``, ``rust/lance/src/dataset/cleanup.rs``), and we too:

* A version is removed only when it is not the latest, not tagged on the main branch,
  not the base a branch was created from, and old by every policy given: its manifest is older than
  ``older_than`` and it is outside the last ``retain_versions``. Without either policy
  ``older_than`` is 14 days. A tagged version that would otherwise go raises
  :class:`~lance_format.errors.CleanupError` (unless ``error_if_tagged_old_versions=False``)
  before anything is deleted.
* Only these files are ever candidates: ``data/*.lance`` and ``data/.tmp*`` (a local writer's
  temporary file), ``_deletions/*.arrow|*.bin``, ``_transactions/*.txn``, files under
  ``_indices/{uuid}/`` and ``_versions/.tmp*``. A file referenced by a kept version is never
  deleted. An unreferenced file is deleted when a removed version referenced it ("verified"),
  or when it is older than 7 days, or with ``delete_unverified=True``.
* Files modified after the earliest kept manifest are left alone (they may belong to a commit in
  flight), except under ``_indices/`` (always listed), in ``data/`` (listed up to 7 days ago, and
  entirely with ``delete_unverified``), and when a removed version is newer than a kept one (a tag
  far back: then everything is listed).

Where we go beyond pylance:

* **Commit grace.** pylance protects only versions newer than ``older_than``, so a cleanup with
  ``older_than=0`` removes the version a writer still busy with its data files read, and that
  writer can then not check what it commits on top of (our commit refuses it with
  ``CommitConflictError``). Here a version that was the latest at any moment within the last
  :data:`COMMIT_GRACE` (5 minutes) is never removed, whatever ``older_than`` / ``retain_versions``
  say: version *v* stays while its successor was committed less than the grace ago, and so does
  every version after it (the latest always stays). Versions superseded longer ago than the grace
  go as before. Set the grace per call (``commit_grace=``) or for the process with the
  ``LANCE_FORMAT_COMMIT_GRACE`` environment variable (a duration such as ``"0s"`` or ``"10min"``);
  a grace of 0 is pylance's behaviour.
* **Leftovers.** With ``delete_unverified=True`` (the caller vouches that nothing is being
  written) every managed directory is listed in full, so one cleanup after failed or killed
  operations leaves exactly the files the remaining versions reference; pylance lists only
  ``data/`` and ``_indices/`` in full and keeps a lost commit's transaction or deletion files that
  are newer than its earliest kept version. Crash leftovers of our own writers (``*.partial``,
  ``*.manifest#*``, staged ``*.manifest-{uuid}``) count as unreferenced files too.
* Before deleting, :func:`refresh_plan` reads every version committed since planning
  and drops whatever it references, so a cleanup racing a commit never deletes what
  the new commit uses. Old manifests are deleted first, then the files.
* Reprs of :class:`CleanupPlan` and :class:`DeleteBatch` (shipped to Spark executors and logged)
  mask the storage options' secrets.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import logging
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from lance_format.errors import (
    CleanupError,
    CorruptFileError,
    InvalidInputError,
    LanceError,
    ObjectNotFoundError,
    VersionNotFoundError,
)
from lance_format.maintenance.runner import LocalRunner
from lance_format.scanner import is_low_latency
from lance_format.storage import ObjectStore, open_store
from lance_format.storage.base import ObjectInfo
from lance_format.storage.redact import redact_options, redact_url
from lance_format.table.codec.manifest_refs import ManifestRefs, decode_refs
from lance_format.table.naming import (
    BRANCHES_DIR,
    DATA_DIR,
    DELETIONS_DIR,
    INDICES_DIR,
    TRANSACTIONS_DIR,
    VERSIONS_DIR,
    parse_manifest_name,
)
from lance_format.table.tags import list_tags
from lance_format.table.versions import find_latest, manifest_key_of

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner

_log = logging.getLogger(__name__)

#: An unreferenced file nobody can vouch for is deleted only after this long (pylance's
#: ``UNVERIFIED_THRESHOLD_DAYS``).
UNVERIFIED_THRESHOLD = dt.timedelta(days=7)
DEFAULT_OLDER_THAN = dt.timedelta(days=14)
#: A version that was the latest at any moment this recently is never removed: a writer that read
#: it may still be writing its files, and must find it (and every later version) when it commits.
COMMIT_GRACE = dt.timedelta(minutes=5)
#: Environment variable overriding :data:`COMMIT_GRACE` for the process (a duration: ``"0s"``, ``"10min"``).
COMMIT_GRACE_ENV = "LANCE_FORMAT_COMMIT_GRACE"
FileKind = Literal["manifest", "data", "deletion", "transaction", "index", "temporary"]


@dataclass(frozen=True)
class CleanupFile:
    """One key cleanup removes.

    Attributes:
        key: Key relative to the dataset root.
        kind: What it is (``temporary`` = a leftover ``_versions/.tmp*``).
        size: Size in bytes.
        unverified: Removed only for its age or ``delete_unverified``.
    """

    key: str
    kind: FileKind
    size: int
    unverified: bool = False


@dataclass(frozen=True)
class CleanupStats:
    """What a cleanup removed (or, with ``dry_run``, would remove).

    Attributes:
        bytes_removed: Bytes of every removed key.
        old_versions: Manifests removed.
        data_files_removed: ``data/*.lance`` files removed.
        deletion_files_removed: Deletion files removed.
        transaction_files_removed: ``.txn`` files removed.
        index_files_removed: Index files removed.
        keys: The removed keys, relative to the dataset root.
        dry_run: Whether nothing was actually deleted.
        failed_deletes: Keys that could not be deleted (pylance's count; the cleanup logs why).
    """

    bytes_removed: int = 0
    old_versions: int = 0
    data_files_removed: int = 0
    deletion_files_removed: int = 0
    transaction_files_removed: int = 0
    index_files_removed: int = 0
    keys: tuple[str, ...] = ()
    dry_run: bool = False
    failed_deletes: int = 0


def _shown(uri: str, options: dict[str, str] | None) -> str:
    """``uri=..., storage_options=...`` with credentials masked (reprs end up in logs and Spark UIs)."""
    return f"uri={redact_url(uri)!r}, storage_options={redact_options(options) if options is not None else None!r}"


@dataclass(frozen=True, repr=False)
class DeleteBatch:
    """Keys one :func:`execute_cleanup_batch` call deletes (picklable, for any Runner).

    Its repr masks the secrets of ``storage_options``.
    """

    uri: str
    storage_options: dict[str, str] | None
    keys: tuple[str, ...]

    def __repr__(self) -> str:
        return f"DeleteBatch({_shown(self.uri, self.storage_options)}, keys={self.keys!r})"


@dataclass(frozen=True, repr=False)
class CleanupPlan:
    """Which versions and files a cleanup removes (its repr masks the secrets of ``storage_options``).

    Attributes:
        uri: Dataset URI.
        storage_options: Backend options.
        latest_version: Newest version when the plan was made.
        removed_versions: Versions whose manifests go.
        manifests: The manifest keys that go (deleted first).
        files: The other keys that go.
        protected: Keys kept because a version committed after planning uses them.
    """

    uri: str
    storage_options: dict[str, str] | None
    latest_version: int
    removed_versions: tuple[int, ...]
    manifests: tuple[CleanupFile, ...]
    files: tuple[CleanupFile, ...]
    protected: frozenset[str] = field(default_factory=frozenset)

    def __repr__(self) -> str:
        return (f"CleanupPlan({_shown(self.uri, self.storage_options)}, latest_version={self.latest_version}, "
                f"removed_versions={self.removed_versions!r}, manifests={len(self.manifests)}, "
                f"files={len(self.files)}, protected={len(self.protected)})")

    def batches(self, size: int = 1000) -> list[DeleteBatch]:
        """The non-manifest keys split into batches of at most ``size`` keys."""
        if size <= 0:
            raise InvalidInputError(f"batch size must be positive, got {size}")
        keys = [f.key for f in self.files if f.key not in self.protected]
        return [DeleteBatch(self.uri, self.storage_options, tuple(keys[i:i + size]))
                for i in range(0, len(keys), size)]

    def stats(self, *, dry_run: bool = False) -> CleanupStats:
        """Figures of the plan (what :func:`finish_cleanup` reports when every key went)."""
        return _stats([*self.manifests, *(f for f in self.files if f.key not in self.protected)], dry_run)


def _stats(files: Iterable[CleanupFile], dry_run: bool) -> CleanupStats:
    counts = dict.fromkeys(("manifest", "data", "deletion", "transaction", "index"), 0)
    total = 0
    keys = []
    for f in files:
        total += f.size
        keys.append(f.key)
        if f.kind in counts:
            counts[f.kind] += 1
    return CleanupStats(total, counts["manifest"], counts["data"], counts["deletion"], counts["transaction"],
                        counts["index"], tuple(keys), dry_run)


#: Directories whose crash leftovers cleanup removes (see :func:`_is_staging`).
_STAGING_DIRS = (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, VERSIONS_DIR, INDICES_DIR)


def _is_staging(top: str, rest: str) -> bool:
    """Whether ``top/rest`` is a write that a crash left half done.

    Two spellings exist: ``{final}.{uuid}.partial`` (our local writes, renamed into place on
    success: data and deletion files, transactions, the version hint, index files) and
    ``{final}#{suffix}`` (the staging file of a create-only manifest write, ours and
    object_store's), and ``{n}.manifest-{uuid}`` (a manifest staged for an external manifest
    store whose commit lost or never finished). Nothing ever references them, so they fall under the unverified-file
    age rule like any unreferenced file.
    """
    name = rest.rpartition("/")[2]
    return top in _STAGING_DIRS and (name.endswith(".partial") or "#" in name or ".manifest-" in name)


def _kind(key: str) -> FileKind | None:
    top, _, rest = key.partition("/")
    if _is_staging(top, rest):
        return "temporary"
    if top == DATA_DIR and rest.rpartition("/")[2].startswith(".tmp"):
        return "data"  # a local writer's temporary file, left by a crash (pylance removes them too)
    if top == DATA_DIR and "/" not in rest and rest.endswith(".lance"):
        return "data"
    if top == DELETIONS_DIR and "/" not in rest and rest.endswith((".arrow", ".bin")):
        return "deletion"
    if top == TRANSACTIONS_DIR and "/" not in rest and rest.endswith(".txn"):
        return "transaction"
    if top == INDICES_DIR and "/" in rest:
        return "index"
    if top == VERSIONS_DIR and "/" not in rest and rest.startswith(".tmp"):
        return "temporary"
    return None


def _index_prefix(key: str) -> str:
    parts = key.split("/")
    return f"{parts[0]}/{parts[1]}/"


def _is_referenced(key: str, kind: FileKind, refs: set[str]) -> bool:
    return (_index_prefix(key) if kind == "index" else key) in refs


def _read_refs(store: ObjectStore, key: str) -> ManifestRefs:
    return decode_refs(store.read(key), store.uri(key))


def _load_all(store: ObjectStore, keys: Sequence[str]) -> Iterator[ManifestRefs]:
    """What cleanup needs of the manifests at ``keys`` (from the one listing of ``_versions/``), in order.

    Read by their listed keys: looking each version's key up again would cost one or two
    existence checks per version (a request each on an object store). Fetched concurrently
    from a remote store (latency-bound). Only the referenced keys are taken from each manifest
    (:mod:`lance_format.table.codec.manifest_refs`), not its table models.
    """

    if len(keys) < 4 or is_low_latency(store):
        # Local disk: one after another. Four threads cost 2-3x the CPU and the wall time of a
        # plain loop on 200 manifests (~0.1 ms of decode each: thread hand-offs and the
        # interpreter lock outweighed the overlapped reads; measured at load 3-4).
        return (_read_refs(store, key) for key in keys)
    # A remote store: many requests in flight (latency-bound).
    with ThreadPoolExecutor(max_workers=16) as pool:
        return iter(list(pool.map(lambda key: _read_refs(store, key), keys)))


def branch_parent_versions(store: ObjectStore) -> set[int]:
    """Versions of the main branch that a branch was created from (``_refs/branches/*.json``).

    pylance 14.0.2 keeps them: the branch's manifests reference their files.
    """
    out: set[int] = set()
    for info in store.list(BRANCHES_DIR):
        if not info.key.endswith(".json"):
            continue
        try:
            doc = json.loads(store.read(info.key))
        except (LanceError, OSError, ValueError) as exc:
            raise CorruptFileError(f"{store.uri(info.key)}: unreadable branch file: {exc}") from exc
        if isinstance(doc, dict) and doc.get("parentBranch") in (None, "main") and \
                isinstance(doc.get("parentVersion"), int):
            out.add(doc["parentVersion"])
    return out


def resolve_commit_grace(commit_grace: dt.timedelta | None = None) -> dt.timedelta:
    """The commit grace a cleanup applies: ``commit_grace``, else ``$LANCE_FORMAT_COMMIT_GRACE``, else 5 minutes.

    Raises:
        InvalidInputError: for a grace that is not a non-negative ``timedelta`` (or a bad variable).
    """
    if commit_grace is None:
        raw = os.environ.get(COMMIT_GRACE_ENV, "").strip()
        if not raw:
            return COMMIT_GRACE
        try:
            return parse_duration(raw)
        except InvalidInputError as exc:
            raise InvalidInputError(f"environment variable {COMMIT_GRACE_ENV}: {exc}") from None
    if not isinstance(commit_grace, dt.timedelta) or commit_grace < dt.timedelta(0):
        raise InvalidInputError(f"commit_grace must be a non-negative timedelta, got {commit_grace!r}")
    return commit_grace


def _with_grace(manifests: Iterable[ManifestRefs], since: dt.datetime) -> Iterator[tuple[ManifestRefs, bool]]:
    """Each manifest (in version order) and whether the commit grace keeps it.

    Version *v* was the latest until its successor was committed, so the grace keeps it when the
    next version's timestamp is after ``since``, and keeps every version after it too (a writer
    that read *v* must find every version up to its commit, even when writers' clocks disagree and
    timestamps are out of order); the latest is always kept. One manifest of look-ahead suffices.
    """
    prev: ManifestRefs | None = None
    kept = False
    for m in manifests:
        if prev is not None:
            kept = kept or m.timestamp > since
            yield prev, kept
        prev = m
    if prev is not None:
        yield prev, True


def plan_cleanup(ds: LanceDataset, older_than: dt.timedelta | None = None, retain_versions: int | None = None,
                 *, delete_unverified: bool = False, error_if_tagged_old_versions: bool = True,
                 now: dt.datetime | None = None, current_version: int | None = None,
                 commit_grace: dt.timedelta | None = None) -> CleanupPlan:
    """Decide which versions and files a cleanup removes (nothing is deleted).

    ``current_version`` overrides which version counts as current (kept, and the base of
    ``retain_versions``); auto cleanup passes the version the commit was built on, as lance does.
    ``commit_grace`` (default: :func:`resolve_commit_grace`) keeps every version that was the
    latest within that long, whatever the policies say (see the module docstring).

    Raises:
        InvalidInputError: for a negative ``older_than`` or ``commit_grace``, or ``retain_versions < 1``.
        CleanupError: when a tagged version is old and ``error_if_tagged_old_versions``.
    """
    store = ds._store
    now = now or dt.datetime.now(dt.UTC)
    if retain_versions is not None and (isinstance(retain_versions, bool) or retain_versions < 1):
        raise InvalidInputError(f"{ds.uri}: retain_versions must be a positive integer, got {retain_versions!r}")
    if older_than is not None and older_than < dt.timedelta(0):
        raise InvalidInputError(f"{ds.uri}: older_than must not be negative, got {older_than}")
    try:
        grace = resolve_commit_grace(commit_grace)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{ds.uri}: {exc}") from None
    if older_than is None and retain_versions is None:
        older_than = DEFAULT_OLDER_THAN
    with ThreadPoolExecutor(max_workers=1) as lister:
        # The other directories are listed (a stat per file locally, requests remotely) while
        # the manifests are read and decoded: the listing does not depend on them, and a file
        # a commit adds after its directory was listed is simply not a candidate.
        listings = lister.submit(_list_dirs, store, (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, INDICES_DIR))
        return _plan(ds, store, now, older_than, retain_versions, delete_unverified, error_if_tagged_old_versions,
                     current_version, grace, listings)


def _list_dirs(store: ObjectStore, prefixes: Sequence[str]) -> dict[str, list[ObjectInfo]]:
    return {prefix: list(store.list(prefix)) for prefix in prefixes}


def _plan(ds: LanceDataset, store: ObjectStore, now: dt.datetime, older_than: dt.timedelta | None,
          retain_versions: int | None, delete_unverified: bool, error_if_tagged_old_versions: bool,
          current_version: int | None, grace: dt.timedelta,
          listings: Future[dict[str, list[ObjectInfo]]]) -> CleanupPlan:
    # One listing of _versions/ gives the manifests, their sizes and leftover .tmp files.
    listed = list(store.list(VERSIONS_DIR))
    keys: dict[int, str] = {}
    for info in listed:
        parsed = parse_manifest_name(posixpath.basename(info.key))
        if parsed is not None and posixpath.dirname(info.key) == VERSIONS_DIR:
            keys[parsed[0]] = info.key
    if not keys:
        raise VersionNotFoundError(f"{ds.uri}: no versions to clean up")
    latest = max(keys) if current_version is None else min(current_version, max(keys))
    # Only tags on the main branch name main's versions; a tag on a branch does not
    # (pylance 14.0.2 neither refuses nor needs it: the branch already protects its base).
    tagged = {t.version: name for name, t in list_tags(store).items() if t.branch in (None, "main")}
    branch_bases = branch_parent_versions(store)
    before_ts = now - older_than if older_than is not None else None
    before_version = latest - retain_versions + 1 if retain_versions is not None else None

    kept_refs: set[str] = set()
    gone_refs: set[str] = set()
    removed: list[int] = []
    tagged_old: dict[str, int] = {}
    earliest_kept: dt.datetime | None = None
    latest_gone: dt.datetime | None = None
    sizes = {info.key: info.size for info in listed}
    order = sorted(keys)
    for v, (m, in_grace) in zip(order, _with_grace(_load_all(store, [keys[v] for v in order]), now - grace),
                                strict=True):
        old = v < latest and not in_grace and (before_ts is None or m.timestamp < before_ts) and \
            (before_version is None or v < before_version)
        if old and v in tagged:
            tagged_old[tagged[v]] = v
            old = False
        if old and v in branch_bases:
            # Kept for the branch's sake only: pylance 14.0.2 keeps the manifest and the
            # files it reads, but removes its transaction file.
            txn = {m.transaction} if m.transaction else set()
            kept_refs |= m.refs - txn
            gone_refs |= txn
            earliest_kept = m.timestamp if earliest_kept is None else min(earliest_kept, m.timestamp)
        elif old:
            removed.append(v)
            gone_refs |= m.refs
            latest_gone = m.timestamp if latest_gone is None else max(latest_gone, m.timestamp)
        else:
            kept_refs |= m.refs
            earliest_kept = m.timestamp if earliest_kept is None else min(earliest_kept, m.timestamp)
    if tagged_old and error_if_tagged_old_versions:
        raise CleanupError(f"{ds.uri}: {len(tagged_old)} tagged version(s) would be cleaned up: {tagged_old}; "
                           "delete the tags or pass error_if_tagged_old_versions=False")
    cutoffs = _listing_cutoffs(earliest_kept, latest_gone, now, delete_unverified)
    files: list[CleanupFile] = []
    dirs = {**listings.result(), VERSIONS_DIR: listed}
    for prefix in (DATA_DIR, DELETIONS_DIR, TRANSACTIONS_DIR, INDICES_DIR, VERSIONS_DIR):
        cutoff = cutoffs.get(prefix)
        for info in dirs[prefix]:
            kind = _kind(info.key)
            if kind is None or _is_referenced(info.key, kind, kept_refs):
                continue
            mtime = info.last_modified
            if cutoff is not None and mtime is not None and mtime > cutoff:
                continue
            verified = _is_referenced(info.key, kind, gone_refs)
            aged = mtime is not None and mtime < now - UNVERIFIED_THRESHOLD
            if verified or aged or delete_unverified:
                files.append(CleanupFile(info.key, kind, info.size, unverified=not verified))
    manifests = tuple(CleanupFile(keys[v], "manifest", sizes.get(keys[v], 0)) for v in removed)
    return CleanupPlan(ds.uri, ds._storage_options, latest, tuple(removed), manifests, tuple(files))


def _listing_cutoffs(earliest_kept: dt.datetime | None, latest_gone: dt.datetime | None, now: dt.datetime,
                     delete_unverified: bool) -> dict[str, dt.datetime]:
    """Per directory, the modification time after which files are left alone (absent: list it all).

    Files newer than every kept manifest may belong to a commit in flight. When a removed version
    is newer than a kept one (a tag far back), that cutoff would hide its files forever, so then
    everything is listed (the unverified rule still holds). ``_indices/`` is always listed in full:
    the removed versions' index uuids are the proof its files may go, and that proof is gone once
    their manifests are. pylance lists ``data/`` up to 7 days ago at least (an orphan data file
    newer than the kept versions goes once it is old enough) and in full with ``delete_unverified``;
    with ``delete_unverified`` we list every directory in full (beyond pylance: a killed commit's
    transaction and deletion files go too).
    """
    if delete_unverified:
        return {}
    cutoff = None if latest_gone is not None and earliest_kept is not None and latest_gone > earliest_kept \
        else earliest_kept
    if cutoff is None:
        return {}
    return {DATA_DIR: max(cutoff, now - UNVERIFIED_THRESHOLD), DELETIONS_DIR: cutoff, TRANSACTIONS_DIR: cutoff,
            VERSIONS_DIR: cutoff}


def refresh_plan(plan: CleanupPlan, store: ObjectStore | None = None) -> CleanupPlan:
    """Protect every key that a version committed after ``plan`` was made references.

    Args:
        plan: From :func:`plan_cleanup`.
        store: The dataset's store, if the caller has it open (stores keep no listing or
            latest-version state, so an open one sees every commit); otherwise the one store
            cleanup shares per URI and options in this process.
    """
    store = store if store is not None else _store_of(plan.uri, plan.storage_options)
    found = find_latest(store)  # the hint file: no listing when nothing was committed
    refs: set[str] = set()
    for v in range(plan.latest_version + 1, (found[0] if found else 0) + 1):
        with contextlib.suppress(VersionNotFoundError, ObjectNotFoundError):
            refs |= _read_refs(store, manifest_key_of(store, v)).refs
    if not refs:
        return plan
    protected = {f.key for f in plan.files if _is_referenced(f.key, f.kind, refs)}
    return replace(plan, protected=plan.protected | protected)


@functools.lru_cache(maxsize=8)
def _shared_store(uri: str, options: tuple[tuple[str, str], ...]) -> ObjectStore:
    # Batches travel as (uri, options) so any runner can ship them; the batches of one cleanup
    # running in one process (threads, or a Spark executor's Python worker) share one store
    # and its connection pool instead of building a client per batch.
    return open_store(uri, dict(options) or None)


def _store_of(uri: str, options: dict[str, str] | None) -> ObjectStore:
    return _shared_store(uri, tuple(sorted((options or {}).items())))


def execute_cleanup_batch(batch: DeleteBatch) -> tuple[str, ...]:
    """Delete the keys of ``batch``; return those actually deleted (missing ones are skipped)."""
    return tuple(_delete(_store_of(batch.uri, batch.storage_options), batch.keys))


def _delete(store: ObjectStore, keys: Sequence[str]) -> list[str]:
    # One bulk call: S3 deletes 1,000 keys a request instead of one request a key.
    done, failed = store.delete_many(keys)
    for reason in failed.values():
        _log.warning("cleanup could not delete: %s", reason)
    return list(done)


def delete_old_manifests(plan: CleanupPlan) -> tuple[str, ...]:
    """Delete the plan's old manifests (before any file, so no remaining version loses a file)."""
    return tuple(_delete(_store_of(plan.uri, plan.storage_options), [f.key for f in plan.manifests]))


def finish_cleanup(plan: CleanupPlan, deleted: Iterable[Sequence[str]], manifests_deleted: Sequence[str] = ()
                   ) -> CleanupStats:
    """Figures for the keys that were actually deleted (manifests and every batch)."""
    gone = set(manifests_deleted)
    for keys in deleted:
        gone.update(keys)
    tried = [*plan.manifests, *(f for f in plan.files if f.key not in plan.protected)]
    stats = _stats((f for f in tried if f.key in gone), False)
    return replace(stats, failed_deletes=sum(f.key not in gone for f in tried))


def cleanup_old_versions(ds: LanceDataset, older_than: dt.timedelta | None = None,
                         retain_versions: int | None = None, *, delete_unverified: bool = False,
                         error_if_tagged_old_versions: bool = True, dry_run: bool = False,
                         runner: Runner | None = None, batch_size: int = 1000,
                         current_version: int | None = None,
                         commit_grace: dt.timedelta | None = None) -> CleanupStats:
    """Remove old versions and the files only they use: plan, then delete old manifests, then files.

    What pylance does, and we too: a version goes when it is not the latest, not tagged, not a
    branch's base, and old by every policy given (``older_than``, default 14 days without either;
    ``retain_versions``). Files referenced by a removed version go with it; unreferenced files
    go once 7 days old, or at once with ``delete_unverified``.

    Where we go beyond it: a version that was the latest within the last ``commit_grace``
    (default :data:`COMMIT_GRACE`, 5 minutes, or ``$LANCE_FORMAT_COMMIT_GRACE``) stays, with every
    later one, so a commit in flight finds the version it read; pylance has no such grace and
    protects only versions newer than ``older_than`` (``commit_grace=timedelta(0)`` behaves like
    it). With ``delete_unverified`` every managed directory is listed in full, so after failed or
    killed operations one cleanup leaves exactly the files the remaining versions reference.

    Args:
        ds: The dataset.
        older_than: Remove versions older than this.
        retain_versions: Keep at least the newest N versions.
        delete_unverified: Also delete unreferenced files younger than 7 days (only when
            nothing is being written to the dataset).
        error_if_tagged_old_versions: Raise ``CleanupError`` if a tagged version is old.
        dry_run: Delete nothing; report the figures and the exact keys.
        runner: Where the delete batches run (see :func:`execute_cleanup`).
        batch_size: Keys per delete batch.
        current_version: The version counted as current (auto cleanup: the commit's read version).
        commit_grace: Keep versions that were the latest this recently (``None``: the default).

    Returns:
        What was (or, with ``dry_run``, would be) removed.

    Raises:
        InvalidInputError: for a negative ``older_than`` or ``commit_grace``, or ``retain_versions < 1``.
        CleanupError: when a tagged version is old and ``error_if_tagged_old_versions``.
    """
    plan = plan_cleanup(ds, older_than, retain_versions, delete_unverified=delete_unverified,
                        error_if_tagged_old_versions=error_if_tagged_old_versions,
                        current_version=current_version, commit_grace=commit_grace)
    if dry_run:
        return plan.stats(dry_run=True)
    return execute_cleanup(plan, runner=runner, batch_size=batch_size, store=ds._store)


def execute_cleanup(plan: CleanupPlan, *, runner: Runner | None = None, batch_size: int = 1000,
                    store: ObjectStore | None = None) -> CleanupStats:
    """Carry out ``plan``: protect what newer commits reference, then delete.

    Old manifests go first, on the caller's side, so no reader can open a version whose files
    are about to go; the other files follow in batches through ``runner`` (on an object store
    without one, 16 local threads overlap the latency-bound deletes).

    Args:
        plan: From :func:`plan_cleanup`.
        runner: Where the delete batches run (``None``: in this thread on local disk).
        batch_size: Keys per batch.
        store: The dataset's store, if the caller has it open.

    Returns:
        What was actually deleted.
    """
    store = store if store is not None else _store_of(plan.uri, plan.storage_options)
    plan = refresh_plan(plan, store)  # one store for the driver's reads and deletes
    manifests = _delete(store, [f.key for f in plan.manifests])

    if runner is None and not is_low_latency(store):
        # Each batch is one bulk-delete request (up to 1,000 keys); threads overlap the requests.
        runner = LocalRunner(16)
    batches = plan.batches(batch_size)
    if runner is None:
        deleted = [tuple(_delete(store, b.keys)) for b in batches]
    else:
        deleted = runner.map(execute_cleanup_batch, batches)
    return finish_cleanup(plan, deleted, manifests)


# -- lance.auto_cleanup.* -------------------------------------------------------------

_UNITS = {
    "nsec": 1e-9, "ns": 1e-9, "usec": 1e-6, "us": 1e-6, "msec": 1e-3, "ms": 1e-3,
    "seconds": 1, "second": 1, "secs": 1, "sec": 1, "s": 1,
    "minutes": 60, "minute": 60, "mins": 60, "min": 60, "m": 60,
    "hours": 3600, "hour": 3600, "hrs": 3600, "hr": 3600, "h": 3600,
    "days": 86400, "day": 86400, "d": 86400, "weeks": 604800, "week": 604800, "w": 604800,
    "months": 2_630_016, "month": 2_630_016, "M": 2_630_016,
    "years": 31_557_600, "year": 31_557_600, "y": 31_557_600,
}


def parse_duration(text: str) -> dt.timedelta:
    """Parse a humantime duration (``"14days"``, ``"1h 30m"``), as lance reads its config.

    Raises:
        InvalidInputError: if the text is not a duration.
    """
    parts = re.findall(r"(\d+)\s*([A-Za-z]+)", text)
    if not parts or re.sub(r"(\d+)\s*([A-Za-z]+)|\s+", "", text):
        raise InvalidInputError(f"not a duration: {text!r}")
    seconds = 0.0
    for num, unit in parts:
        if unit not in _UNITS:
            raise InvalidInputError(f"unknown duration unit {unit!r} in {text!r}")
        seconds += int(num) * _UNITS[unit]
    return dt.timedelta(seconds=seconds)


def auto_cleanup(ds: LanceDataset) -> CleanupStats | None:
    """Run the cleanup ``lance.auto_cleanup.*`` asks for after the commit of ``ds``'s version.

    As lance's ``auto_cleanup_hook``: only when ``lance.auto_cleanup.interval`` is set and
    divides the new version; ``older_than`` / ``retain_versions`` come from the config.
    A failing cleanup never fails the commit that triggered it (it is logged).
    """
    manifest, store = ds.manifest, ds._store
    cfg = manifest.config
    interval = cfg.get("lance.auto_cleanup.interval")
    if interval is None:
        return None
    try:
        every = int(interval)
        if every <= 0 or manifest.version % every:
            return None
        older = cfg.get("lance.auto_cleanup.older_than")
        retain = cfg.get("lance.auto_cleanup.retain_versions")
        return cleanup_old_versions(ds, parse_duration(older) if older else None,
                                    int(retain) if retain else None, error_if_tagged_old_versions=False,
                                    current_version=manifest.version - 1)
    except (LanceError, ValueError) as exc:
        _log.warning("auto cleanup after version %s of %s failed: %s", manifest.version, store.uri(""), exc)
        return None


__all__ = [
    "COMMIT_GRACE",
    "COMMIT_GRACE_ENV",
    "CleanupFile",
    "CleanupPlan",
    "CleanupStats",
    "DeleteBatch",
    "auto_cleanup",
    "branch_parent_versions",
    "cleanup_old_versions",
    "delete_old_manifests",
    "execute_cleanup",
    "execute_cleanup_batch",
    "finish_cleanup",
    "parse_duration",
    "plan_cleanup",
    "refresh_plan",
    "resolve_commit_grace",
]
