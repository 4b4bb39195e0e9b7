"""Which rows of a vector segment a ``nearest=`` search may return, worked out per partition.

A segment names its rows by ``_rowid``: row addresses, or stable row ids on datasets that use
them (moved to addresses through the fragments' row id sequences), and, after a compaction that
deferred the remap, addresses of rewritten fragments (moved through ``__lance_frag_reuse``). A
row may be returned when it is live (not deleted, in a fragment the search covers) and kept by a
``prefilter=True`` filter. :class:`UsableRows` works that out for the partitions a query probes
or counts, when it first does, and keeps it per dataset version: a first query on a segment of a
million rows then maps the few partitions it searches, not every row id (what pylance does too:
its prefilter is checked on the candidates of the partitions it searched).

Segments themselves are immutable and read once per process (:func:`open_segment`); row ids
and codes are read per partition as queries probe them (``read_segment(lazy=True)``).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from lance_format.arrays import distinct
from lance_format.index import frag_reuse, registry
from lance_format.index._compat import manifest_indices
from lance_format.index.models import FRAG_REUSE_INDEX
from lance_format.index.store import IndexDir
from lance_format.index.vector.distance import Metric
from lance_format.index.vector.layout import IvfSegment, read_segment
from lance_format.search.prefilter import RowMask
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.read import ReadContext

U64 = npt.NDArray[np.uint64]
Flags = npt.NDArray[np.bool_]
_SEGMENTS: dict[tuple[str, str], IvfSegment] = {}
_SEGMENT_CACHE = 32
#: :class:`UsableRows` kept per dataset version (segments × searched fragments × prefilters).
_USABLE_KEPT = 32


@dataclass
class VersionState:
    """What repeated searches of one dataset version (one ``ReadContext``) share.

    Everything here follows from the immutable manifest, so it is computed once per version:
    the rows each segment may return (filled per partition), the index plan, the deferred-remap
    entries, the stable-row-id map and each fragment set's deleted rows. (The result rows'
    readers are kept by :mod:`.rows`, the prefilter masks by :mod:`.prefilter`.)
    """

    usable: OrderedDict[tuple[str, tuple[int, ...], str | None], UsableRows] = field(default_factory=OrderedDict)
    plans: dict[tuple[str, bool, Metric | None], tuple[list[IndexMetadata], Metric, frozenset[int]]] = \
        field(default_factory=dict)
    reuse: tuple[frag_reuse.ReuseVersion, ...] | None = None
    #: Per searched fragment set: the fragments (a lookup by id) and their deleted row addresses, sorted.
    live: dict[tuple[int, ...], tuple[Flags, U64]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_STATES: weakref.WeakKeyDictionary[ReadContext, VersionState] = weakref.WeakKeyDictionary()


def state(ctx: ReadContext) -> VersionState:
    """The shared state of the dataset version ``ctx``."""
    st = _STATES.get(ctx)
    if st is None:
        st = _STATES[ctx] = VersionState()
    return st


def vector_segments(ctx: ReadContext, column: str) -> list[IndexMetadata]:
    """Segments of a vector kind on ``column`` we can read (newer index versions are left alone,
    as pylance's ``retain_supported_indices`` does)."""
    field_id = ctx.schema.field(column).id
    out = []
    for m in manifest_indices(ctx.manifest):
        kind = registry.for_segment(m)
        if kind is not None and kind.family == "vector" and kind.understands(m) \
                and m.fields[:1] == (field_id,) and m.fragment_bitmap is not None:
            out.append(m)
    return out


def open_segment(ctx: ReadContext, meta: IndexMetadata) -> IvfSegment:
    """The segment of ``meta``, read once per process (row ids and codes per partition, later)."""
    store = ctx.store if meta.base_id is None else ctx._base_store(meta.base_id, "")
    key = (store.uri(""), meta.uuid)
    seg = _SEGMENTS.get(key)
    if seg is None:  # segments are immutable: one read per process serves every version
        seg = read_segment(IndexDir(store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()}),
                           graph="walk",  # HNSW graphs read per partition as searches walk them
                           lazy=True)  # row ids and codes read per partition as queries probe them
        if len(_SEGMENTS) >= _SEGMENT_CACHE:
            _SEGMENTS.pop(next(iter(_SEGMENTS)))
        _SEGMENTS[key] = seg
    return seg


def reuse_versions(ctx: ReadContext) -> tuple[frag_reuse.ReuseVersion, ...]:
    """The deferred-remap entries of ``__lance_frag_reuse`` (empty without one), once per version."""
    st = state(ctx)
    if st.reuse is None:
        entries = [m for m in manifest_indices(ctx.manifest) if m.name == FRAG_REUSE_INDEX]
        st.reuse = frag_reuse.decode_details(entries[-1], ctx.store) if entries else ()
    return st.reuse




def addresses(ctx: ReadContext, ids: U64) -> tuple[U64, Flags]:
    """Stable row ids → current row addresses (with which ids still exist)."""
    k, v = ctx.stable_address_map()
    if not k.size:
        return np.zeros(ids.size, np.uint64), np.zeros(ids.size, bool)
    pos = np.minimum(np.searchsorted(k, ids), k.size - 1)
    found = k[pos] == ids
    return np.where(found, v[pos], 0).astype(np.uint64), found


