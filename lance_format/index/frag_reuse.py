"""The ``__lance_frag_reuse`` system index: deferred index remapping after compaction.

A compaction with ``defer_index_remap=True`` rewrites no index. It records, per
rewrite group, the surviving row addresses of the old fragments (ascending, a standard
64-bit roaring treemap) and the new fragments (id, physical rows); the *k*-th surviving
old address moved to the *k*-th row of the new fragments, in order
(``build_frag_reuse_index_metadata``, ``rust/lance/src/index/frag_reuse.rs``;
``transpose_row_addrs``, ``rust/lance/src/dataset/optimize/remapping.rs``). Each
compaction appends a version; the entry (``fields: []``, fragment bitmap = the new
fragment ids) replaces the previous one. Readers remap index results on the fly for
every version not older than the index. pylance 14.0.2 writes ``dataset_version`` = the
version the compaction read (the one its ``Rewrite`` follows: the ``ReserveFragments``
commit), and an index's ``dataset_version`` is the version it read, so an index with the
same version as a compaction predates it and is remapped (checked with a pylance-made
dataset in ``tests/maintenance/test_deferred_remap.py``).
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lance_format.errors import CorruptFileError, ObjectNotFoundError
from lance_format.index.models import FRAG_REUSE_INDEX, FRAG_REUSE_URL
from lance_format.index.rowset import decode_treemap, encode_treemap, fragment_of
from lance_format.table.codec.frag_reuse import decode_frag_reuse, encode_frag_reuse
from lance_format.table.index_metadata import IndexDetails, IndexMetadata
from lance_format.table.naming import index_file_key

if TYPE_CHECKING:
    from lance_format.storage import ObjectStore

U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class FragmentDigest:
    """A fragment as the reuse index remembers it."""

    id: int
    physical_rows: int
    num_deleted_rows: int = 0


@dataclass(frozen=True)
class ReuseGroup:
    """One rewrite group: surviving old addresses and the fragments they moved to."""

    changed_row_addrs: bytes
    old_fragments: tuple[FragmentDigest, ...]
    new_fragments: tuple[FragmentDigest, ...]

    def mapping(self) -> tuple[U64, U64]:
        """``(old addresses ascending, new addresses)`` of the group's surviving rows."""
        old = decode_treemap(self.changed_row_addrs, where="__lance_frag_reuse group")
        new = np.concatenate([(np.uint64(f.id) << np.uint64(32)) | np.arange(f.physical_rows, dtype=np.uint64)
                              for f in self.new_fragments]) if self.new_fragments else np.empty(0, np.uint64)
        if old.size != new.size:
            raise CorruptFileError(f"__lance_frag_reuse: {old.size} surviving rows but {new.size} new rows")
        return old, new


@dataclass(frozen=True)
class ReuseVersion:
    """The groups of one deferred compaction."""

    dataset_version: int
    groups: tuple[ReuseGroup, ...]


def decode_details(meta: IndexMetadata, store: ObjectStore | None = None) -> tuple[ReuseVersion, ...]:
    """The versions recorded by a ``__lance_frag_reuse`` entry.

    Args:
        meta: The entry.
        store: The dataset's store, to read details pylance moved into
            ``_indices/{uuid}/details.binpb`` (it does past 200 KiB inline).

    Raises:
        CorruptFileError: malformed details.
        NotSupportedError: details stored in an external file and no ``store`` given.
    """
    def load(path: str, offset: int, size: int) -> bytes:
        assert store is not None
        key = index_file_key(meta.uuid, path)
        try:
            return store.read_range(key, offset, size) if size else store.read(key)[offset:]
        except ObjectNotFoundError as exc:
            raise CorruptFileError(f"index {meta.uuid}: fragment reuse details {store.uri(key)} are missing") \
                from exc

    raw = decode_frag_reuse(meta.index_details.value if meta.index_details else b"", f"index {meta.uuid}",
                            load if store is not None else None)
    return tuple(ReuseVersion(version, tuple(
        ReuseGroup(changed, tuple(FragmentDigest(*d) for d in old), tuple(FragmentDigest(*d) for d in new))
        for changed, old, new in groups)) for version, groups in raw)


def encode_details(versions: Sequence[ReuseVersion]) -> bytes:
    """Serialized inline ``FragmentReuseIndexDetails``."""
    return encode_frag_reuse([(v.dataset_version, tuple(
        (g.changed_row_addrs, tuple((f.id, f.physical_rows, f.num_deleted_rows) for f in g.old_fragments),
         tuple((f.id, f.physical_rows, f.num_deleted_rows) for f in g.new_fragments)) for g in v.groups))
        for v in versions])


def make_group(surviving_old_addrs: U64, old_fragments: Sequence[FragmentDigest],
               new_fragments: Sequence[FragmentDigest]) -> ReuseGroup:
    """A group from the surviving old row addresses (any order) and the fragments."""
    return ReuseGroup(encode_treemap(np.sort(surviving_old_addrs.astype(np.uint64))), tuple(old_fragments),
                      tuple(new_fragments))


