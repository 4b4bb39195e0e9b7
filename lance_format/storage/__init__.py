"""Object storage behind a small interface, chosen by URI scheme.

``open_store(uri)`` returns an :class:`ObjectStore` rooted at ``uri``:

* no scheme or ``file://`` -> :class:`LocalStore`
* ``memory://`` (and other fsspec protocols) -> :class:`FsspecStore`
* ``s3://`` -> S3 (conditional PUT), added by the S3 backend module
* ``s3+ddb://bucket/path?ddbTableName=T`` -> S3 with lance's DynamoDB external manifest store

Stores without an atomic create-only write (``ObjectStore.atomic_create`` false) commit only
through an external manifest store (``lance_format.storage.external``), named by the
``external_manifest_store`` storage option (``sqlite:///path.db`` or ``dynamodb://table``).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from lance_format.errors import InvalidInputError, UnsupportedSchemeError
from lance_format.session import Session
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key
from lance_format.storage.local import LocalStore
from lance_format.storage.redact import redact_url

if TYPE_CHECKING:
    from lance_format.storage.external import ExternalManifestStore

StoreFactory = Callable[[str, Mapping[str, str]], ObjectStore]

_FACTORIES: dict[str, StoreFactory] = {}


def register_scheme(scheme: str, factory: StoreFactory) -> None:
    """Register ``factory(uri, storage_options)`` for URIs starting with ``scheme://``."""
    _FACTORIES[scheme] = factory


def uri_scheme(uri: str) -> str:
    """Return the URI scheme, ``"file"`` for plain paths."""
    if "://" not in uri:
        return "file"
    return uri.split("://", 1)[0].lower()


def open_store(uri: str, storage_options: Mapping[str, str] | None = None, *,
               session: Session | None = None) -> ObjectStore:
    """Return a store rooted at ``uri``.

    Args:
        uri: Root of the store.
        storage_options: Backend options.
        session: Cache scope of what is read through the store (and its child stores);
            the process-wide default session when ``None``.

    Raises:
        InvalidInputError: if ``uri`` is empty.
        UnsupportedSchemeError: if no backend handles the URI's scheme.
    """
    uri = str(uri)
    if not uri.strip():
        # An empty path would resolve to "/" below: refuse it rather than write into the root.
        raise InvalidInputError(f"dataset URI must not be empty, got {uri!r}")
    if "://" in uri:  # keep "memory://" intact; only trailing slashes of the path go
        head, rest = uri.split("://", 1)
        uri = f"{head}://{rest.rstrip('/')}"
    else:
        uri = uri.rstrip("/") or "/"
    scheme = uri_scheme(uri)
    opts = dict(storage_options or {})
    external = _external_store(uri, opts)
    if scheme == "s3+ddb":  # lance's DynamoDB commit handler: s3://… with the table in the query
        uri, scheme = "s3://" + uri.split("://", 1)[1].split("?", 1)[0].rstrip("/"), "s3"
    if scheme == "file":
        store: ObjectStore = LocalStore(uri)
    else:
        factory = _FACTORIES.get(scheme)
        if factory is None:
            _load_builtin(scheme)
            factory = _FACTORIES.get(scheme)
        if factory is None:
            raise UnsupportedSchemeError(f"no storage backend for {scheme}:// (uri {uri!r})")
        store = factory(uri, opts)
    if session is not None:
        store.bind_session(session)
    if external is not None:
        store.external = external
    return store


#: ``storage_options`` key naming an external manifest store: ``sqlite:///path/to/file.db`` or
#: ``dynamodb://table`` (credentials and endpoint from the other options).
EXTERNAL_STORE_OPTION = "external_manifest_store"


def _external_store(uri: str, opts: dict[str, str]) -> ExternalManifestStore | None:
    """The external manifest store ``uri`` and ``opts`` ask for (removed from ``opts``)."""
    spec = opts.pop(EXTERNAL_STORE_OPTION, None)
    if uri_scheme(uri) == "s3+ddb":
        query = uri.partition("?")[2]
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        table = params.get("ddbTableName", "")
        if not table or set(params) != {"ddbTableName"}:
            raise InvalidInputError(f"{redact_url(uri.split('?')[0])}: s3+ddb:// URIs need exactly one query "
                                    "parameter, ddbTableName=<table>")
        spec = f"dynamodb://{table}"
    if spec is None:
        return None
    from lance_format.storage.external import DynamoDBManifestStore, SQLiteManifestStore

    kind, sep, rest = str(spec).partition("://")
    if sep and kind == "sqlite" and rest:
        return SQLiteManifestStore(rest)
    if sep and kind == "dynamodb" and rest:
        return DynamoDBManifestStore(rest, opts)
    raise InvalidInputError(f"storage_options {EXTERNAL_STORE_OPTION}={redact_url(str(spec))!r}: expected "
                            "sqlite:///path/to/file.db or dynamodb://<table>")


def split_uri(uri: str) -> tuple[str, str]:
    """Split ``uri`` into (parent URI, last path component).

    ``"/tmp/a"`` -> ``("/tmp", "a")``; ``"/a"`` -> ``("/", "a")``; ``"a"`` -> ``(".", "a")``;
    ``"memory://a"`` -> ``("memory://", "a")``; ``"s3://b/k/x"`` -> ``("s3://b/k", "x")``.
    """
    uri = str(uri)
    stripped = uri.rstrip("/") or uri
    head, sep, name = stripped.rpartition("/")
    if not sep:
        return ".", stripped
    if "://" in uri and head.endswith(":/"):  # "memory://a" -> ("memory://", "a")
        return head + "/", name
    return head or "/", name


def _load_builtin(scheme: str) -> None:
    # Optional backends register themselves on import; keep their heavy
    # dependencies (fsspec, boto3) off the import path of plain local use.
    module = "lance_format.storage.s3" if scheme == "s3" else "lance_format.storage.fsspec_store"
    with contextlib.suppress(ImportError):
        importlib.import_module(module)


__all__ = [
    "EXTERNAL_STORE_OPTION",
    "ObjectInfo",
    "ObjectStore",
    "LocalStore",
    "normalize_key",
    "open_store",
    "register_scheme",
    "split_uri",
    "uri_scheme",
]
