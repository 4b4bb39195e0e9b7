"""Reading page buffers into Arrow-pool memory.

``ByteSource.read_ranges`` returns ``bytes``: every large read allocates a fresh object that the
C allocator maps and unmaps, so a 64 MiB page costs page faults several times the copy itself.
For local files this module reads with ``os.preadv`` straight into buffers from Arrow's memory
pool, which keeps freed memory for the next page (a full scan then runs several times faster).
Other stores, and ranges inside the source's cached tail, go through ``read_ranges``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, StorageError

_MERGE_GAP = 4096  # ranges closer than this are read with one request (as ByteSource does)


def read_ranges(
    source: Any, ranges: Sequence[tuple[int, int]], what: str = "page buffer"
) -> list[np.ndarray]:
    """Read ``(start, length)`` ranges of ``source`` as uint8 arrays (read-only views)."""
    fd = getattr(source, "_fd", None)
    tail_start = getattr(source, "_tail_start", None)
    if not ranges or not isinstance(fd, int) or not isinstance(tail_start, int):
        return [np.frombuffer(b, np.uint8) for b in source.read_ranges(ranges, what)]
    for start, length in ranges:
        source.check_range(start, length, what)
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    out: list[np.ndarray] = [np.zeros(0, np.uint8)] * len(ranges)
    i = 0
    while i < len(order):
        start, length = ranges[order[i]]
        end = start + length
        j = i + 1
        while j < len(order) and ranges[order[j]][0] <= end + _MERGE_GAP:
            end = max(end, ranges[order[j]][0] + ranges[order[j]][1])
            j += 1
        if start >= tail_start:
            block = np.frombuffer(source.read_range(start, end - start, what), np.uint8)
        else:
            block = _pread(fd, start, end - start, source)
        for k in order[i:j]:
            s, n = ranges[k]
            out[k] = block[s - start : s - start + n]
        i = j
    return out


def _pread(fd: int, start: int, length: int, source: Any) -> np.ndarray:
    arr = np.frombuffer(pa.allocate_buffer(length), np.uint8) if length else np.zeros(0, np.uint8)
    got = 0
    while got < length:
        try:
            n = os.preadv(fd, [arr[got:].data], start + got)
        except OSError as exc:
            raise StorageError(f"{source.path}: read of {length} bytes at {start} failed: {exc}") from exc
        if n <= 0:
            raise CorruptFileError(
                f"{source.path}: short read at offset {start} ({got} of {length} bytes); the file is truncated"
            )
        got += n
    arr.flags.writeable = False
    return arr