def build_frag_reuse_entry(previous: IndexMetadata | None, dataset_version: int,
                           groups: Sequence[ReuseGroup], store: ObjectStore | None = None) -> IndexMetadata:
    """The ``__lance_frag_reuse`` entry after one more deferred compaction.

    Args:
        previous: The dataset's current entry (its versions are kept), or ``None``.
        dataset_version: The version the compaction's ``Rewrite`` is applied to (the new
            version minus one, as pylance records it).
        groups: The compaction's groups.
        store: The dataset's store (to read a previous entry's external details).

    The details are always written inline (pylance reads inline details of any size).
    """
    versions = decode_details(previous, store) if previous is not None else ()
    versions = (*versions, ReuseVersion(dataset_version, tuple(groups)))
    new_ids = frozenset(f.id for v in versions for g in v.groups for f in g.new_fragments)
    return IndexMetadata(uuid=str(_uuid.uuid4()), name=FRAG_REUSE_INDEX, fields=(), dataset_version=dataset_version,
                         fragment_bitmap=new_ids, index_details=IndexDetails(FRAG_REUSE_URL, encode_details(versions)),
                         index_version=0, created_at=dt.datetime.now(dt.UTC))


def remap_through(addrs: U64, versions: Sequence[ReuseVersion], since_version: int) -> tuple[U64, npt.NDArray[np.bool_]]:
    """Remap row addresses of an index that read ``since_version`` through compactions since.

    Addresses in a rewritten old fragment move to their new place, or are dropped if the
    row was deleted before the compaction; others are unchanged.

    Returns:
        ``(new addresses, keep)``: the kept addresses in input order, and which inputs were kept.
    """
    out = addrs.copy()
    keep = np.ones(addrs.size, dtype=bool)
    for v in versions:
        if v.dataset_version < since_version:
            continue  # the index was built after this compaction (see the module docstring)
        for g in v.groups:
            old_ids = np.array([f.id for f in g.old_fragments], dtype=np.uint64)
            hit = keep & np.isin(fragment_of(out), old_ids)
            if not hit.any():
                continue
            old, new = g.mapping()
            moving = out[hit]
            pos = np.searchsorted(old, moving)
            pos_c = np.minimum(pos, max(old.size - 1, 0))
            found = (pos < old.size) & (old[pos_c] == moving) if old.size else np.zeros(moving.size, bool)
            where = np.flatnonzero(hit)
            out[where[found]] = new[pos_c[found]]
            keep[where[~found]] = False
    return out[keep], keep


def covered_after(bitmap: frozenset[int], versions: Sequence[ReuseVersion], since_version: int) -> frozenset[int]:
    """Fragments an index built at ``since_version`` with ``bitmap`` answers after remapping."""
    out = set(bitmap)
    for v in versions:
        if v.dataset_version < since_version:
            continue  # the index was built after this compaction (see the module docstring)
        for g in v.groups:
            old = {f.id for f in g.old_fragments}
            if old and old <= out:
                out |= {f.id for f in g.new_fragments}
            out -= old
    return frozenset(out)


def current_entry(manifest_indices: Sequence[IndexMetadata]) -> IndexMetadata | None:
    """The ``__lance_frag_reuse`` entry among a manifest's indices, if any."""
    found = [m for m in manifest_indices if m.name == FRAG_REUSE_INDEX]
    return found[-1] if found else None


def address_map(versions: Sequence[ReuseVersion], since_version: int = -1) -> tuple[U64, U64]:
    """``(old, new)`` address arrays of every group not older than ``since_version`` (for ``RowAddressMap``).

    Rows of an old fragment that are absent were deleted before the compaction.
    """
    olds, news = [], []
    for v in versions:
        if v.dataset_version >= since_version:
            for g in v.groups:
                o, n = g.mapping()
                olds.append(o)
                news.append(n)
    if not olds:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    return np.concatenate(olds), np.concatenate(news)


def digest_of(fragment: Any) -> FragmentDigest:
    """The digest of a ``FragmentMetadata`` (id, physical rows, deleted rows)."""
    deleted = fragment.deletion_file.num_deleted_rows if fragment.deletion_file is not None else 0
    return FragmentDigest(int(fragment.id), int(fragment.physical_rows), int(deleted))


def group_for(old_fragments: Sequence[Any], new_fragments: Sequence[Any], surviving_old_addrs: U64) -> ReuseGroup:
    """A reuse group for one compaction result (fragments as ``FragmentMetadata``, new ids assigned).

    ``surviving_old_addrs`` are the row addresses of the old fragments' live rows, which
    moved, in ascending order, to the new fragments' rows.
    """
    return make_group(surviving_old_addrs, [digest_of(f) for f in old_fragments],
                      [digest_of(f) for f in new_fragments])
