"""Detached commits (pylance's ``LanceDataset.commit(..., detached=True)``).

A detached version is built on its read version (any version, detached ones included) and
stored as ``_versions/d{n}.manifest`` under a random version number with the top bit set
(``DETACHED_VERSION_MASK``), as upstream's ``rust/lance/src/dataset/write/commit.rs`` does. It
is not part of the main lineage: the latest version, ``versions()`` and cleanup's version count
ignore it, and it is reached only by checking out its number. No conflict check applies: nothing
else is built on it.
"""

from __future__ import annotations

import random

from lance_format.errors import InvalidInputError, NotSupportedError, ObjectAlreadyExistsError
from lance_format.storage import ObjectStore
from lance_format.table.apply import build_manifest
from lance_format.table.codec.manifest import encode_manifest_decoded
from lance_format.table.codec.transaction import encode_transaction
from lance_format.table.commit import CommitLock, commit_lock_held
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.naming import (
    DETACHED_VERSION_MASK,
    NamingScheme,
    detached_manifest_key,
    transaction_key,
)
from lance_format.table.transaction import Transaction
from lance_format.table.versions import find_latest, load_manifest

#: Draws of a fresh random version before giving up (a clash among 2**63 numbers is unheard of).
_ATTEMPTS = 8


def commit_detached(store: ObjectStore, txn: Transaction, *, base: Manifest | None = None,
                    commit_lock: CommitLock | None = None) -> Manifest:
    """Commit ``txn`` as a detached version of the dataset in ``store``.

    Args:
        store: Store rooted at the dataset.
        txn: The transaction; its ``read_version`` (an existing version) is what it is built on.
        base: The manifest of ``txn.read_version`` if the caller already has it.
        commit_lock: Held around the manifest write (as :func:`commit_transaction` holds it).

    Returns:
        The detached manifest (its ``version`` is the number to check out).

    Raises:
        InvalidInputError: no read version (a detached commit needs a version to build on).
        NotSupportedError: the dataset names its manifests the V1 way (pylance refuses those too).
    """
    where = store.uri("")
    if txn.read_version <= 0:
        raise InvalidInputError(f"{where}: a detached commit needs the read_version it is built on")
    found = find_latest(store)
    if found is not None and found[2] is NamingScheme.V1:
        raise NotSupportedError(f"{where}: detached commits cannot be used with V1 manifest paths "
                                "(migrate_manifest_paths_v2() first)")
    read = base if base is not None and base.version == txn.read_version else load_manifest(store, txn.read_version)
    check_feature_flags(read, where, for_write=True)
    txn_bytes = encode_transaction(txn)
    txn_key = transaction_key(txn.file_name)
    store.write(txn_key, txn_bytes)
    try:
        for _ in range(_ATTEMPTS):
            version = random.randrange((1 << 63) - 1) | DETACHED_VERSION_MASK
            manifest = build_manifest(read, txn, version=version, load_version=lambda v: load_manifest(store, v))
            data, decoded = encode_manifest_decoded(manifest, txn_bytes, session=store.session)
            try:
                with commit_lock_held(store, commit_lock, version):
                    store.put_if_absent(detached_manifest_key(version), data)
            except ObjectAlreadyExistsError:
                continue
            return decoded
    except BaseException:
        store.delete(txn_key)
        raise
    store.delete(txn_key)
    raise InvalidInputError(f"{where}: no free detached version number after {_ATTEMPTS} draws")


__all__ = ["commit_detached"]
