"""The object-store interface every backend implements.

A store is bound to a *root* (a directory or bucket prefix) and speaks in
relative, ``/``-separated keys. Relative keys keep path-escape checks in one
place (:func:`normalize_key`) and let the same dataset code run on local disk,
in memory and on S3.
"""

from __future__ import annotations

import abc
import datetime as dt
import posixpath
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from lance_format.errors import LanceError, ObjectNotFoundError, PathEscapeError
from lance_format.session import Session, default_session

if TYPE_CHECKING:
    from lance_format.storage.external import ExternalManifestStore


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object.

    Attributes:
        key: Key relative to the store root.
        size: Size in bytes.
        last_modified: Modification time (UTC), when the backend knows it.
    """

    key: str
    size: int
    last_modified: dt.datetime | None = None


def normalize_key(key: str) -> str:
    """Return ``key`` normalized, refusing keys that escape the root.

    Raises:
        PathEscapeError: if the key is absolute or climbs above the root.
    """
    if key.startswith("/") or "\\" in key or "\x00" in key:
        raise PathEscapeError(f"path {key!r} is not a relative key inside the dataset root")
    norm = posixpath.normpath(key) if key else ""
    if norm in (".", ""):
        return ""
    if norm == ".." or norm.startswith("../"):
        raise PathEscapeError(f"path {key!r} escapes the dataset root")
    return norm


class ObjectStore(abc.ABC):
    """Byte storage bound to one root URI.

    Implementations must make :meth:`put_if_absent` atomic: of two concurrent
    calls for the same key exactly one succeeds, and an existing object is
    never replaced. Everything else may be last-writer-wins.
    """

    #: The URI this store is rooted at (no trailing slash).
    root: str
    #: Session whose caches hold what is decoded from this store (see :attr:`session`).
    _session: Session | None = None
    #: Whether :meth:`put_if_absent` is atomic across processes and hosts. Commits to a store
    #: without it need an :attr:`external` manifest store (``lance_format.storage.external``).
    atomic_create: bool = True
    #: The external manifest store that arbitrates commits, if one is configured.
    external: ExternalManifestStore | None = None
    #: pylance's ``commit_lock`` given to ``dataset()``: held around each manifest this store's
    #: dataset commits (``lance_format.table.commit.commit_lock_held``); child stores share it.
    commit_lock: Callable[[int], AbstractContextManager[Any]] | None = None

    @property
    def store_path(self) -> str:
        """The root as an object-store path (no scheme, no bucket), the way object_store names it.

        External manifest stores key datasets by it (``base_uri`` in lance's DynamoDB table).
        """
        rest = self.root.split("://", 1)[1] if "://" in self.root else self.root
        return rest.strip("/")

    @property
    def session(self) -> Session:
        """The cache scope of everything read through this store.

        Set by ``open_store(..., session=...)`` and inherited by :meth:`child` stores; the
        process-wide :func:`lance_format.session.default_session` otherwise.
        """
        session = self._session
        return default_session() if session is None else session

    def bind_session(self, session: Session | None) -> None:
        """Scope this store's caches to ``session`` (``None``: the default session)."""
        self._session = session

    # -- reads ---------------------------------------------------------------
    @abc.abstractmethod
    def read(self, key: str) -> bytes:
        """Return the whole object.

        Raises:
            ObjectNotFoundError: if it does not exist.
        """

    @abc.abstractmethod
    def read_range(self, key: str, start: int, length: int) -> bytes:
        """Return ``length`` bytes from ``start`` (fewer only at end of object)."""

    @abc.abstractmethod
    def size(self, key: str) -> int:
        """Return the object's size in bytes."""

    def exists(self, key: str) -> bool:
        """Return whether the object exists."""

        try:
            self.size(key)
        except ObjectNotFoundError:
            return False
        return True

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Yield every object whose key starts with directory ``prefix``, recursively."""

    # -- writes --------------------------------------------------------------
    @abc.abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Create or replace the object."""

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> None:
        """Create the object atomically only if it does not exist.

        Raises:
            ObjectAlreadyExistsError: if the key already exists.
        """

    @abc.abstractmethod
    def open_writer(self, key: str) -> BinaryIO:
        """Return a writable binary stream; the object appears on ``close()``."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Delete the object; deleting a missing object is not an error."""

    def delete_many(self, keys: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
        """Delete every key; missing keys count as deleted (as :meth:`delete` treats them).

        Backends with a bulk delete (S3 ``DeleteObjects``: 1,000 keys a request) override this,
        so a cleanup of thousands of files costs a handful of requests instead of one each.

        Returns:
            The keys deleted, and the keys that could not be deleted with the reason.
        """
        done: list[str] = []
        failed: dict[str, str] = {}
        for key in keys:
            try:
                self.delete(key)
            except (LanceError, OSError) as exc:
                failed[key] = str(exc)
                continue
            done.append(key)
        return tuple(done), failed

    # -- helpers -------------------------------------------------------------
    def uri(self, key: str) -> str:
        """Return the full URI of ``key``."""
        key = normalize_key(key)
        return f"{self.root}/{key}" if key else self.root

    def child(self, key: str) -> ObjectStore:
        """Return a store rooted at the sub-directory ``key``."""
        raise NotImplementedError
