"""A write stream buffered locally and handed to a backend's upload on ``close()``.

Kept apart from the fsspec backend so the S3 backend can use it without importing fsspec.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO

#: Writers keep up to this many bytes in memory before spilling to a temp file.
SPOOL_MAX_MEMORY = 8 * 1024 * 1024


class SpooledWriter(io.RawIOBase):
    """A write-only stream buffered locally and handed to ``commit`` on ``close()``.

    Nothing is visible in the store until ``close()``; ``abort()`` (or leaving a
    ``with`` block by exception) discards the buffered bytes.
    """

    def __init__(self, commit: Callable[[BinaryIO, int], None], max_memory: int = SPOOL_MAX_MEMORY) -> None:
        super().__init__()
        self._commit = commit
        self._buf = tempfile.SpooledTemporaryFile(max_size=max_memory)  # noqa: SIM115 - closed in close()
        self._size = 0
        self._done = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._done:
            raise ValueError("write to a closed writer")
        n = self._buf.write(data)
        self._size += n
        return n

    def tell(self) -> int:
        return self._size

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self._buf.seek(0)
            self._commit(self._buf, self._size)  # type: ignore[arg-type]
        finally:
            self._buf.close()
            super().close()

    def abort(self) -> None:
        """Discard everything written; the object is not created."""
        if self._done:
            return
        self._done = True
        self._buf.close()
        super().close()

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


__all__ = ["SPOOL_MAX_MEMORY", "SpooledWriter"]