def stable_ids(ctx: ReadContext, addrs: U64) -> U64:
    """The stable row id of each row address."""
    out = np.zeros(addrs.size, np.uint64)
    frag_of = addrs >> np.uint64(32)
    for fid in distinct(frag_of).tolist():
        frag = ctx.manifest.fragment(int(fid))
        ids = None if frag is None else ctx.row_ids(frag)
        if ids is not None:
            hit = frag_of == fid
            out[hit] = ids[(addrs[hit] & np.uint64(0xFFFFFFFF)).astype(np.int64)]
    return out


def _live_parts(ctx: ReadContext, frags: list[Any]) -> tuple[Flags, U64]:
    """For the fragments ``frags``: a lookup of their ids, and their deleted rows' addresses sorted."""
    st = state(ctx)
    key = tuple(int(f.id) for f in frags)
    hit = st.live.get(key)
    if hit is None:
        member = np.zeros(max(key, default=-1) + 2, bool)  # the last slot stands for every larger id
        member[list(key)] = True
        member[-1] = False
        dead = [(np.uint64(f.id) << np.uint64(32)) | ctx.deleted_offsets(f).astype(np.uint64) for f in frags]
        hit = st.live[key] = (member, np.sort(np.concatenate(dead)) if dead else np.empty(0, np.uint64))
    return hit


def live(ctx: ReadContext, addrs: U64, frags: list[Any]) -> Flags:
    """Which row addresses are live rows of ``frags``."""
    member, dead = _live_parts(ctx, frags)
    fid = np.minimum(addrs >> np.uint64(32), np.uint64(member.size - 1)).astype(np.int64)
    ok: Flags = member[fid]
    if dead.size:  # a sorted lookup: np.isin would sort (and first import numpy.ma) per call
        pos = np.minimum(np.searchsorted(dead, addrs), dead.size - 1)
        ok &= dead[pos] != addrs
    return ok


class UsableRows:
    """Each row of one segment as a current row address, and whether a search may return it.

    Per dataset version, searched fragments and prefilter; :meth:`prepare` fills the rows of the
    partitions a query probes or counts, the first time (values only depend on the manifest and
    the filter, so they serve every later query of the version).
    """

    def __init__(self, ctx: ReadContext, meta: IndexMetadata, seg: IvfSegment, frags: list[Any],
                 mask: RowMask | None) -> None:
        self._ctx = ctx
        self._meta = meta
        self._seg = seg
        self._frags = frags
        self._mask = mask
        n = int(seg.lengths.sum())
        # zero-filled, untouched pages: a million-row segment costs the pages its probed rows use
        self.addrs = np.zeros(n, np.uint64)
        self.ok = np.zeros(n, bool)
        self._ready = np.zeros(seg.num_partitions, bool)
        self._starts = seg.offsets.astype(np.int64).tolist()
        self._lengths = seg.lengths.astype(np.int64).tolist()

    def allowed(self, rows: npt.NDArray[np.int64]) -> Flags:
        """Whether the segment rows ``rows`` (of prepared partitions) may be returned."""
        out: Flags = self.ok[rows]
        return out

    def prepare(self, parts: npt.NDArray[np.int64]) -> None:
        """Work out the rows of the partitions ``parts`` not prepared yet."""
        if self._ready[parts].all():
            return
        todo = distinct(parts[~self._ready[parts]]).tolist()
        self._seg.load_ids(np.asarray(todo, np.int64))
        spans = [(self._starts[p], self._lengths[p]) for p in todo]
        rows = np.concatenate([np.arange(lo, lo + n, dtype=np.int64) for lo, n in spans])
        addrs, ok = self._resolve(self._seg.row_ids[rows])
        ok &= live(self._ctx, addrs, self._frags)
        if self._mask is not None:  # rows outside the masked fragments are not live already
            ok &= self._mask.flags[np.maximum(self._mask.positions(addrs), 0)]
        self.addrs[rows] = addrs
        self.ok[rows] = ok
        self._ready[todo] = True  # after the values: a concurrent query at worst prepares them again

    def _resolve(self, ids: U64) -> tuple[U64, Flags]:
        """The segment's row ids ``ids`` as current row addresses, and which still name a row."""
        ctx, meta = self._ctx, self._meta
        reuse = reuse_versions(ctx)
        if not registry.stores_addresses(meta, ctx.manifest.uses_stable_row_ids):
            return addresses(ctx, ids)
        if reuse:
            moved, keep = frag_reuse.remap_through(ids, reuse, meta.dataset_version)
            out = np.zeros(ids.size, np.uint64)
            out[keep] = moved
            return out, keep
        return ids.copy(), np.ones(ids.size, bool)


def usable_rows(ctx: ReadContext, meta: IndexMetadata, seg: IvfSegment, frags: list[Any],
                mask: RowMask | None, mask_key: str | None) -> UsableRows:
    """The :class:`UsableRows` of a segment for ``frags`` and a prefilter (``mask_key``: its
    filter text), kept per dataset version."""
    st = state(ctx)
    key = (meta.uuid, tuple(int(f.id) for f in frags), mask_key if mask is not None else None)
    with st.lock:
        hit = st.usable.get(key)
        if hit is not None:
            st.usable.move_to_end(key)
            return hit
        hit = st.usable[key] = UsableRows(ctx, meta, seg, frags, mask)
        while len(st.usable) > _USABLE_KEPT:
            st.usable.popitem(last=False)
    return hit
