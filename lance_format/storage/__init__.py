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
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lance_format.errors import InvalidInputError, UnsupportedSchemeError
from lance_format.session import Session
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key
from lance_format.storage.external import DynamoDBManifestStore, SQLiteManifestStore
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


#: Longest file or directory name most local file systems take (NAME_MAX); a longer one
#: fails with ENAMETOOLONG half-way through a write.
NAME_MAX = 255
_URL_EDGE = "".join(chr(c) for c in range(0x21))  # C0 controls and space
_URL_DROPPED = re.compile("[\t\n\r]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def uri_text(uri: Any) -> str:
    """A dataset URI argument (``str`` or path-like) as text, refused if it cannot name a dataset.

    ``scheme://`` URIs are read as URLs are (the WHATWG rules lance's URL parser follows): C0
    controls and spaces around them are dropped, and so are tabs and newlines inside, so
    ``"file:///d\\x00"`` opens ``/d`` as pylance does. Any control character left (a NUL
    inside a path, a tab in a plain path) is refused: no file system or object store key
    takes it, and Python would fail with a bare ``ValueError``. Local path components
    longer than :data:`NAME_MAX` bytes are refused before anything is written.

    Raises:
        InvalidInputError: naming the URI and what is wrong with it.
    """
    if isinstance(uri, os.PathLike):
        uri = os.fspath(uri)
    if not isinstance(uri, str):
        raise InvalidInputError(f"dataset uri must be a str or Path, got {type(uri).__name__} {uri!r:.80}")
    text: str = uri
    if "://" in text.lstrip(_URL_EDGE):
        text = _URL_DROPPED.sub("", text.strip(_URL_EDGE))
    bad = _CONTROL.search(text)
    if bad is not None:
        what = "a NUL byte" if bad.group() == "\x00" else f"control character U+{ord(bad.group()):04X}"
        raise InvalidInputError(f"dataset uri {redact_url(text)!r:.200} contains {what} at position {bad.start()}")
    if uri_scheme(text) == "file":
        for part in text.split("://", 1)[-1].split("/"):
            if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
                raise InvalidInputError(f"dataset uri {redact_url(text)!r:.120}: path component {part[:40]!r}... is longer "
                                        f"than {NAME_MAX} bytes")
    return text


def check_storage_options(options: Any) -> None:
    """``storage_options`` must be ``None`` or a ``dict[str, str]``, as pylance requires.

    Raises:
        InvalidInputError: naming the offending key or value (values are not shown: they
            may be credentials).
    """
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"storage_options must be a dict of strings, got {type(options).__name__}")
    for key, value in options.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"storage_options keys must be strings, got {type(key).__name__} {key!r:.40}")
        if not isinstance(value, str):
            raise InvalidInputError(f"storage_options[{key!r}] must be a string, got {type(value).__name__}")


def open_store(uri: str, storage_options: Mapping[str, str] | None = None, *,
               session: Session | None = None) -> ObjectStore:
    """Return a store rooted at ``uri``.

    Args:
        uri: Root of the store.
        storage_options: Backend options.
        session: Cache scope of what is read through the store (and its child stores);
            the process-wide default session when ``None``.

    Raises:
        InvalidInputError: if ``uri`` is empty or malformed (see :func:`uri_text`), or
            ``storage_options`` is not a ``dict[str, str]``.
        UnsupportedSchemeError: if no backend handles the URI's scheme.
    """
    uri = uri_text(uri)
    check_storage_options(storage_options)
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
    "uri_text",
    "check_storage_options",
]
