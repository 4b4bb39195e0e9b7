"""Finding and loading versions: manifest listing, latest version, transactions, hint file."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import posixpath
from typing import TYPE_CHECKING, Any

from lance_format.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    InvalidInputError,
    ObjectNotFoundError,
    VersionNotFoundError,
)
from lance_format.lazy import OnFirstUse
from lance_format.session import CacheKind
from lance_format.storage import ObjectStore
from lance_format.table.codec.manifest import decode_manifest, version_info
from lance_format.table.external_commit import resolve_latest, resolve_version
from lance_format.table.manifest import Manifest, check_feature_flags
from lance_format.table.naming import (
    DETACHED_VERSION_MASK,
    HINT_KEY,
    VERSIONS_DIR,
    NamingScheme,
    detached_manifest_key,
    detect_scheme,
    manifest_key,
    parse_manifest_name,
    transaction_key,
)

if TYPE_CHECKING:
    from lance_format.table.codec import transaction as _txn_codec
    from lance_format.table.transaction import Transaction
else:  # transactions are decoded only when asked for (the models cost ~20 ms of import; an open needs none)
    _txn_codec = OnFirstUse("lance_format.table.codec.transaction")


def list_manifests(store: ObjectStore) -> tuple[dict[int, str], NamingScheme | None]:
    """Return ``({version: key}, scheme)`` of every attached manifest.

    Raises:
        CorruptFileError: if V1 and V2 names are mixed.
    """
    names: dict[int, str] = {}
    base_names: list[str] = []
    for info in store.list(VERSIONS_DIR):
        name = posixpath.basename(info.key)
        if posixpath.dirname(info.key) != VERSIONS_DIR:
            continue
        parsed = parse_manifest_name(name)
        if parsed is not None:
            names[parsed[0]] = info.key
            base_names.append(name)
    return names, detect_scheme(base_names)


def latest_version(store: ObjectStore) -> int | None:
    """Return the newest version number, ``None`` if there is no manifest."""
    found = find_latest(store)
    return None if found is None else found[0]


def find_latest(store: ObjectStore) -> tuple[int, str, NamingScheme] | None:
    """Return ``(version, key, scheme)`` of the newest manifest, ``None`` if there is none.

    The hint file lets us avoid listing ``_versions/``: the hinted manifest must exist
    and we step forward past any newer ones (the hint may be stale). A missing, broken
    or too-new hint falls back to a full listing, as lance does. With an external manifest
    store, its newest entry decides (and an unfinished commit is finalised first).
    """
    resolved = resolve_latest(store)
    if resolved is not None:
        return resolved
    hint = read_hint(store)
    if hint is not None and hint >= 1:
        for scheme in (NamingScheme.V2, NamingScheme.V1):
            key = manifest_key(hint, scheme)
            if store.exists(key):
                version = hint
                while store.exists(nxt := manifest_key(version + 1, scheme)):
                    version, key = version + 1, nxt
                return version, key, scheme
    names, listed = list_manifests(store)
    if not names or listed is None:
        return None
    top = max(names)
    return top, names[top], listed


#: Largest version a manifest name can carry (V2 names store ``u64::MAX - version``).
MAX_VERSION = (1 << 64) - 2


def check_version_arg(store: ObjectStore, version: object) -> int:
    """Return ``version`` if it is a version number a caller may ask for.

    Raises:
        InvalidInputError: if it is not an integer (floats, bytes, None...).
        VersionNotFoundError: if it is an integer no manifest can carry (negative, zero, > u64).
    """
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidInputError(f"{store.uri('')}: version must be an integer or a tag name, "
                                f"got {type(version).__name__} {version!r}")
    if not 1 <= version <= MAX_VERSION:
        raise VersionNotFoundError(f"{store.uri('')}: version {version} does not exist")
    return version


def manifest_key_of(store: ObjectStore, version: int) -> str:
    """Return the key of ``version``'s manifest (V2 name first, then V1).

    Raises:
        InvalidInputError: if ``version`` is not an integer.
        VersionNotFoundError: if neither exists.
    """
    check_version_arg(store, version)
    if version & DETACHED_VERSION_MASK and store.exists(detached_manifest_key(version)):
        return detached_manifest_key(version)
    for scheme in (NamingScheme.V2, NamingScheme.V1):
        key = manifest_key(version, scheme)
        if store.exists(key):
            return key
    repaired = resolve_version(store, version)  # committed, but its writer never finalised it
    if repaired is not None:
        return repaired
    raise VersionNotFoundError(f"{store.uri('')}: version {version} does not exist")


#: The manifest this process last wrote or read per dataset, in the store's session:
#: root -> (key, file bytes, manifest). Reading the same bytes back (the next append's base,
#: another handle on the same version) then skips decoding them.
WRITTEN_MANIFEST: CacheKind[tuple[str, bytes, Manifest]] = CacheKind("written_manifest")
#: A decoded manifest holds several times its file size (models, schema, strings).
_MANIFEST_BYTES_PER_FILE_BYTE = 8


def remember_written(store: ObjectStore, key: str, data: bytes, manifest: Manifest) -> None:
    """Record that ``data``, stored at ``key``, decodes to ``manifest`` (see :func:`read_manifest`).

    ``manifest`` must be exactly what :func:`decode_manifest` returns for ``data``.
    """
    cache = store.session.metadata_cache
    cost = (1 + _MANIFEST_BYTES_PER_FILE_BYTE) * len(data)
    if cost > cache.capacity_bytes // 8:
        return
    cache.put(WRITTEN_MANIFEST, store.uri(""), (key, data, manifest), cost)


def read_manifest(store: ObjectStore, key: str, *, for_write: bool = False) -> Manifest:
    """Read, decode and flag-check the manifest stored at ``key``."""
    where = store.uri(key)
    data = store.read(key)
    known = store.session.metadata_cache.get(WRITTEN_MANIFEST, store.uri(""))
    # Equal bytes decode to an equal manifest; anything else (a dataset recreated at the
    # same place, a damaged file) is decoded and checked as usual.
    if known is not None and known[0] == key and known[1] == data:
        manifest = known[2]
    else:
        manifest = decode_manifest(data, where, session=store.session)
        # a long-lived process opens the same version again and again (a handle per request):
        # the next open of these bytes skips decoding them (~half of an open)
        remember_written(store, key, data, manifest)
    check_feature_flags(manifest, where, for_write=for_write)
    return manifest


def load_manifest(store: ObjectStore, version: int | None = None, *, for_write: bool = False) -> Manifest:
    """Load ``version`` (latest when ``None``).

    Raises:
        DatasetNotFoundError: if the store holds no dataset.
        VersionNotFoundError: if the version does not exist.
    """
    if version is None:
        found = find_latest(store)
        if found is None:
            raise DatasetNotFoundError(f"{store.uri('')}: no Lance dataset found (no manifests in _versions/)")
        key = found[1]
    else:
        check_version_arg(store, version)
        try:
            key = manifest_key_of(store, version)
        except VersionNotFoundError:
            if latest_version(store) is None:
                raise DatasetNotFoundError(f"{store.uri('')}: no Lance dataset found") from None
            raise
    try:
        return read_manifest(store, key, for_write=for_write)
    except ObjectNotFoundError as exc:  # removed between list and read (cleanup)
        raise VersionNotFoundError(f"{store.uri(key)}: version {version} vanished") from exc


def load_transaction(store: ObjectStore, manifest: Manifest) -> Transaction | None:
    """Return the transaction that produced ``manifest`` (inline copy first, then the file)."""
    where = f"{store.uri('')} version {manifest.version}"
    if manifest.transaction_bytes is not None:
        return _txn_codec.decode_transaction(manifest.transaction_bytes, f"{where} (inline transaction)")
    if manifest.transaction_file:
        key = transaction_key(manifest.transaction_file)
        try:
            data = store.read(key)
        except ObjectNotFoundError:
            return None
        return _txn_codec.decode_transaction(data, store.uri(key))
    return None


def local_time(ns: int) -> dt.datetime:
    """A commit timestamp (ns since the epoch) as the naive local time pylance's ``versions()`` shows.

    Computed exactly as pylance does, float arithmetic included (``_convert_version_timestamp`` in
    ``python/python/lance/dataset.py``), so the microseconds agree to the last digit.
    """
    return dt.datetime.fromtimestamp(ns // 1e9) + dt.timedelta(microseconds=(ns % 1e9) // 1e3)


def version_summaries(store: ObjectStore) -> list[dict[str, Any]]:
    """Every version's number, timestamp, operation and summary, decoding protobufs only.

    This is the fast path behind ``LanceDataset.versions()``: no fragment models and
    no schema conversion, just the statistics pylance reports.
    """
    names, _ = list_manifests(store)
    out = []
    for version in sorted(names):
        key = names[version]
        where = store.uri(key)
        try:
            data = store.read(key)
        except ObjectNotFoundError:
            continue  # removed by a concurrent cleanup
        info = version_info(data, where, session=store.session)
        op = None
        if info.transaction_bytes is not None:
            op = _txn_codec.operation_kind(info.transaction_bytes, f"{where} (inline transaction)")
        elif info.transaction_file:
            try:
                t = _txn_codec.decode_transaction(store.read(transaction_key(info.transaction_file)), where)
                op = t.operation.kind
            except ObjectNotFoundError:
                op = None
        out.append({
            "version": version,
            "timestamp_ns": info.timestamp_ns,
            "operation": op,
            "metadata": info.summary,
        })
    return out


def write_hint(store: ObjectStore, version: int) -> None:
    """Rewrite ``_versions/latest_version_hint.json`` (after the manifest, never before)."""
    # Only a hint: a failed write must not fail the commit.
    with contextlib.suppress(Exception):
        store.write(HINT_KEY, json.dumps({"version": version}, separators=(",", ":")).encode())


def read_hint(store: ObjectStore) -> int | None:
    """Return the hinted latest version, ``None`` if missing or unreadable."""
    try:
        data = store.read(HINT_KEY)
        if len(data) > _HINT_MAX_BYTES:  # ours is ~20 bytes; anything big is not a hint
            return None
        obj = json.loads(data)
        value = obj.get("version") if isinstance(obj, dict) else None
    except (ObjectNotFoundError, ValueError, CorruptFileError, RecursionError):
        return None
    # An absurd number (negative, a float, beyond u64) is as useless as a missing hint:
    # pylance falls back to listing ``_versions/`` then, and so do we.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        return None
    return value


_HINT_MAX_BYTES = 4096
