"""Local file-system backend."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import uuid
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from lance_format.errors import LanceError, ObjectAlreadyExistsError, ObjectNotFoundError, StorageError
from lance_format.storage.base import ObjectInfo, ObjectStore, normalize_key


class _AtomicFile:
    """Write to a temp name, then rename into place on close (plain data files only)."""

    def __init__(self, final: str) -> None:
        self._final = final
        self._tmp = f"{final}.{uuid.uuid4().hex}.partial"
        os.makedirs(os.path.dirname(final), exist_ok=True)
        self._fh: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 - closed in close()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        return self._fh.write(data)

    def tell(self) -> int:
        return self._fh.tell()

    def close(self) -> None:
        if self._fh.closed:
            return
        self._fh.close()
        os.replace(self._tmp, self._final)

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)

    def __enter__(self) -> _AtomicFile:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _walk(path: str, key_prefix: str) -> Iterator[ObjectInfo]:
    """Every file below directory ``path``, keyed ``key_prefix + relative path``.

    ``scandir`` tells files from directories without a stat (one stat per file remains, for
    its size and modification time). Symbolic links to directories are not followed (as
    ``os.walk`` does not), links to files are listed with their target's stat.
    """
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return  # removed while listing
    subdirs = []
    utc = dt.UTC
    for entry in entries:
        try:
            if entry.is_dir():
                if not entry.is_symlink():
                    subdirs.append(entry)
                continue
            st = entry.stat()
        except FileNotFoundError:
            continue  # deleted while listing
        yield ObjectInfo(key_prefix + entry.name, st.st_size, dt.datetime.fromtimestamp(st.st_mtime, tz=utc))
    for entry in subdirs:
        yield from _walk(entry.path, f"{key_prefix}{entry.name}/")


class LocalStore(ObjectStore):
    """Objects are files below a local directory."""

    def __init__(self, root: str) -> None:
        if root.startswith("file://"):
            root = root[len("file://") :]
        elif root.startswith("~"):
            # A plain path's "~" / "~user" is the home directory, as pylance expands it
            # (a "file://~/x" URI is not: its "~" is a host name there).
            root = os.path.expanduser(root)
        self._dir = os.path.abspath(root)
        self.root = self._dir.rstrip("/") or "/"

    def _path(self, key: str) -> str:
        key = normalize_key(key)
        return os.path.join(self._dir, key) if key else self._dir

    def read(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise ObjectNotFoundError(f"{self.uri(key)}: not found") from exc

    def read_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as fh:
                fh.seek(start)
                return fh.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise ObjectNotFoundError(f"{self.uri(key)}: not found") from exc

    def size(self, key: str) -> int:
        path = self._path(key)
        try:
            if os.path.isdir(path):
                raise ObjectNotFoundError(f"{self.uri(key)}: is a directory")
            return os.path.getsize(path)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ObjectNotFoundError(f"{self.uri(key)}: not found") from exc

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        base = self._path(prefix)
        if not os.path.isdir(base):
            return
        # Keys by slicing off the root (every path below ``base`` is below the root): relpath
        # per file costs more than the stat on a directory of thousands of files.
        strip = len(self._dir.rstrip(os.sep)) + 1
        rel = base[strip:].replace(os.sep, "/") if len(base) >= strip else ""
        yield from _walk(base, f"{rel}/" if rel else "")

    def write(self, key: str, data: bytes) -> None:
        with _AtomicFile(self._path(key)) as fh:
            fh.write(data)

    def put_if_absent(self, key: str, data: bytes) -> None:
        # Write a staging file, then hard-link it to the final name: link()
        # fails with EEXIST instead of replacing, and readers never see a
        # partially written final file. rename() would silently overwrite.
        final = self._path(key)
        os.makedirs(os.path.dirname(final), exist_ok=True)
        staging = f"{final}#{uuid.uuid4().hex}"
        # No fsync: like object_store's local backend (what pylance uses), durability
        # is left to the OS; the link still makes the file appear whole or not at all.
        with open(staging, "wb") as fh:
            fh.write(data)
        try:
            os.link(staging, final)
        except FileExistsError as exc:
            raise ObjectAlreadyExistsError(f"{self.uri(key)}: already exists") from exc
        except OSError as exc:
            raise StorageError(f"{self.uri(key)}: create-only write failed: {exc}") from exc
        finally:
            os.unlink(staging)

    def open_writer(self, key: str) -> BinaryIO:
        return _AtomicFile(self._path(key))  # type: ignore[return-value]

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def delete_many(self, keys: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
        """Delete ``keys`` (missing ones count as deleted); see :meth:`ObjectStore.delete_many`.

        One loop of ``unlink`` calls: a cleanup of ten thousand files otherwise spends more in
        per-key path building than in the file system.
        """
        root = self._dir.rstrip(os.sep) + os.sep
        done: list[str] = []
        failed: dict[str, str] = {}
        for key in keys:
            try:
                norm = normalize_key(key)  # still refuse keys escaping the root
                if norm:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(root + norm)
            except (LanceError, OSError) as exc:
                failed[key] = f"{self.uri(key) if not isinstance(exc, LanceError) else key}: delete failed: {exc}"
                continue
            done.append(key)
        return tuple(done), failed

    def child(self, key: str) -> LocalStore:
        store = LocalStore(self._path(key))
        store._session = self._session
        store.external = self.external
        store.commit_lock = self.commit_lock
        return store
