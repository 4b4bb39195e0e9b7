"""The index-kind registry: every kind we know, found by ``index_type`` or by a segment's details.

Adding a kind is one module under :mod:`lance_format.index.kinds` and one line in :data:`KINDS`;
nothing else in the package names a kind (``docs/architecture.md``, "Adding an index kind").
A segment is matched by the last token of its details type URL, as pylance's
``ScalarIndexPluginRegistry::get_plugin_by_details`` does (``rust/lance-index/src/scalar/registry.rs``).
"""

from __future__ import annotations

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index.kind import IndexKind
from lance_format.index.kinds import (
    bitmap,
    bloomfilter,
    btree,
    inverted,
    label_list,
    listed,
    ngram,
    vector,
    zonemap,
)
from lance_format.index.models import kind_of
from lance_format.table.index_metadata import IndexMetadata

#: Every kind, first match wins: kinds we implement come before the name-only entries.
KINDS: tuple[IndexKind, ...] = (
    btree.KIND,
    bitmap.KIND,
    label_list.KIND,
    zonemap.KIND,
    bloomfilter.KIND,
    ngram.KIND,
    inverted.KIND,
    *vector.ALL,
    *listed.ALL,
)

_BY_DETAILS: dict[str, IndexKind] = {}
_BY_TYPE: dict[str, IndexKind] = {}
for _kind in KINDS:
    _BY_DETAILS.setdefault(_kind.details, _kind)
    for _n in (_kind.name, *_kind.aliases):
        _BY_TYPE.setdefault(_n.upper(), _kind)


def buildable_types() -> list[str]:
    """``index_type`` names ``create_index`` accepts."""
    return sorted(n for n, k in _BY_TYPE.items() if k.buildable)


def by_type(index_type: str) -> IndexKind:
    """The kind ``create_index(..., index_type)`` builds.

    Raises:
        UnsupportedIndexTypeError: no kind builds ``index_type``.
    """
    kind = _BY_TYPE.get(str(index_type).upper())
    if kind is None or not kind.buildable:
        raise UnsupportedIndexTypeError(
            f"index type {index_type!r} is not supported (supported: {buildable_types()})")
    return kind


def for_segment(meta: IndexMetadata) -> IndexKind | None:
    """The kind of a segment, ``None`` for a details message we do not know."""
    return _BY_DETAILS.get(kind_of(meta))


def display_type(meta: IndexMetadata) -> str:
    """pylance's ``type`` string for a segment (``"BTree"``, ``"Vector"``…)."""
    kind = for_segment(meta)
    if kind is not None:
        return kind.display_name(meta)
    return kind_of(meta).removesuffix("IndexDetails") or "Unknown"


def stores_addresses(meta: IndexMetadata, stable_row_ids: bool) -> bool:
    """Whether a segment's ids are row addresses (else stable row ids, which compaction keeps)."""
    kind = for_segment(meta)
    return kind.stores_addresses(meta, stable_row_ids) if kind is not None else not stable_row_ids


def maintained(meta: IndexMetadata) -> IndexKind | None:
    """The kind, when we can rebuild and remap this segment (known kind, supported version)."""
    kind = for_segment(meta)
    if kind is None or kind.family == "system" or not (kind.buildable and kind.remappable):
        return None
    return kind if kind.understands(meta) else None
