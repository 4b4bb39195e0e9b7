"""Counters of the I/O this process does, per storage root: pylance's ``IOStats`` and scan statistics.

Every read of a data, index or deletion file goes through ``lance_format.file.bytesource.ByteSource``,
which reports each request here (:func:`record_read`); finished data files report their bytes
once (:func:`record_write`). Counts are kept per store root URI (a dataset's ``data/``,
``_indices/`` ... stores are roots under the dataset's URI), so a dataset's figures are the sum
over the roots under its URI (:func:`totals`). Manifest and transaction reads are not counted
(pylance counts them too; they are a few requests per open).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

__all__ = ["IOStats", "incremental", "record_read", "record_write", "snapshot", "totals", "track"]

_lock = threading.Lock()
# root URI -> [read requests, read bytes, write requests, written bytes]
_counts: dict[str, list[int]] = {}
# dataset handle -> counts at the last io_stats_incremental() (or when it opened)
_baselines: weakref.WeakKeyDictionary[Any, tuple[int, int, int, int]] = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class IOStats:
    """I/O of one dataset handle, as pylance's ``IOStats`` (attribute names and repr)."""

    read_iops: int = 0
    read_bytes: int = 0
    write_iops: int = 0
    written_bytes: int = 0

    def __repr__(self) -> str:
        # pylance prints the last counter as ``write_bytes`` though its attribute is ``written_bytes``
        return (f"IOStats(read_iops={self.read_iops}, read_bytes={self.read_bytes}, "
                f"write_iops={self.write_iops}, write_bytes={self.written_bytes})")


def _add(root: str, slot: int, nbytes: int, requests: int = 1) -> None:
    with _lock:
        row = _counts.get(root)
        if row is None:
            row = _counts[root] = [0, 0, 0, 0]
        row[slot] += requests
        row[slot + 1] += nbytes


def record_read(root: str, nbytes: int, requests: int = 1) -> None:
    """Count ``requests`` read requests of ``nbytes`` bytes in all from the store rooted at ``root``."""
    _add(root, 0, int(nbytes), requests)


def record_write(root: str, nbytes: int) -> None:
    """Count one written object of ``nbytes`` bytes in the store rooted at ``root``."""
    _add(root, 2, int(nbytes))


def totals(prefix: str) -> tuple[int, int, int, int]:
    """Summed counters of every root at or under ``prefix``: (reads, read bytes, writes, written bytes)."""
    prefix = prefix.rstrip("/")
    out = [0, 0, 0, 0]
    with _lock:
        for root, row in _counts.items():
            if root == prefix or root.startswith(prefix + "/"):
                for i in range(4):
                    out[i] += row[i]
    return out[0], out[1], out[2], out[3]


def track(handle: Any, prefix: str) -> None:
    """Start counting for a dataset handle (first call only; later versions keep the start)."""
    if handle not in _baselines:
        _baselines[handle] = totals(prefix)


def _since(handle: Any, prefix: str) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    now = totals(prefix)
    base = _baselines.get(handle, (0, 0, 0, 0))
    return now, (now[0] - base[0], now[1] - base[1], now[2] - base[2], now[3] - base[3])


def snapshot(handle: Any, prefix: str) -> IOStats:
    """I/O under ``prefix`` since ``handle`` opened or last reset (counters unchanged)."""
    return IOStats(*_since(handle, prefix)[1])


def incremental(handle: Any, prefix: str) -> IOStats:
    """As :func:`snapshot`, then reset ``handle``'s counters to zero."""
    now, delta = _since(handle, prefix)
    _baselines[handle] = now
    return IOStats(*delta)
