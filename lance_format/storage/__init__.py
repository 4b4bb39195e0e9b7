"""Object storage behind a small interface, chosen by URI scheme.

``open_store(uri)`` returns an :class:`ObjectStore` rooted at ``uri``:

* no scheme or ``file://`` -> :class:`LocalStore`
* ``memory://`` (and other fsspec protocols) -> :class:`FsspecStore`
* ``s3://`` -> S3 (conditional PUT), added by the S3 backend module
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping

from lance_format.errors import UnsupportedSchemeError
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key
from lance_format.storage.local import LocalStore

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


def open_store(uri: str, storage_options: Mapping[str, str] | None = None) -> ObjectStore:
    """Return a store rooted at ``uri``.

    Raises:
        UnsupportedSchemeError: if no backend handles the URI's scheme.
    """
    uri = str(uri)
    if "://" in uri:  # keep "memory://" intact; only trailing slashes of the path go
        head, rest = uri.split("://", 1)
        uri = f"{head}://{rest.rstrip('/')}"
    else:
        uri = uri.rstrip("/") or "/"
    scheme = uri_scheme(uri)
    opts = dict(storage_options or {})
    if scheme == "file":
        return LocalStore(uri)
    factory = _FACTORIES.get(scheme)
    if factory is None:
        _load_builtin(scheme)
        factory = _FACTORIES.get(scheme)
    if factory is None:
        raise UnsupportedSchemeError(f"no storage backend for {scheme}:// (uri {uri!r})")
    return factory(uri, opts)


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
    "ObjectInfo",
    "ObjectStore",
    "LocalStore",
    "normalize_key",
    "open_store",
    "register_scheme",
    "split_uri",
    "uri_scheme",
]
