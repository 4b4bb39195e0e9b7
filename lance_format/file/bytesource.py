"""Random access to one stored object: cached tail, coalesced and vectored range reads.

:class:`ByteSource` is how every file reader reaches the bytes of a data file (2.x containers,
legacy files): local files through ``pread``/``preadv`` on one descriptor, other stores through
``ObjectStore.read_range`` with concurrent requests. ``lance_format.file.container`` re-exports it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from lance_format.errors import CorruptFileError, StorageError
from lance_format.io_stats import record_read
from lance_format.storage import ObjectStore, uri_scheme

_GATHER_GAP = 4096  # local files: ranges closer than this are read with one request
#: Up to this many ranges, :meth:`ByteSource.gather` plans its reads in plain integers.
_FEW_RANGES = 16
#: Object stores: ranges closer than this share a request, and a merged request is cut into
#: parts of at most ``_REMOTE_MAX_REQUEST`` fetched side by side. A request costs a round trip
#: (tens of ms on S3) where a MiB more of transfer costs about as much, so scattered small reads
#: (a take) are worth merging far more eagerly than on disk. 1 MiB is the ``get_ranges`` default
#: of Rust's ``object_store`` crate; 16 MiB is lance's ``DEFAULT_MAX_IOP_SIZE``
#: (``rust/lance-io/src/object_store.rs``).
_REMOTE_GAP = 1 << 20
_REMOTE_MAX_REQUEST = 16 << 20

#: A bytes-like buffer returned by :class:`ByteSource`.
Buf = bytes | memoryview


class ByteSource:
    """Random access to one object, with a cached tail and coalesced range reads.

    Local files are read with ``os.pread`` on one descriptor; other stores go through
    ``ObjectStore.read_range``.

    Args:
        store: Store holding the object.
        key: Key of the object in ``store``.
        size: Known object size (skips a metadata request); validated against the footer.
    """

    def __init__(self, store: ObjectStore, key: str, size: int | None = None) -> None:
        self.store = store
        self.key = key
        self.path = store.uri(key)
        self._fd: int | None = None
        #: Modification time of a local file (ns), part of the metadata cache key; None elsewhere.
        self.mtime_ns: int | None = None
        if uri_scheme(self.path) == "file":
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
                st = os.fstat(self._fd)
                if stat.S_ISDIR(st.st_mode):
                    self.close()
                else:
                    self.mtime_ns = st.st_mtime_ns
                    if size is None:
                        size = st.st_size
            except OSError:
                self._fd = None  # fall back to the store, which raises its own not-found error
        if size is None:
            size = store.size(key)
        self.size = int(size)
        self._tail_start = self.size
        self._tail = b""

    def close(self) -> None:
        """Release the file descriptor (if any)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        # At interpreter shutdown module globals (``contextlib``, ``os``) may already be None.
        try:  # noqa: SIM105 - contextlib itself may be gone here
            self.close()
        except Exception:  # noqa: BLE001, S110 - nothing to report to during teardown
            pass

    def prefetch_tail(self, nbytes: int) -> None:
        """Read and cache the last ``nbytes`` bytes."""
        start = max(0, self.size - nbytes)
        if start < self._tail_start:
            # only the bytes not cached yet: a file whose metadata outgrows the first guess
            # costs one more request for the difference, not a second read of the whole tail
            head = self._raw_read(start, self._tail_start - start)
            self._tail = head + self._tail if self._tail else head
            self._tail_start = start

    def _raw_read(self, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        record_read(self.store.root, length)  # LanceDataset.io_stats_* and scan statistics
        if self._fd is not None:
            try:
                data = os.pread(self._fd, length, start)
                # pread may return short reads for very large requests; finish them
                while len(data) < length:
                    more = os.pread(self._fd, length - len(data), start + len(data))
                    if not more:
                        break
                    data += more
            except OSError as exc:
                raise StorageError(f"{self.path}: read of {length} bytes at {start} failed: {exc}") from exc
        else:
            data = self.store.read_range(self.key, start, length)
        if len(data) != length:
            raise CorruptFileError(
                f"{self.path}: short read at offset {start} ({len(data)} of {length} bytes); "
                "the file is truncated"
            )
        return data

    def check_range(self, start: int, length: int, what: str) -> None:
        """Raise CorruptFileError unless ``[start, start+length)`` lies inside the file."""
        if start < 0 or length < 0 or start + length > self.size:
            raise CorruptFileError(
                f"{self.path}: {what} [{start}, {start + length}) lies outside the file ({self.size} bytes)"
            )

    def read_range(self, start: int, length: int, what: str = "buffer") -> bytes:
        """Return exactly ``length`` bytes at ``start``."""
        self.check_range(start, length, what)
        if start >= self._tail_start:
            off = start - self._tail_start
            return self._tail[off : off + length]
        return self._raw_read(start, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]], what: str = "buffer") -> list[Buf]:
        """Read several ``(start, length)`` ranges, merging ones that are close together.

        Returns bytes-like objects (``bytes`` or zero-copy ``memoryview`` slices of a merged read).
        """
        if not ranges:
            return []
        for start, length in ranges:
            self.check_range(start, length, what)
        if self._fd is None and len(ranges) > 1:  # object stores: merged requests, side by side
            lens = [n for _s, n in ranges]
            merged, pos = self.gather(np.array([s for s, _n in ranges], np.int64), np.array(lens, np.int64), what)
            view = merged.data
            return [view[p : p + n] for p, n in zip(pos.tolist(), lens, strict=True)]
        out: list[Buf] = [b""] * len(ranges)
        for start, end, members in _merged_ranges(ranges):
            if len(members) == 1:
                out[members[0]] = self.read_range(start, end - start, what)
            else:
                blob = memoryview(self.read_range(start, end - start, what))
                for k in members:
                    s, n = ranges[k]
                    out[k] = blob[s - start : s - start + n]
        return out

    def read_arrays(self, ranges: Sequence[tuple[int, int]], what: str = "buffer") -> list[np.ndarray]:
        """:meth:`read_ranges` as read-only uint8 arrays, read into Arrow-pool memory when local.

        ``read_ranges`` returns ``bytes``: every large read allocates a fresh object that the C
        allocator maps and unmaps, so a 64 MiB page costs page faults several times the copy
        itself. Local files are read here with ``os.preadv`` straight into buffers from Arrow's
        memory pool, which keeps freed memory for the next page (a full scan then runs several
        times faster). Other stores, and ranges inside the cached tail, go through ``read_range``.
        """
        if not ranges or self._fd is None:
            return [np.frombuffer(b, np.uint8) for b in self.read_ranges(ranges, what)]
        for start, length in ranges:
            self.check_range(start, length, what)
        out: list[np.ndarray] = [np.zeros(0, np.uint8)] * len(ranges)
        for start, end, members in _merged_ranges(ranges):
            if start >= self._tail_start:
                block = np.frombuffer(self.read_range(start, end - start, what), np.uint8)
            else:
                block = self._pread_pooled(self._fd, start, end - start)
            for k in members:
                s, n = ranges[k]
                out[k] = block[s - start : s - start + n]
        return out

    def _pread_pooled(self, fd: int, start: int, length: int) -> np.ndarray:
        arr = np.frombuffer(pa.allocate_buffer(length), np.uint8) if length else np.zeros(0, np.uint8)
        record_read(self.store.root, length)
        got = 0
        while got < length:
            try:
                n = os.preadv(fd, [arr[got:].data], start + got)
            except OSError as exc:
                raise StorageError(f"{self.path}: read of {length} bytes at {start} failed: {exc}") from exc
            if n <= 0:
                raise CorruptFileError(
                    f"{self.path}: short read at offset {start} ({got} of {length} bytes); "
                    "the file is truncated"
                )
            got += n
        arr.flags.writeable = False
        return arr

    def gather(
        self, starts: np.ndarray, lengths: np.ndarray | int, what: str = "buffer"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Read many small ranges with few requests.

        Ranges closer than 4 KiB (local files) or 1 MiB (object stores) are merged into one
        request; local files are read with one ``pread`` per merged block, object stores with
        concurrent requests of at most 16 MiB. (A memory map would avoid the per-block call but
        maps ~64 KiB around every touched page, inflating RSS.)

        Returns:
            ``(blob, pos)``: range ``i`` is ``blob[pos[i] : pos[i] + lengths[i]]``.
        """
        starts = np.asarray(starts, dtype=np.int64)
        if starts.size == 0:
            return np.empty(0, np.uint8), np.empty(0, np.int64)
        gap = _GATHER_GAP if self._fd is not None else _REMOTE_GAP
        few = starts.ndim == 1 and starts.size <= _FEW_RANGES
        if few:  # a take of a few rows: plain integers cost less than a dozen numpy calls
            blocks, where, total = self._few_blocks(starts, lengths, gap, what)
        else:
            lens = np.broadcast_to(np.asarray(lengths, dtype=np.int64), starts.shape)
            ends = starts + lens
            if int(starts.min()) < 0 or int(lens.min()) < 0 or int(ends.max()) > self.size:
                raise CorruptFileError(f"{self.path}: {what} ranges reach outside the file ({self.size} bytes)")
            order = np.argsort(starts, kind="stable")
            s = starts[order]
            e = np.maximum.accumulate(ends[order])
            new = np.empty(len(s), dtype=bool)
            new[0] = True
            new[1:] = s[1:] > e[:-1] + gap
            first = np.flatnonzero(new)
            last = np.append(first[1:] - 1, len(s) - 1)
            bstart = s[first]
            bsize = e[last] - bstart
            bbase = np.zeros(len(first), dtype=np.int64)
            np.cumsum(bsize[:-1], out=bbase[1:])
            total = int(bsize.sum())
            blocks = list(zip(bstart.tolist(), bsize.tolist(), bbase.tolist(), strict=True))
        blob = pooled_bytes(total)

        def fetch(block: tuple[int, int, int]) -> None:
            b0, n, base = block
            blob[base : base + n] = np.frombuffer(self.read_range(b0, n, what), dtype=np.uint8)

        fd, tail_start = self._fd, self._tail_start
        if fd is not None:
            self._pread_blocks(fd, blob, blocks, tail_start)
        else:
            parts = [(b0 + k, min(_REMOTE_MAX_REQUEST, n - k), base + k)
                     for b0, n, base in blocks for k in range(0, n, _REMOTE_MAX_REQUEST)]
            if len(parts) > 1:  # object stores: independent requests, issued concurrently
                with ThreadPoolExecutor(max_workers=min(16, len(parts))) as pool:
                    list(pool.map(fetch, parts))
            else:
                for part in parts:
                    fetch(part)
        if few:
            return blob, np.array(where, dtype=np.int64)
        block_of = np.cumsum(new) - 1
        pos = np.empty(len(s), dtype=np.int64)
        pos[order] = bbase[block_of] + (s - bstart[block_of])
        return blob, pos

    def _few_blocks(self, starts: np.ndarray, lengths: np.ndarray | int, gap: int, what: str
                    ) -> tuple[list[tuple[int, int, int]], list[int], int]:
        """:meth:`gather`'s merged blocks ``(file offset, size, blob offset)`` for a few ranges, each
        range's position in the blob, and the blob's size (the same merging, in plain integers)."""
        st = starts.tolist()
        ln = [int(lengths)] * len(st) if isinstance(lengths, (int, np.integer)) else \
            np.broadcast_to(np.asarray(lengths, dtype=np.int64), starts.shape).tolist()
        if min(st) < 0 or min(ln) < 0 or max(a + b for a, b in zip(st, ln, strict=True)) > self.size:
            raise CorruptFileError(f"{self.path}: {what} ranges reach outside the file ({self.size} bytes)")
        blocks: list[tuple[int, int, int]] = []
        where = [0] * len(st)
        order = sorted(range(len(st)), key=st.__getitem__)  # stable, as the numpy path's argsort
        total = 0  # bytes of the blocks closed so far: the open block's offset in the blob
        b0, b1 = st[order[0]], st[order[0]] + ln[order[0]]
        for i in order:
            a, b = st[i], st[i] + ln[i]
            if a > b1 + gap:  # too far from the open block: close it
                blocks.append((b0, b1 - b0, total))
                total += b1 - b0
                b0, b1 = a, b
            else:
                b1 = max(b1, b)
            where[i] = total + a - b0
        blocks.append((b0, b1 - b0, total))
        return blocks, where, total + b1 - b0

    def _pread_blocks(self, fd: int, blob: np.ndarray, blocks: list[tuple[int, int, int]], tail_start: int) -> None:
        """Read ``(file offset, size, blob offset)`` blocks of a local file into ``blob``.

        The hot path of random access (bounds were checked by the caller). Every block is first
        read without waiting for the device (``RWF_NOWAIT``): on a warm page cache that is all
        there is, one call per block. The blocks that were not cached are then announced to the
        kernel together (``POSIX_FADV_WILLNEED``), so a cold take waits for the device about once
        rather than once per block, and read normally. Announcing every block up front cost a
        second system call per block even when everything was cached.
        """
        global _NOWAIT
        record_read(self.store.root, sum(n for _b0, n, _base in blocks), len(blocks))  # one call per gather
        mv = blob.data  # slicing a memoryview is cheaper than a numpy slice's ``.data``
        cold: list[tuple[int, int, int]] = []
        for b0, n, base in blocks:
            if b0 >= tail_start:
                mv[base : base + n] = self._tail[b0 - tail_start : b0 - tail_start + n]
                continue
            if not _NOWAIT:
                cold.append((b0, n, base))
                continue
            try:
                got = os.preadv(fd, [mv[base : base + n]], b0, _NOWAIT)
            except BlockingIOError:
                got = 0
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise StorageError(f"{self.path}: read of {n} bytes at {b0} failed: {exc}") from exc
                _NOWAIT = 0  # a kernel or file system without it: plain reads from now on
                got = 0
            if got < n:
                cold.append((b0 + got, n - got, base + got))
        if len(cold) >= _PARALLEL_PREADS_MIN and hasattr(os, "posix_fadvise"):
            for b0, n, _base in cold:
                os.posix_fadvise(fd, b0, n, os.POSIX_FADV_WILLNEED)
        for b0, n, base in cold:
            try:
                got = os.preadv(fd, [mv[base : base + n]], b0)
            except OSError as exc:
                raise StorageError(f"{self.path}: read of {n} bytes at {b0} failed: {exc}") from exc
            if got != n:  # short: finish byte by byte, which names a truncated file
                mv[base : base + n] = self._raw_read(b0, n)

    def read_into(self, starts: np.ndarray, lengths: np.ndarray, dest: np.ndarray, dest_pos: np.ndarray,
                  what: str = "buffer") -> None:
        """Read range ``i`` into ``dest[dest_pos[i] : dest_pos[i] + lengths[i]]``, with few requests.

        Unlike :meth:`gather` nothing is copied twice: local files are read with one ``preadv``
        per run of close, non-overlapping ranges, whose iovecs point straight at the ranges'
        places in ``dest`` (the bytes between them land in a scratch buffer).

        Raises:
            CorruptFileError: a range reaches outside the file.
        """
        starts = np.asarray(starts, dtype=np.int64)
        lens = np.asarray(lengths, dtype=np.int64)
        if starts.size == 0:
            return
        if int(starts.min()) < 0 or int(lens.min()) < 0 or int((starts + lens).max()) > self.size:
            raise CorruptFileError(f"{self.path}: {what} ranges reach outside the file ({self.size} bytes)")
        fd = self._fd
        if fd is None:  # object stores: concurrent requests through gather, then place the bytes
            blob, pos = self.gather(starts, lens, what)
            for p, n, d in zip(pos.tolist(), lens.tolist(), np.asarray(dest_pos).tolist(), strict=True):
                dest[d : d + n] = blob[p : p + n]
            return
        order = np.argsort(starts, kind="stable")
        s, n, d = starts[order].tolist(), lens[order].tolist(), np.asarray(dest_pos)[order].tolist()
        scratch = np.empty(_GATHER_GAP, dtype=np.uint8)
        requests: list[tuple[int, int, int, int, list[memoryview]]] = []  # (start, end, first, stop, iovecs)
        i = 0
        while i < len(s):
            b0, end = s[i], s[i] + n[i]
            iov = [dest[d[i] : d[i] + n[i]].data]
            j = i + 1
            # overlapping ranges cannot share one vector read: they start a new request
            while j < len(s) and end <= s[j] <= end + _GATHER_GAP and len(iov) < _IOV_MAX - 1:
                if s[j] > end:
                    iov.append(scratch[: s[j] - end].data)
                iov.append(dest[d[j] : d[j] + n[j]].data)
                end = s[j] + n[j]
                j += 1
            requests.append((b0, end, i, j, iov))
            i = j
        if len(requests) >= _PARALLEL_PREADS_MIN and hasattr(os, "posix_fadvise"):
            lo, hi = requests[0][0], min(max(r[1] for r in requests), self._tail_start)
            if hi > lo and 2 * sum(r[1] - r[0] for r in requests) >= hi - lo:
                # dense (a scan window): one hint for the whole span instead of one call per
                # request (thousands per legacy window, ~1 us each on a warm cache)
                os.posix_fadvise(fd, lo, hi - lo, os.POSIX_FADV_WILLNEED)
            else:
                for b0, end, _i, _j, _iov in requests:  # see gather: a cold cache fetches them concurrently
                    if b0 < self._tail_start:
                        os.posix_fadvise(fd, b0, end - b0, os.POSIX_FADV_WILLNEED)
        record_read(self.store.root, sum(r[1] - r[0] for r in requests), len(requests))  # one call per read
        for b0, end, i, j, iov in requests:
            if b0 < self._tail_start:
                try:
                    got = os.preadv(fd, iov, b0)
                except OSError as exc:
                    raise StorageError(f"{self.path}: read of {end - b0} bytes at {b0} failed: {exc}") from exc
            else:
                got = -1  # inside the cached tail
            if got != end - b0:  # the tail, or a short read: range by range (raises on truncation)
                for k in range(i, j):
                    dest[d[k] : d[k] + n[k]] = np.frombuffer(self.read_range(s[k], n[k], what), dtype=np.uint8)


#: Smaller buffers come from ``np.empty``: the pool's first allocations in a process commit whole
#: segments, which a small read (a take) never wins back.
_POOL_MIN_BYTES = 1 << 16


def pooled_bytes(nbytes: int) -> np.ndarray:
    """A writable uint8 array in Arrow's memory pool.

    The pool keeps freed memory for the next read, where ``np.empty`` of a large size maps fresh
    pages from the kernel and faults on every one of them (see :meth:`ByteSource.read_arrays`).
    """
    if nbytes < _POOL_MIN_BYTES:
        return np.empty(nbytes, dtype=np.uint8)
    return np.frombuffer(pa.allocate_buffer(nbytes), dtype=np.uint8)


#: From this many uncached blocks on, :meth:`ByteSource.gather` announces them to the kernel first.
_PARALLEL_PREADS_MIN = 64
#: ``preadv`` flag: return what the page cache holds instead of waiting for the device (Linux);
#: 0 where missing or refused, and then every block is read as if uncached.
_NOWAIT: int = getattr(os, "RWF_NOWAIT", 0)
#: Most iovecs one ``preadv`` takes (``IOV_MAX`` on Linux and macOS).
_IOV_MAX = 1024


def _merged_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int, list[int]]]:
    """Group ranges closer than ``_GATHER_GAP``: ``(start, end, indices into ranges)`` per read."""
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    groups: list[tuple[int, int, list[int]]] = []
    i = 0
    while i < len(order):
        start, length = ranges[order[i]]
        end = start + length
        j = i + 1
        while j < len(order) and ranges[order[j]][0] <= end + _GATHER_GAP:
            end = max(end, ranges[order[j]][0] + ranges[order[j]][1])
            j += 1
        groups.append((start, end, order[i:j]))
        i = j
    return groups


__all__ = ["Buf", "ByteSource", "pooled_bytes"]
