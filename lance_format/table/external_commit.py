"""Committing and resolving manifests through an external manifest store (the seed protocol).

``lance_format.storage.external`` describes the protocol and the stores; this module runs it
on a dataset's object store: :func:`put_manifest` is the create-only manifest write of the
commit loop, :func:`resolve_latest` and :func:`resolve_version` answer "which manifest" from
the store and finish a commit whose writer stopped between deciding and finalising.
"""

from __future__ import annotations

import contextlib
import posixpath
import uuid

from lance_format.errors import NotSupportedError, ObjectAlreadyExistsError, ObjectNotFoundError, StorageError
from lance_format.storage import ObjectStore
from lance_format.storage.external import ExternalManifestStore, ManifestEntry
from lance_format.table.naming import NamingScheme, parse_manifest_name


def _path(store: ObjectStore, key: str) -> str:
    base = store.store_path
    return f"{base}/{key}" if base else key


def _key(store: ObjectStore, path: str) -> str:
    base = store.store_path
    if base and not path.startswith(base + "/"):
        raise StorageError(f"{store.uri('')}: external manifest store entry {path!r} is outside the dataset")
    return path[len(base) + 1:] if base else path


def _final_key(staging_key: str) -> str:
    # ``{final}-{uuid}``: lance's make_staging_manifest_path appends a dash and a UUID.
    at = staging_key.rfind(".manifest-")
    if at < 0:
        raise StorageError(f"staged manifest name {staging_key!r} does not end in .manifest-<uuid>")
    return staging_key[: at + len(".manifest")]


def put_manifest(store: ObjectStore, key: str, version: int, data: bytes) -> None:
    """Create manifest ``key`` of ``version`` only if no other writer committed ``version``.

    Without an external store this is the object store's own create-only write.

    Raises:
        ObjectAlreadyExistsError: another writer has the version (the commit loop retries).
        NotSupportedError: the store has no atomic create and no external store is configured.
    """
    external = store.external
    if external is None:
        if not store.atomic_create:
            raise NotSupportedError(
                f"{store.uri('')}: this object store cannot create a file atomically, so concurrent "
                "commits could overwrite each other; configure an external manifest store "
                "(storage_options external_manifest_store='sqlite:///…' or 'dynamodb://<table>', "
                "or an s3+ddb:// URI)")
        store.put_if_absent(key, data)
        return
    staging = f"{key}-{uuid.uuid4()}"
    store.write(staging, data)
    try:
        external.put_if_not_exists(store.store_path, version, _path(store, staging), len(data))
    except ObjectAlreadyExistsError:
        with contextlib.suppress(Exception):
            store.delete(staging)  # lost the race: the staged copy is nobody's
        raise
    # Decided: from here on the version is ours even if finalising fails (a reader repairs it).
    with contextlib.suppress(StorageError):
        _finalize(store, external, ManifestEntry(version, _path(store, staging), len(data)), data)


def _finalize(store: ObjectStore, external: ExternalManifestStore, entry: ManifestEntry,
              data: bytes | None = None) -> str:
    staging = _key(store, entry.path)
    final = _final_key(staging)
    if data is None:
        try:
            data = store.read(staging)
        except ObjectNotFoundError:
            if not store.exists(final):  # finalised by someone else meanwhile, or lost
                raise StorageError(f"{store.uri(staging)}: version {entry.version} is committed in the "
                                   "external manifest store but its manifest is missing") from None
            data = None
    if data is not None:
        store.write(final, data)  # the version is decided: a plain copy is safe
    external.put_if_exists(store.store_path, entry.version, _path(store, final),
                           len(data) if data is not None else store.size(final))
    with contextlib.suppress(Exception):
        store.delete(staging)
    return final


def _scheme(key: str) -> NamingScheme:
    parsed = parse_manifest_name(posixpath.basename(key))
    if parsed is None:
        raise StorageError(f"{key!r} is not a manifest name")
    return parsed[1]


def resolve_latest(store: ObjectStore) -> tuple[int, str, NamingScheme] | None:
    """``(version, key, scheme)`` of the newest version the external store knows, finalising
    it if its writer stopped half way; ``None`` without an external store or entries."""
    external = store.external
    if external is None:
        return None
    entry = external.get_latest(store.store_path)
    if entry is None:
        return None
    key = _key(store, entry.path) if entry.finalized else _finalize(store, external, entry)
    return entry.version, key, _scheme(key)


def resolve_version(store: ObjectStore, version: int) -> str | None:
    """Key of ``version``'s manifest per the external store (finalised if needed), else ``None``."""
    external = store.external
    if external is None:
        return None
    entry = external.get(store.store_path, version)
    if entry is None:
        return None
    return _key(store, entry.path) if entry.finalized else _finalize(store, external, entry)


__all__ = ["put_manifest", "resolve_latest", "resolve_version"]
