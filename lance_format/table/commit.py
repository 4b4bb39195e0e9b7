"""The commit protocol: the single retry loop that commits a transaction.

``lance_format.table.apply.build_manifest`` (base manifest + transaction -> next manifest)
is pure; ``commit_transaction`` is the only retry loop: check conflicts against every version
committed since the read version, rebuild on the newest version, write the ``.txn``
file, then put-if-absent the manifest. A lost race backs off (slotted, with jitter)
and tries again, a bounded number of times.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from lance_format.errors import (
    CommitConflictError,
    DatasetAlreadyExistsError,
    MissingVersionError,
    ObjectAlreadyExistsError,
    VersionNotFoundError,
)
from lance_format.storage import ObjectStore
from lance_format.table import conflicts
from lance_format.table.apply import DEFAULT_DATA_STORAGE_VERSION, build_manifest
from lance_format.table.codec.manifest import encode_manifest_decoded
from lance_format.table.codec.transaction import encode_transaction
from lance_format.table.commit_hooks import (
    DEFAULT_MAX_RETRIES,
    AfterCommit,
    CommitLock,
    check_commit_lock,
    register_after_commit,
    run_after_commit,
)
from lance_format.table.external_commit import put_manifest
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.naming import NamingScheme, manifest_key, transaction_key
from lance_format.table.rebase import Rebase, rebaser_for
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.versions import (
    find_latest,
    latest_version,
    load_manifest,
    load_transaction,
    manifest_key_of,
    remember_written,
    write_hint,
)

#: Hook that rewrites our transaction after a concurrent Delete/Update on the same fragments.
DeletionRebaser = Callable[[ObjectStore, Transaction, Manifest, Manifest], Transaction]


def newer_transactions(store: ObjectStore, after: int, upto: int
                       ) -> Iterator[tuple[int, Manifest, Transaction | None]]:
    """``(version, manifest, transaction)`` of each version in ``after + 1 .. upto``.

    The transaction is ``None`` when the version has none (very old writers).

    Raises:
        MissingVersionError: when a version in the range is gone (cleaned up meanwhile).
            A commit cannot be checked against what it cannot read, so the caller must
            not land on top of it (unless the operation cannot conflict with anything).
    """
    for v in range(after + 1, upto + 1):
        try:
            manifest = load_manifest(store, v)
        except VersionNotFoundError:
            raise MissingVersionError(
                f"{store.uri('')}: version {v}, committed after read version {after}, is gone "
                "(cleaned up meanwhile), so this commit cannot be checked for conflicts against it; "
                "retry the operation on the latest version") from None
        yield v, manifest, load_transaction(store, manifest)


def _outcome(store: ObjectStore, txn: Transaction, version: int, theirs: Transaction | None,
             base_files: dict[int, Any]) -> tuple[conflicts.Outcome, Transaction]:
    if theirs is None:
        raise CommitConflictError(f"{store.uri('')}: version {version} has no transaction; "
                                  f"cannot check {txn.operation.kind} for conflicts")
    return conflicts.check(txn, theirs, base_files), theirs


def check_transaction(store: ObjectStore, txn: Transaction, *, upto: int | None = None) -> None:
    """Run the commit loop's conflict check for ``txn`` now, without committing anything.

    For work that is costly to undo (compaction reserves fragment ids and writes index
    files before it commits): a transaction this refuses would be refused by
    :func:`commit_transaction` too. A conflict a rebase would resolve passes; commits that
    land after this check are checked again by the commit itself.

    Raises:
        CommitConflictError: as :func:`commit_transaction` would (MissingVersionError included).
    """
    latest = upto if upto is not None else (latest_version(store) or 0)
    base_files = {f.id: f.files for f in load_manifest(store, txn.read_version).fragments}
    for v, _manifest, theirs in newer_transactions(store, txn.read_version, latest):
        outcome, committed = _outcome(store, txn, v, theirs, base_files)
        if outcome is not conflicts.Outcome.REBASE_DELETIONS:
            conflicts.raise_for(outcome, txn, committed, v)


def _gone(store: ObjectStore, after: int, upto: int) -> bool:
    """Whether any version in ``after + 1 .. upto`` was removed."""
    for v in range(after + 1, upto + 1):
        try:
            manifest_key_of(store, v)
        except VersionNotFoundError:
            return True
    return False


def _backoff(attempt: int, unit: float) -> None:
    slots = 1 << min(attempt + 2, 6)
    time.sleep(random.randrange(slots) * unit)


@contextlib.contextmanager
def commit_lock_held(store: ObjectStore, lock: CommitLock | None, version: int) -> Iterator[None]:
    """Hold ``lock`` (else the store's ``commit_lock``, set by ``dataset(commit_lock=)``) for ``version``.

    Raises:
        CommitConflictError: the lock could not be taken (pylance reports it as an ``OSError``).
    """
    lock = lock if lock is not None else store.commit_lock
    if lock is None:
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(lock(version))
        except Exception as exc:
            raise CommitConflictError(f"{store.uri('')}: the commit lock for version {version} failed: "
                                      f"{type(exc).__name__}: {exc}") from exc
        yield


def commit_transaction(
    store: ObjectStore,
    txn: Transaction,
    *,
    enable_v2_manifest_paths: bool = True,
    max_retries: int = DEFAULT_MAX_RETRIES,
    data_storage_version: str | None = None,
    must_not_exist: bool = False,
    rebase_deletions: DeletionRebaser | None = None,
    enable_stable_row_ids: bool = False,
    base: Manifest | None = None,
    observed: tuple[int, NamingScheme] | None = None,
    commit_lock: CommitLock | None = None,
) -> Manifest:
    """Commit ``txn`` as the next version of the dataset in ``store``.

    Args:
        store: Store rooted at the dataset.
        txn: The transaction (its ``read_version`` is the version it was built on;
            0 for a new dataset or a blind overwrite).
        enable_v2_manifest_paths: Naming scheme for a *new* dataset (existing ones keep theirs).
        max_retries: How many lost races to retry before giving up.
        data_storage_version: ``data_format`` for a new dataset without fragments.
        must_not_exist: Fail with :class:`DatasetAlreadyExistsError` if any version exists.
        enable_stable_row_ids: Use stable row ids (only when creating the dataset).
        base: The manifest of ``txn.read_version`` if the caller already has it.
        rebase_deletions: Merges deletion vectors when a concurrent Delete/Update touched
            the same fragments; without it such a race is a retryable conflict.
        observed: ``(latest version, naming scheme)`` as the caller just saw them. The first
            attempt trusts it instead of looking again; put-if-absent of the next version
            is the arbiter, so a stale value only costs a retry (which looks properly).
        commit_lock: Held around each manifest write (see :data:`CommitLock`); the store's
            ``commit_lock`` when ``None``.

    Returns:
        The committed manifest.

    Raises:
        CommitConflictError: if a concurrent commit conflicts, or retries run out. The deletion
            files rebases wrote for this commit are removed first.
        DatasetAlreadyExistsError: see ``must_not_exist``.
    """
    read_version = txn.read_version
    base_read = None
    if read_version > 0:
        if base is not None and base.version == read_version:
            base_read = base
        else:
            try:
                base_read = load_manifest(store, read_version)
            except VersionNotFoundError:
                raise MissingVersionError(
                    f"{store.uri('')}: read version {read_version} of this {txn.operation.kind} is gone "
                    "(cleaned up meanwhile); retry the operation on the latest version") from None
        check_feature_flags(base_read, store.uri(""), for_write=True)
    base_files: dict[int, Any] | None = None  # built only if there is something to check against
    checked = read_version
    # Read version 0 (a new dataset, a blind Overwrite, a Restore committed without a read
    # version) is checked against nothing, as pylance; a Restore with one is checked like any
    # other operation (pylance refuses it over a concurrent schema or field metadata edit).
    blind = read_version == 0
    attempt = 0
    started = time.monotonic()
    unit = 0.0
    trusted = observed if observed is not None and observed[0] >= 1 else None
    scheme: NamingScheme | None
    txn_key: str | None = None  # our .txn file once written, until a manifest references it
    try:
        while True:
            if trusted is not None:
                (latest, scheme), trusted = trusted, None
            else:
                found = find_latest(store)
                latest, scheme = (found[0], found[2]) if found is not None else (0, None)
            if must_not_exist and latest:
                raise DatasetAlreadyExistsError(f"{store.uri('')}: dataset already exists (version {latest})")
            if blind:
                checked = max(checked, latest)
            seen: Manifest | None = None  # the newest concurrent manifest, read for the conflict check
            if isinstance(txn.operation, LanceOperation.ReserveFragments) and _gone(store, checked, latest):
                # Reserving ids only raises the latest manifest's counter, which no other
                # operation can invalidate: the versions cleanup removed need no check.
                checked = latest
            for v, theirs_manifest, theirs in newer_transactions(store, checked, latest):
                seen = theirs_manifest
                if base_files is None:
                    base_files = {f.id: f.files for f in base_read.fragments} if base_read is not None else {}
                outcome, committed = _outcome(store, txn, v, theirs, base_files)
                if outcome is conflicts.Outcome.REBASE_DELETIONS:
                    if rebase_deletions is None and base_read is not None:
                        rebase_deletions = rebaser_for(txn, base_read)
                    if rebase_deletions is None:
                        outcome = conflicts.Outcome.RETRYABLE
                    else:
                        assert base_read is not None
                        txn = rebase_deletions(store, txn, theirs_manifest, base_read)
                        continue
                conflicts.raise_for(outcome, txn, committed, v)
            checked = latest
            if scheme is None:
                scheme = NamingScheme.V2 if enable_v2_manifest_paths else NamingScheme.V1
            if latest and base_read is not None and latest == base_read.version:
                current: Manifest | None = base_read
            elif seen is not None and seen.version == latest:
                # Already read and decoded for the conflict check: only the write check is left.
                check_feature_flags(seen, store.uri(manifest_key(latest, scheme)), for_write=True)
                current = seen
            else:
                current = load_manifest(store, latest, for_write=True) if latest else None
            manifest = build_manifest(current, txn, version=latest + 1,
                                      load_version=lambda v: load_manifest(store, v),
                                      data_storage_version=data_storage_version,
                                      enable_stable_row_ids=enable_stable_row_ids)
            txn_bytes = encode_transaction(txn)
            txn_key = transaction_key(txn.file_name)
            store.write(txn_key, txn_bytes)
            data, decoded = encode_manifest_decoded(manifest, txn_bytes, session=store.session)
            key = manifest_key(latest + 1, scheme)
            try:
                with commit_lock_held(store, commit_lock, latest + 1):
                    put_manifest(store, key, latest + 1, data)  # create-only, or the external store's seed protocol
            except ObjectAlreadyExistsError:
                pass
            except BaseException:
                # The manifest may or may not be stored (a lost response): the .txn file may be
                # referenced, so leave it to cleanup's unverified-file rule.
                txn_key = None
                raise
            else:
                txn_key = None  # referenced by the committed manifest
            if txn_key is not None:
                attempt += 1
                if attempt > max_retries:
                    raise CommitConflictError(
                        f"{store.uri('')}: gave up committing {txn.operation.kind} after {max_retries} "
                        "retries (too many concurrent writers)") from None
                if not unit:
                    unit = min(max((time.monotonic() - started) * 1.1, 0.002), 0.05)
                _backoff(attempt, unit)
                continue
            write_hint(store, latest + 1)
            # ``decoded`` is what reading the file back gives (fragments carried over from the
            # base are the same objects), so the next commit on this dataset decodes nothing.
            remember_written(store, key, data, decoded)
            if isinstance(rebase_deletions, Rebase):
                rebase_deletions.discard_written(store, decoded)  # vectors superseded by later rebases
            run_after_commit(store, decoded)
            return decoded
    except CommitConflictError:
        # Giving up: the deletion vectors our rebases wrote are referenced by no manifest.
        if isinstance(rebase_deletions, Rebase):
            rebase_deletions.discard_written(store, None)
        raise
    finally:
        if txn_key is not None:  # failed for sure before any manifest named it: not a leftover
            with contextlib.suppress(Exception):
                store.delete(txn_key)


__all__ = ["DEFAULT_DATA_STORAGE_VERSION", "DEFAULT_MAX_RETRIES", "AfterCommit", "CommitLock", "DeletionRebaser",
           "check_commit_lock", "commit_lock_held",
           "MissingVersionError", "build_manifest", "check_transaction", "commit_transaction", "newer_transactions", "register_after_commit",
           "run_after_commit"]
