"""fsspec-backed object store; registers the ``memory://`` scheme.

``memory://`` is the only fsspec protocol registered by default. As in pylance (whose
object-store registry builds a new in-memory store for every ``memory://`` URI it opens),
each :func:`lance_format.storage.open_store` of a ``memory://`` URI starts an empty store of
its own: a dataset written there lives as long as the objects holding that store (the
returned dataset, its versions and child stores), and opening the URI again sees nothing.
Its lock makes :meth:`FsspecStore.put_if_absent` atomic among the threads of this process.
Other fsspec protocols can be opted into with :func:`register_fsspec_scheme`, but their
create-only write is only as safe as a check-then-write (exactly what lance calls an
"unsafe" commit).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

from lance_format.errors import ObjectAlreadyExistsError, ObjectNotFoundError, StorageError
from lance_format.storage import register_scheme
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key
from lance_format.storage.spool import SPOOL_MAX_MEMORY, SpooledWriter

# One lock per protocol (coarse but enough): it makes the check-then-write of put_if_absent atomic in-process.
_PROTOCOL_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()



def _protocol_lock(protocol: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _PROTOCOL_LOCKS.setdefault(protocol, threading.Lock())


class FsspecStore(ObjectStore):
    """Objects stored through an fsspec file system below ``root``.

    Args:
        root: The store URI, e.g. ``memory://bucket/dataset.lance``.
        storage_options: Passed to the fsspec file-system constructor.
    """

    def __init__(self, root: str, storage_options: Mapping[str, str] | None = None) -> None:
        fs, path = fsspec.core.url_to_fs(root, **dict(storage_options or {}))
        if fs.protocol == "memory" or "memory" in fs.protocol:
            # A fresh, private file system (fsspec's memory store is process-wide by default).
            fs = MemoryFileSystem(global_store=False, skip_instance_cache=True)
        self._fs: Any = fs
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self._protocol: str = protocol
        self._base: str = str(path).rstrip("/")
        head, sep, rest = root.partition("://")
        self.root = f"{head}{sep}{rest.rstrip('/')}" if sep else root.rstrip("/")
        self._lock = _protocol_lock(protocol)

    @classmethod
    def _from_parts(cls, fs: Any, protocol: str, base: str, root: str) -> FsspecStore:
        store = cls.__new__(cls)
        store._fs = fs
        store._protocol = protocol
        store._base = base
        store.root = root
        store._lock = _protocol_lock(protocol)
        return store

    def _path(self, key: str) -> str:
        key = normalize_key(key)
        if not key:
            return self._base
        return f"{self._base}/{key}" if self._base else key

    def _not_found(self, key: str, exc: BaseException | None = None) -> ObjectNotFoundError:
        return ObjectNotFoundError(f"{self.uri(key)}: not found" + (f" ({exc})" if exc else ""))

    def uri(self, key: str) -> str:
        if self.root.endswith("://"):  # bucket-less root such as "memory://"
            return self.root + normalize_key(key)
        return super().uri(key)

    def _is_file(self, path: str) -> bool:
        try:
            return bool(self._fs.info(path).get("type") == "file")
        except FileNotFoundError:
            return False

    # -- reads ---------------------------------------------------------------
    def read(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return bytes(self._fs.cat_file(path))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise self._not_found(key) from exc
        except OSError as exc:
            raise StorageError(f"{self.uri(key)}: read failed: {exc}") from exc

    def read_range(self, key: str, start: int, length: int) -> bytes:
        if start < 0 or length < 0:
            raise StorageError(f"{self.uri(key)}: invalid range start={start} length={length}")
        path = self._path(key)
        try:
            if length == 0:
                if not self._is_file(path):
                    raise self._not_found(key)
                return b""
            return bytes(self._fs.cat_file(path, start=start, end=start + length))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise self._not_found(key) from exc
        except OSError as exc:
            raise StorageError(f"{self.uri(key)}: ranged read failed: {exc}") from exc

    def size(self, key: str) -> int:
        path = self._path(key)
        try:
            info = self._fs.info(path)
        except FileNotFoundError as exc:
            raise self._not_found(key) from exc
        if info.get("type") != "file":
            raise ObjectNotFoundError(f"{self.uri(key)}: is a directory")
        return int(info["size"])

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._path(prefix)
        norm_prefix = normalize_key(prefix)
        try:
            found = self._fs.find(base, detail=True)
        except FileNotFoundError:
            return
        strip = len(self._base) + 1 if self._base else 0
        for path, info in sorted(found.items()):
            if info.get("type") != "file":
                continue
            rel = str(path).lstrip("/") if not self._base else str(path)[strip:]
            if norm_prefix and not rel.startswith(norm_prefix + "/"):
                continue  # find() on a file path returns that file; list only directory contents
            yield ObjectInfo(rel, int(info.get("size", 0)), _modified(info))

    # -- writes --------------------------------------------------------------
    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        try:
            with self._lock:
                self._fs.pipe_file(path, bytes(data))
        except OSError as exc:
            raise StorageError(f"{self.uri(key)}: write failed: {exc}") from exc

    def put_if_absent(self, key: str, data: bytes) -> None:
        path = self._path(key)
        payload = bytes(data)
        with self._lock:
            if self._fs.exists(path):
                raise ObjectAlreadyExistsError(f"{self.uri(key)}: already exists")
            try:
                self._fs.pipe_file(path, payload)
            except OSError as exc:
                raise StorageError(f"{self.uri(key)}: create-only write failed: {exc}") from exc

    def open_writer(self, key: str) -> BinaryIO:
        path = self._path(key)
        uri = self.uri(key)

        def commit(fh: BinaryIO, _size: int) -> None:
            try:
                data = fh.read()
                with self._lock:
                    self._fs.pipe_file(path, data)
            except OSError as exc:
                raise StorageError(f"{uri}: write failed: {exc}") from exc

        return SpooledWriter(commit)  # type: ignore[return-value]

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            with self._lock:
                if self._is_file(path):
                    self._fs.rm_file(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"{self.uri(key)}: delete failed: {exc}") from exc

    def child(self, key: str) -> FsspecStore:
        key = normalize_key(key)
        if not key:
            return self
        store = self._from_parts(self._fs, self._protocol, self._path(key), self.uri(key))
        store._session = self._session
        store.external = self.external
        store.commit_lock = self.commit_lock
        return store

    @property
    def atomic_create(self) -> bool:  # type: ignore[override]
        # put_if_absent checks and writes under a lock of this process: atomic only for a
        # memory file system (which no other process can see). Elsewhere commits need an external manifest store.
        return self._protocol == "memory"


def _modified(info: Mapping[str, Any]) -> dt.datetime | None:
    value = info.get("created", info.get("mtime", info.get("LastModified")))
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, tz=dt.UTC)
    return None


def _factory(uri: str, storage_options: Mapping[str, str]) -> ObjectStore:
    return FsspecStore(uri, storage_options)


def register_fsspec_scheme(scheme: str) -> None:
    """Route ``scheme://`` URIs to :class:`FsspecStore`.

    Only for protocols whose single-process semantics are acceptable: the
    create-only write is atomic only among threads of this process.
    """
    register_scheme(scheme, _factory)


register_fsspec_scheme("memory")

__all__ = ["FsspecStore", "SpooledWriter", "register_fsspec_scheme", "SPOOL_MAX_MEMORY"]
