"""Every index kind, described without importing it: what the registry reads first.

A kind module (vector k-means, the inverted index's tokenizers, the bloom filter's hashing)
costs up to ~0.15 s of CPU to import; a process that opens a dataset and runs a BTREE query
needs one of them. So the registry (:mod:`lance_format.index.registry`) keeps these light
descriptors and imports a kind's module the first time that kind is asked for, as a plugin
registry loads an entry point. The fields here repeat the kind's own class attributes
(tests/index/test_registry_descriptors.py checks they agree).

Adding a kind: its module under this package, then one :class:`KindInfo` in :data:`CATALOG`
(``docs/architecture.md``, "Adding an index kind").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: :data:`lance_format.index.kind.Family`, repeated so this module imports nothing.
Family = Literal["scalar", "vector", "text", "system"]


@dataclass(frozen=True)
class KindInfo:
    """What the registry knows of a kind before its module is imported."""

    #: The kind's ``index_type`` (:attr:`IndexKind.name`).
    name: str
    #: The last token of its details type URL (:attr:`IndexKind.details`).
    details: str
    #: The module defining it.
    module: str
    #: Other ``index_type`` spellings (:attr:`IndexKind.aliases`).
    aliases: tuple[str, ...] = ()
    #: Whether ``create_index`` builds it (:attr:`IndexKind.buildable`).
    buildable: bool = True
    #: :attr:`IndexKind.family`: a scan planning value filters skips vector and system segments
    #: without importing their kinds.
    family: Family = "scalar"
    #: The module attribute holding the kind: ``KIND`` (one kind per module), else a tuple of
    #: kinds in which the one called :attr:`name` is found (the vector kinds, the listed ones).
    attribute: str = "KIND"
    #: A module holding the kind's build half (training, encoding, remapping), which the kind
    #: loads through :func:`lance_format.index.registry.build_half` only when it builds: a query
    #: then imports none of it. Empty: the kind's module is the whole kind.
    build_module: str = ""


_PKG = "lance_format.index.kinds"
_VECTOR = f"{_PKG}.vector"
_LISTED = f"{_PKG}.listed"
_VECTOR_DETAILS = "VectorIndexDetails"

#: Every kind, first match wins (by name and by details): kinds we implement come before the
#: name-only entries of :mod:`lance_format.index.kinds.listed`.
CATALOG: tuple[KindInfo, ...] = (
    KindInfo("BTREE", "BTreeIndexDetails", f"{_PKG}.btree"),
    KindInfo("BITMAP", "BitmapIndexDetails", f"{_PKG}.bitmap"),
    KindInfo("LABEL_LIST", "LabelListIndexDetails", f"{_PKG}.label_list"),
    KindInfo("ZONEMAP", "ZoneMapIndexDetails", f"{_PKG}.zonemap"),
    KindInfo("BLOOMFILTER", "BloomFilterIndexDetails", f"{_PKG}.bloomfilter"),
    KindInfo("NGRAM", "NGramIndexDetails", f"{_PKG}.ngram"),
    KindInfo("INVERTED", "InvertedIndexDetails", f"{_PKG}.inverted", aliases=("FTS",), family="text"),
    *(KindInfo(name, _VECTOR_DETAILS, _VECTOR, family="vector", attribute="ALL", build_module=f"{_VECTOR}_build")
      for name in ("IVF_FLAT", "IVF_PQ", "IVF_SQ", "IVF_HNSW_FLAT", "IVF_HNSW_PQ", "IVF_HNSW_SQ", "IVF_RQ")),
    KindInfo("FRAG_REUSE", "FragmentReuseIndexDetails", _LISTED, buildable=False, family="system",
             attribute="ALL"),
    KindInfo("MEM_WAL", "MemWalIndexDetails", _LISTED, buildable=False, family="system", attribute="ALL"),
    KindInfo("JSON", "JsonIndexDetails", _LISTED, buildable=False, attribute="ALL"),
)
