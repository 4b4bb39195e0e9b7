"""The index-kind registry: every kind we know, found by ``index_type`` or by a segment's details.

Adding a kind is one module under :mod:`lance_format.index.kinds` and one descriptor in
:data:`lance_format.index.kinds.catalog.CATALOG`; nothing else in the package names a kind
(``docs/architecture.md``, "Adding an index kind"). A segment is matched by the last token of
its details type URL, as pylance's ``ScalarIndexPluginRegistry::get_plugin_by_details`` does
(``rust/lance-index/src/scalar/registry.rs``).

This module is the package's plugin loader: it answers from the light descriptors and imports
a kind's module (:func:`importlib.import_module`, here and nowhere else) the first time that kind
is needed, so opening a dataset and running a BTREE query never imports the vector, inverted or
bloom-filter code (~0.3 s of CPU on a cold start, issue 28). A loaded kind is the module's own
singleton: the same object on every call, as when the registry imported every kind up front.
``KINDS``, the tuple of every kind, is still offered; reading it imports every kind module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index.kinds.catalog import CATALOG, Family, KindInfo
from lance_format.index.models import kind_of

if TYPE_CHECKING:
    from lance_format.index.kind import IndexKind
    from lance_format.table.index_metadata import IndexMetadata

_BY_DETAILS: dict[str, KindInfo] = {}
_BY_TYPE: dict[str, KindInfo] = {}
for _info in CATALOG:
    _BY_DETAILS.setdefault(_info.details, _info)
    for _n in (_info.name, *_info.aliases):
        _BY_TYPE.setdefault(_n.upper(), _info)

#: Kinds loaded so far, by descriptor.
_LOADED: dict[KindInfo, IndexKind] = {}


def load(info: KindInfo) -> IndexKind:
    """The kind ``info`` describes, importing its module on first use (the plugin loader)."""
    kind = _LOADED.get(info)
    if kind is None:
        module = importlib.import_module(info.module)
        if info.attribute == "KIND":
            kind = module.KIND
        else:
            kind = next(k for k in getattr(module, info.attribute) if k.name == info.name)
        _LOADED[info] = kind
    return kind


def build_half(index_type: str) -> ModuleType:
    """The module of a kind's build half (:attr:`KindInfo.build_module`), imported on first use.

    Raises:
        UnsupportedIndexTypeError: no kind called ``index_type`` has a separate build half.
    """
    info = _BY_TYPE.get(index_type.upper())
    if info is None or not info.build_module:
        raise UnsupportedIndexTypeError(f"index type {index_type!r} has no separate build module")
    return importlib.import_module(info.build_module)


def _all_kinds() -> tuple[IndexKind, ...]:
    # The tuple the registry used to build at import: every kind in catalog order, with each
    # collection module's whole tuple (the listed module's shadowed name-only entries too).
    out: list[IndexKind] = []
    seen: set[str] = set()
    for info in CATALOG:
        if info.attribute == "KIND":
            out.append(load(info))
        elif info.module not in seen:
            seen.add(info.module)
            load(info)
            out.extend(getattr(importlib.import_module(info.module), info.attribute))
    return tuple(out)


def __getattr__(name: str) -> Any:
    # ``KINDS`` (every kind, first match wins) loads every kind module: only on request.
    if name == "KINDS":
        kinds = _all_kinds()
        globals()["KINDS"] = kinds
        return kinds
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def buildable_types() -> list[str]:
    """``index_type`` names ``create_index`` accepts."""
    return sorted(n for n, k in _BY_TYPE.items() if k.buildable)


def by_type(index_type: str) -> IndexKind:
    """The kind ``create_index(..., index_type)`` builds.

    Raises:
        UnsupportedIndexTypeError: no kind builds ``index_type``.
    """
    info = _BY_TYPE.get(str(index_type).upper())
    if info is None or not info.buildable:
        raise UnsupportedIndexTypeError(
            f"index type {index_type!r} is not supported (supported: {buildable_types()})")
    return load(info)


def family_of(meta: IndexMetadata) -> Family | None:
    """The family of a segment's kind without importing the kind (``None`` for an unknown kind)."""
    info = _BY_DETAILS.get(kind_of(meta))
    return info.family if info is not None else None


def for_segment(meta: IndexMetadata) -> IndexKind | None:
    """The kind of a segment, ``None`` for a details message we do not know."""
    info = _BY_DETAILS.get(kind_of(meta))
    return load(info) if info is not None else None


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
