"""Remapping indices after compaction (old row address → new row address).

Immediate mode (``DatasetIndexRemapper::remap_indices``, ``rust/lance/src/dataset/index.rs``):
every BTREE / BITMAP / LABEL_LIST segment whose fragments were rewritten is written again under a new
UUID with its row addresses translated (rows deleted before the compaction dropped), and
reported as a ``RewrittenIndex`` for the ``Rewrite`` transaction; the commit swaps the
UUID in and moves the fragment bitmap from the old fragment ids to the new ones.

Each segment's kind (:mod:`lance_format.index.registry`) rewrites its own files
(``IndexKind.remap``). Indices of kinds that cannot be rewritten are left as they are: their
fragment bitmap keeps naming the removed fragments and does not name the new ones, so
pylance answers from the index only for fragments that still exist and scans the new
fragments; checked against pylance 14.0.2 for INVERTED, NGRAM and IVF_FLAT
(``tests/index/test_remap.py``). Deferred mode is :mod:`lance_format.index.frag_reuse`.

With stable row ids only segments holding row addresses (pylance's BTree version 1) are
remapped; the others hold stable row ids, which compaction keeps.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid as _uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lance_format.index import registry
from lance_format.index._compat import manifest_indices
from lance_format.index.models import FRAG_REUSE_INDEX
from lance_format.index.rowset import fragment_of, offset_of
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.transaction import LanceOperation

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

U64 = npt.NDArray[np.uint64]
_GONE = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclasses.dataclass(frozen=True, eq=False)
class RowAddressMap(Mapping[int, "int | None"]):
    """Old row address → new row address (``None``: deleted), held as sorted arrays.

    A plain ``dict`` works for :func:`remap_indices` too; this form avoids building
    millions of Python ints for a large compaction.
    """

    old: U64
    new: U64  # ``2**64-1`` marks a deleted row

    @classmethod
    def from_arrays(cls, old: U64, new: U64 | None) -> RowAddressMap:
        """From parallel arrays (``new`` may use ``2**64-1`` for deleted)."""
        old = np.asarray(old, np.uint64)
        new_arr = np.full(old.size, _GONE) if new is None else np.asarray(new, np.uint64)
        order = np.argsort(old, kind="stable")
        return cls(old[order], new_arr[order])

    @classmethod
    def of(cls, mapping: Mapping[int, int | None]) -> RowAddressMap:
        """Convert any mapping."""
        if isinstance(mapping, RowAddressMap):
            return mapping
        old = np.fromiter(mapping.keys(), np.uint64, len(mapping))
        new = np.fromiter((_GONE if v is None else v for v in mapping.values()), np.uint64, len(mapping))
        return cls.from_arrays(old, new)

    def __getitem__(self, key: int) -> int | None:
        i = int(np.searchsorted(self.old, np.uint64(key)))
        if i >= self.old.size or int(self.old[i]) != key:
            raise KeyError(key)
        v = self.new[i]
        return None if v == _GONE else int(v)

    def __iter__(self) -> Iterator[int]:
        return (int(k) for k in self.old)

    def __len__(self) -> int:
        return int(self.old.size)

    @functools.cached_property
    def _fragment_ids(self) -> U64:
        # ``old`` is sorted, so fragment ids come in runs. Computed once: a remap translates
        # many arrays (one per BITMAP value) through the same map.
        frags = fragment_of(self.old)
        return np.asarray(frags[np.r_[True, frags[1:] != frags[:-1]]] if frags.size else frags, np.uint64)

    def fragments(self) -> frozenset[int]:
        """Fragment ids whose rows this map moves."""
        return frozenset(self._fragment_ids.tolist())

    @functools.cached_property
    def _dense(self) -> tuple[U64, npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        # A compaction's map holds every row of each rewritten fragment (offsets 0..n-1):
        # then an address's entry is at its fragment's start plus its offset, with no search
        # of the whole map. ``(fragment ids, first entry, rows)`` then, else None.
        frags = self._fragment_ids
        if self.old.size == 0:
            return None
        all_frags = fragment_of(self.old)
        starts = np.searchsorted(all_frags, frags).astype(np.int64)
        counts = np.diff(np.r_[starts, self.old.size]).astype(np.int64)
        rank = np.arange(self.old.size, dtype=np.int64) - np.repeat(starts, counts)
        if not np.array_equal(offset_of(self.old).astype(np.int64), rank):
            return None
        return frags, starts, counts

    def translate(self, ids: U64) -> tuple[U64, npt.NDArray[np.bool_]]:
        """``(new ids, keep mask)`` for ``ids``; rows of a rewritten fragment absent from the map are dropped."""
        ids = ids.astype(np.uint64, copy=False)
        dense = self._dense
        if dense is not None:
            frags, starts, counts = dense
            frag = fragment_of(ids)
            at = np.minimum(np.searchsorted(frags, frag), frags.size - 1)
            moved = frags[at] == frag
            off = offset_of(ids).astype(np.int64)
            hit = moved & (off < counts[at])
            new = np.where(hit, self.new[np.where(hit, starts[at] + off, 0)], _GONE)
            keep = ~moved | (new != _GONE)
            return np.where(moved, new, ids)[keep], keep
        moved = np.isin(fragment_of(ids), self._fragment_ids)
        out = ids.copy()
        keep = np.ones(ids.size, dtype=bool)
        if moved.any() and self.old.size:
            pos = np.searchsorted(self.old, ids[moved])
            pos_c = np.minimum(pos, self.old.size - 1)
            found = (pos < self.old.size) & (self.old[pos_c] == ids[moved])
            new = np.where(found, self.new[pos_c], _GONE)
            out[moved] = new
            keep[moved] = new != _GONE
        elif moved.any():
            keep[moved] = False
        return out[keep], keep


def _remap_segment(ds: LanceDataset, meta: IndexMetadata, amap: RowAddressMap) -> IndexMetadata:
    kind = registry.maintained(meta)
    assert kind is not None  # callers check remappable()
    src = IndexDir(ds._store, meta.uuid, sizes={f.path: f.size_bytes for f in meta.files or ()})
    new = dataclasses.replace(meta, uuid=str(_uuid.uuid4()))
    out = IndexDir(ds._store, new.uuid, ds.data_storage_version)
    try:
        files = kind.remap(src, out, meta, amap, {f.id: f.physical_rows for f in ds.manifest.fragments})
    except BaseException:
        out.discard()
        raise
    return dataclasses.replace(new, files=files)


def _rewritten(old: IndexMetadata, new: IndexMetadata) -> LanceOperation.RewrittenIndex:
    kwargs: dict[str, Any] = {"old_id": old.uuid, "new_id": new.uuid}
    names = {f.name for f in dataclasses.fields(LanceOperation.RewrittenIndex)}
    details = new.index_details
    for key, value in (("new_details_type_url", details.type_url if details else ""),
                       ("new_details_value", details.value if details else b""),
                       ("new_index_details", details), ("new_index_version", new.index_version),
                       ("new_index_files", new.files), ("new_files", new.files)):
        if key in names:
            kwargs[key] = value
    return LanceOperation.RewrittenIndex(**kwargs)


def remappable(meta: IndexMetadata) -> bool:
    """Whether :func:`remap_indices` rewrites this segment (a kind we maintain, a version we read)."""
    return meta.name != FRAG_REUSE_INDEX and registry.maintained(meta) is not None


def remap_indices(ds: LanceDataset, mapping: Mapping[int, int | None]) -> list[LanceOperation.RewrittenIndex]:
    """Write remapped copies of the indices a compaction touches.

    Args:
        ds: The dataset at the compaction's read version.
        mapping: Old row address → new row address, or ``None`` for a row deleted before
            the compaction; every row of every rewritten fragment should be a key (a
            :class:`RowAddressMap` is fastest).

    Returns:
        One ``RewrittenIndex`` per rewritten segment (for ``Rewrite.rewritten_indices``).
        Segments that cannot be rewritten, or that cover none of the rewritten fragments,
        are not listed (they stay as they are).
    """
    return [_rewritten(old, new) for old, new in remap_segments(ds, mapping)]


def remap_segments(ds: LanceDataset, mapping: Mapping[int, int | None]
                   ) -> list[tuple[IndexMetadata, IndexMetadata]]:
    """Like :func:`remap_indices`, returning ``(old, new)`` metadata pairs.

    The new metadata carries the new UUID and files; its fragment bitmap is still the old
    one (the commit moves it to the new fragment ids).
    """
    if not mapping:
        return []
    amap = RowAddressMap.of(mapping)
    touched = amap.fragments()
    done: list[tuple[IndexMetadata, IndexMetadata]] = []
    try:
        for meta in manifest_indices(ds.manifest):
            if remappable(meta) and meta.fragment_bitmap is not None and meta.fragment_bitmap & touched \
                    and registry.stores_addresses(meta, ds.has_stable_row_ids):
                done.append((meta, _remap_segment(ds, meta, amap)))
    except BaseException:
        discard_rewritten(ds, [new.uuid for _, new in done])
        raise
    return done


def discard_rewritten(ds: LanceDataset, uuids: list[str]) -> None:
    """Delete the files of remapped segments whose Rewrite was not committed."""
    for uuid in uuids:
        IndexDir(ds._store, uuid).discard(everything=True)
