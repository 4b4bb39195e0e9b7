"""What compaction needs to know about a manifest's indices, and the hooks into ``lance_format.index``.

The manifest's index entries are read through :func:`index_infos` whichever model the
table layer hands out (the protobuf message or the frozen ``IndexMetadata``), so this
module does not depend on how that migration is going.

Remapping is the index layer's: :func:`lance_format.index.remap.remappable` says which
segments it rewrites (a kind of the registry that can, at a version we read) and
``remap_indices`` rewrites them.
"""

from __future__ import annotations

import dataclasses
import uuid as _uuid
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap

from lance_format.index import frag_reuse, registry, remap
from lance_format.index._compat import to_model
from lance_format.index.registry import stores_addresses as _stores
from lance_format.table.commit import build_manifest
from lance_format.table.transaction import LanceOperation, Transaction

#: pylance's fragment-reuse system index (``FRAG_REUSE_INDEX_NAME``).
FRAG_REUSE_INDEX = "__lance_frag_reuse"
#: Other system indices (MemWAL), which cover no data.
_SYSTEM = {FRAG_REUSE_INDEX, "__lance_mem_wal"}


@dataclass(frozen=True)
class IndexInfo:
    """The parts of one index entry that compaction looks at.

    Attributes:
        uuid: Segment id.
        name: Index name.
        fragment_ids: Covered fragment ids (``None`` when the entry records none).
        type_name: Details message name, e.g. ``"BTreeIndexDetails"`` (``""`` if unknown).
        entry: The manifest's entry itself (handed to ``lance_format.index``).
    """

    uuid: str
    name: str
    fragment_ids: frozenset[int] | None
    type_name: str
    entry: Any

    @property
    def is_system(self) -> bool:
        """Whether this is a system index (fragment reuse, MemWAL), which covers no data."""
        return self.name in _SYSTEM


def _info(entry: Any) -> IndexInfo:
    if hasattr(entry, "fragment_bitmap") and not isinstance(entry.fragment_bitmap, bytes):
        details = getattr(entry, "index_details", None)
        type_name = details.type_name if details is not None else ""
        bitmap = entry.fragment_bitmap
        return IndexInfo(entry.uuid, entry.name, frozenset(bitmap) if bitmap is not None else None,
                         type_name, entry)
    raw: bytes = entry.uuid.uuid  # protobuf IndexMetadata
    uid = str(_uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex()
    frags = frozenset(BitMap.deserialize(entry.fragment_bitmap)) if entry.fragment_bitmap else None
    type_url = entry.index_details.type_url if entry.HasField("index_details") else ""
    return IndexInfo(uid, entry.name, frags, type_url.rsplit("/", 1)[-1].rsplit(".", 1)[-1], entry)


def index_infos(manifest: Any) -> list[IndexInfo]:
    """Every index entry of ``manifest``."""
    return [_info(e) for e in getattr(manifest, "indices", ()) or ()]


def effective_coverage(manifest: Any, store: Any = None) -> list[frozenset[int]]:
    """Each non-system index's fragments, as readers see them through ``__lance_frag_reuse``.

    After a deferred compaction an index's stored bitmap still names the old fragments;
    the planner bins by what it answers for now (the new fragments), as pylance's does,
    so a later rewrite group never mixes indexed and unindexed fragments.
    """
    infos = [i for i in index_infos(manifest) if not i.is_system and i.fragment_ids is not None]
    entry = next((i.entry for i in reversed(index_infos(manifest)) if i.name == FRAG_REUSE_INDEX), None)
    if entry is None or manifest.uses_stable_row_ids:
        return [i.fragment_ids for i in infos if i.fragment_ids is not None]

    versions = frag_reuse.decode_details(_model(entry), store)
    return [frag_reuse.covered_after(i.fragment_ids, versions, int(_model(i.entry).dataset_version))
            for i in infos if i.fragment_ids is not None]


def _model(entry: Any) -> Any:
    return to_model(entry)


def can_remap(info: IndexInfo) -> bool:
    """Whether the index layer rewrites this index through an old→new row-address map."""
    return remap.remappable(_model(info.entry))


def stores_addresses(info: IndexInfo, stable_row_ids: bool) -> bool:
    """Whether the segment holds row addresses (which a compaction must remap) rather than stable row ids."""

    return bool(_stores(_model(info.entry), stable_row_ids))


def _left_stale_ok(info: IndexInfo) -> bool:
    """Whether pylance answers correctly from this index when a compaction leaves its fragment bitmap
    naming removed fragments (it scans the new fragments unindexed): every kind of the registry,
    checked for INVERTED, NGRAM and IVF vector indices (``tests/index/test_remap.py``); pylance
    itself leaves ZoneMap / BloomFilter that way. An unknown kind is held back instead.
    """
    kind = registry.for_segment(_model(info.entry))
    return kind is not None and kind.family != "system"


def _probe_bitmaps_follow(manifest: Any, info: IndexInfo, remapped: bool) -> bool:
    """Dry-run the table layer's ``Rewrite`` on one covered fragment: does the index bitmap move?"""
    assert info.fragment_ids
    old = next((f for f in manifest.fragments if f.id in info.fragment_ids), None)
    if old is None:
        return True  # covers nothing that exists: nothing to move
    top = max([f.id for f in manifest.fragments] + [manifest.max_fragment_id or 0])
    new = dataclasses.replace(old, id=top + 1, deletion_file=None)
    new_uuid = str(_uuid.uuid4())
    rewritten = [LanceOperation.RewrittenIndex(info.uuid, new_uuid)] if remapped else []
    txn = Transaction(manifest.version, LanceOperation.Rewrite([LanceOperation.RewriteGroup([old], [new])],
                                                               rewritten))
    try:
        after = build_manifest(manifest, txn, version=manifest.version + 1)
    except Exception:  # noqa: BLE001 - any failure means "cannot rely on it"
        return False
    want = new_uuid if remapped else info.uuid
    for entry in index_infos(after):
        if entry.uuid == want:
            return entry.fragment_ids is not None and top + 1 in entry.fragment_ids and old.id not in entry.fragment_ids
    return False


def unremappable_coverage(manifest: Any, *, stable_row_ids: bool) -> set[int]:
    """Fragments that must not be compacted because an index could not follow.

    * Without stable row ids an index is remapped (when ``lance_format.index`` can) and
      the table layer must then move its fragment bitmap to the new ids; an index it
      cannot remap is left as it is when pylance answers correctly from such an index
      (``_left_stale_ok``), else (an unknown kind) its fragments are held back, as
      pylance holds back fragments of indices it cannot read.
    * With stable row ids the index stays valid but its bitmap must move; if the table
      layer's ``Rewrite`` does not do that yet, indexed fragments are held back.

    Whether the table layer moves bitmaps is found by a dry run of ``build_manifest``.
    ``-1`` in the result means "coverage unknown: all fragments".
    """
    out: set[int] = set()
    probes: dict[bool, bool] = {}
    for info in index_infos(manifest):
        if info.is_system:
            continue
        remap = not stable_row_ids and can_remap(info)
        if not stable_row_ids and not remap:
            if _left_stale_ok(info):
                continue
        elif info.fragment_ids:
            if remap not in probes:
                probes[remap] = _probe_bitmaps_follow(manifest, info, remap)
            if probes[remap]:
                continue
        elif info.fragment_ids is not None:
            continue  # covers nothing
        out |= info.fragment_ids if info.fragment_ids is not None else {-1}
    return out
