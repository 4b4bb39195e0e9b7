"""Kinds we know by name only: listed with pylance's type string, kept intact, reported unmaintained.

A kind module that learns to build, query or remap one of these takes its place in
:mod:`lance_format.index.registry` (the registry keeps the first kind per details name).
"""

from __future__ import annotations

from lance_format.index.kind import Family, IndexKind


def listed(name: str, details: str, display: str, family: Family = "scalar", supported_version: int = 1
           ) -> IndexKind:
    """A kind that can only be listed (never built, queried or remapped by us)."""
    attrs = {"name": name, "details": details, "display": display, "family": family,
             "supported_version": supported_version, "__module__": __name__}
    kind: IndexKind = type(f"{display}Listed", (IndexKind,), attrs)()
    return kind


#: System indices: fragment reuse (deferred remap, ``rust/lance-index/src/frag_reuse.rs``) and MemWAL.
FRAG_REUSE = listed("FRAG_REUSE", "FragmentReuseIndexDetails", "FragmentReuse", "system")
MEM_WAL = listed("MEM_WAL", "MemWalIndexDetails", "MemWal", "system")

#: pylance 14.0.2's other kinds (type strings as ``list_indices()`` reports them; versions from
#: ``IndexType::version``, ``rust/lance-index/src/lib.rs``: every vector kind shares version 2).
ALL = (
    FRAG_REUSE, MEM_WAL,
    listed("INVERTED", "InvertedIndexDetails", "Inverted", "text"),
    listed("NGRAM", "NGramIndexDetails", "NGram"),
    listed("ZONEMAP", "ZoneMapIndexDetails", "ZoneMap"),
    listed("BLOOMFILTER", "BloomFilterIndexDetails", "BloomFilter"),
    listed("JSON", "JsonIndexDetails", "Json"),
    listed("IVF_PQ", "VectorIndexDetails", "Vector", "vector", supported_version=2),
)
