"""One bounded cache facility, scoped by a :class:`Session` (as pylance's ``lance.Session``).

Everything this package keeps between calls to save decoding work (parsed file tails, decoded
schemas, fragments and manifests, deletion vectors, S3 clients) lives in a :class:`Session`'s
byte-bounded caches (:class:`LruCache`). The only process-wide caches left hold values that do
not grow with what is read: bit-packing lookup tables and codec handles (``functools.lru_cache``
over a small key domain) and FSST pair tables (an :class:`LruCache` of a fixed 24 MiB, see
``lance_format.file.v2_1.fsst``). A dataset carries its session
(``lance_format.dataset(uri, session=...)``); its object store does too
(``open_store(uri, session=...)``), so the file and table layers find the session through the
store they already hold.

Datasets opened without a session share :func:`default_session`, whose caches hold at most
:data:`DEFAULT_METADATA_CACHE_SIZE_BYTES` + :data:`DEFAULT_INDEX_CACHE_SIZE_BYTES` of entries
(estimated sizes, see :meth:`LruCache.put`). Long-running processes (Dagster code servers,
Spark executors) therefore stay within that bound however many datasets they open;
``default_session().clear()`` drops everything.

Upstream keeps the same split (rust/lance/src/session.rs: an index cache and a metadata cache
per session, sized in bytes), with larger defaults (6 GiB / 1 GiB) suited to a native process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lance_format.errors import InvalidInputError

V = TypeVar("V")

#: Default metadata cache of a session: file tails, schemas, fragments, manifests, deletions.
DEFAULT_METADATA_CACHE_SIZE_BYTES = 128 * 1024 * 1024
#: Default index cache of a session (opened index structures).
DEFAULT_INDEX_CACHE_SIZE_BYTES = 512 * 1024 * 1024
#: Bookkeeping per entry (ordered-dict node, key tuple, counters), added to every estimate.
ENTRY_OVERHEAD_BYTES = 200


@dataclass(frozen=True)
class CacheKind(Generic[V]):
    """A typed namespace of cache entries: keys of different kinds never collide.

    Attributes:
        name: Unique name of the kind (shown by :meth:`LruCache.size_by_kind`).
    """

    name: str


class LruCache:
    """A thread-safe cache bounded by the estimated bytes it holds, evicting least recently used first.

    Every entry carries the caller's estimate of what it keeps alive (key and value); the
    total never exceeds ``capacity_bytes``, and an entry larger than the whole capacity is
    not kept at all. Eviction is the CLOCK approximation of LRU: entries queue in insertion
    order, a hit only stamps the entry (so a batch lookup of thousands of fragments costs
    little more than the dictionary reads), and an entry reaching the head of the queue that
    was used since it was queued goes back to the tail instead of being evicted.

    Args:
        capacity_bytes: Upper bound of the summed entry estimates (0 disables caching).
    """

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise InvalidInputError(f"cache capacity must be >= 0 bytes, got {capacity_bytes}")
        self._capacity = int(capacity_bytes)
        #: Lookup per kind: key -> [value, cost, last used tick, queued tick].
        self._by_kind: dict[str, dict[Hashable, list[Any]]] = {}
        #: Eviction queue, oldest first.
        self._queue: OrderedDict[tuple[str, Hashable], list[Any]] = OrderedDict()
        self._held = 0
        self._tick = 0
        self._lock = threading.Lock()

    @property
    def capacity_bytes(self) -> int:
        """The byte bound."""
        return self._capacity

    def get(self, kind: CacheKind[V], key: Hashable) -> V | None:
        """Return the entry of ``kind`` under ``key`` (marking it recently used), or ``None``."""
        return self.get_many(kind, (key,))[0]

    def get_many(self, kind: CacheKind[V], keys: Sequence[Hashable]) -> list[V | None]:
        """:meth:`get` for several keys under one lock acquisition."""
        out: list[V | None] = []
        with self._lock:
            entries = self._by_kind.get(kind.name)
            if entries is None:
                return [None] * len(keys)
            self._tick += 1
            tick = self._tick
            lookup, append = entries.get, out.append  # bound once: this loop runs per fragment
            for key in keys:
                entry = lookup(key)
                if entry is None:
                    append(None)
                else:
                    entry[2] = tick
                    append(entry[0])
        return out

    def put(self, kind: CacheKind[V], key: Hashable, value: V, nbytes: int) -> None:
        """Store ``value`` under ``key``; ``nbytes`` estimates what key and value keep alive.

        Estimates should err high: the bound is only as good as they are. A fixed
        :data:`ENTRY_OVERHEAD_BYTES` is added for the bookkeeping.
        """
        self.put_many(kind, ((key, value, nbytes),))

    def put_many(self, kind: CacheKind[V], items: Sequence[tuple[Hashable, V, int]]) -> None:
        """:meth:`put` for several entries under one lock acquisition."""
        name = kind.name
        with self._lock:
            self._tick += 1
            tick = self._tick
            entries = self._by_kind.setdefault(name, {})
            queue = self._queue
            for key, value, nbytes in items:
                cost = int(nbytes) + ENTRY_OVERHEAD_BYTES
                old = entries.pop(key, None)
                if old is not None:
                    del queue[(name, key)]
                    self._held -= old[1]
                if cost > self._capacity:
                    continue
                entry: list[Any] = [value, cost, tick, tick]
                entries[key] = entry
                queue[(name, key)] = entry
                self._held += cost
            while self._held > self._capacity:
                full, entry = queue.popitem(last=False)
                if entry[2] > entry[3]:  # used since queued: a second chance at the tail
                    entry[3] = entry[2]
                    queue[full] = entry
                    continue
                del self._by_kind[full[0]][full[1]]
                self._held -= entry[1]

    def size_bytes(self) -> int:
        """Summed estimates of the entries held (always <= :attr:`capacity_bytes`)."""
        return self._held

    def size_by_kind(self) -> dict[str, int]:
        """Held bytes per :class:`CacheKind` name (diagnostics)."""
        with self._lock:
            return {name: sum(e[1] for e in entries.values())
                    for name, entries in self._by_kind.items() if entries}

    def count(self, kind: CacheKind[Any]) -> int:
        """Entries of ``kind`` held (diagnostics)."""
        with self._lock:
            return len(self._by_kind.get(kind.name, ()))

    def __len__(self) -> int:
        return len(self._queue)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._by_kind.clear()
            self._queue.clear()
            self._held = 0


class Session:
    """Caches shared by the datasets opened with it (pylance's ``lance.Session``).

    Args:
        index_cache_size_bytes: Bound of the index cache (default
            :data:`DEFAULT_INDEX_CACHE_SIZE_BYTES`).
        metadata_cache_size_bytes: Bound of the metadata cache (default
            :data:`DEFAULT_METADATA_CACHE_SIZE_BYTES`).

    Raises:
        InvalidInputError: for a negative size.
    """

    def __init__(self, *, index_cache_size_bytes: int | None = None,
                 metadata_cache_size_bytes: int | None = None) -> None:
        self.index_cache = LruCache(
            DEFAULT_INDEX_CACHE_SIZE_BYTES if index_cache_size_bytes is None else index_cache_size_bytes
        )
        self.metadata_cache = LruCache(
            DEFAULT_METADATA_CACHE_SIZE_BYTES if metadata_cache_size_bytes is None else metadata_cache_size_bytes
        )

    @property
    def index_cache_size_bytes(self) -> int:
        """Bound of the index cache."""
        return self.index_cache.capacity_bytes

    @property
    def metadata_cache_size_bytes(self) -> int:
        """Bound of the metadata cache."""
        return self.metadata_cache.capacity_bytes

    def size_bytes(self) -> int:
        """Estimated bytes held by both caches (at most the sum of their bounds)."""
        return self.index_cache.size_bytes() + self.metadata_cache.size_bytes()

    def approx_num_items(self) -> int:
        """Entries held by both caches."""
        return len(self.index_cache) + len(self.metadata_cache)

    def clear(self) -> None:
        """Drop every cached entry (open datasets keep working; they re-read what they need)."""
        self.index_cache.clear()
        self.metadata_cache.clear()

    def is_same_as(self, other: Session) -> bool:
        """Whether ``other`` is this very session (shares its caches)."""
        return self is other

    def __repr__(self) -> str:
        return (f"Session(size_bytes={self.size_bytes()}, index_cache_size_bytes={self.index_cache_size_bytes}, "
                f"metadata_cache_size_bytes={self.metadata_cache_size_bytes})")


_default: Session | None = None
_default_lock = threading.Lock()


def default_session() -> Session:
    """The process-wide session of datasets and stores opened without one (created on first use)."""
    global _default
    session = _default
    if session is None:
        with _default_lock:
            if _default is None:
                _default = Session()
            session = _default
    return session


__all__ = [
    "DEFAULT_INDEX_CACHE_SIZE_BYTES",
    "DEFAULT_METADATA_CACHE_SIZE_BYTES",
    "CacheKind",
    "LruCache",
    "Session",
    "default_session",
]
