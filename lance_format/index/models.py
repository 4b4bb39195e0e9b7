"""Index constants, new-segment metadata and the typed results of the index API.

What each kind is (type URL, display name, versions) lives with the kind
(:mod:`lance_format.index.kinds`, found through :mod:`lance_format.index.registry`).
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Literal

from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata

#: ``index_type`` names of the scalar kinds (the registry, ``lance_format.index.registry``, is the
#: authority on what can be built).
ScalarIndexType = Literal["BTREE", "BITMAP", "LABEL_LIST", "INVERTED", "FTS", "NGRAM", "ZONEMAP", "BLOOMFILTER"]

#: Name of the system index written by a compaction that defers index remapping
#: (``FRAG_REUSE_INDEX_NAME``, ``rust/lance-index/src/frag_reuse.rs``).
FRAG_REUSE_INDEX = "__lance_frag_reuse"

FRAG_REUSE_URL = "/lance.table.FragmentReuseIndexDetails"


def kind_of(meta: IndexMetadata) -> str:
    """Details message name of an index (``"BTreeIndexDetails"``…; ``""`` if unrecorded)."""
    return meta.index_details.type_name if meta.index_details is not None else ""


def is_system(meta: IndexMetadata) -> bool:
    """Whether ``meta`` is a system index (fragment reuse, mem-wal), hidden from listings."""
    return meta.name.startswith("__lance_")


def new_index_metadata(*, name: str, field_id: int, dataset_version: int, fragment_ids: frozenset[int],
                       type_url: str, files: tuple[IndexFile, ...], uuid: str | None = None,
                       index_version: int = 0, details_value: bytes = b"") -> IndexMetadata:
    """Metadata for a freshly written index segment, filled as pylance fills it."""
    return IndexMetadata(
        uuid=uuid or str(_uuid.uuid4()), name=name, fields=(field_id,), dataset_version=dataset_version,
        fragment_bitmap=fragment_ids, index_details=IndexDetails(type_url, details_value), index_version=index_version,
        created_at=dt.datetime.now(dt.UTC), files=files)


@dataclass(frozen=True)
class IndexInfo:
    """One entry of ``list_indices()`` (pylance returns the same keys as a dict).

    Attributes:
        name: Index name.
        type: ``"BTree"``, ``"Bitmap"``, …
        uuid: Segment id.
        fields: Indexed column names.
        version: Dataset version the segment was built at.
        fragment_ids: Fragments the segment covers.
        base_id: Base path id, if any.
    """

    name: str
    type: str
    uuid: str
    fields: tuple[str, ...]
    version: int
    fragment_ids: frozenset[int]
    base_id: int | None = None

    def __getitem__(self, key: str) -> Any:
        """Dict-style access, so code written against pylance's dicts keeps working."""
        return getattr(self, key)


@dataclass(frozen=True)
class IndexDescription:
    """One entry of ``describe_indices()`` (pylance's ``IndexDescription``)."""

    name: str
    type_url: str
    num_rows_indexed: int
    fields: tuple[int, ...]
    field_names: tuple[str, ...]
    num_segments: int
    total_size_bytes: int


@dataclass(frozen=True)
class SegmentStats:
    """Statistics of one index segment (BTree: pages and min/max; Bitmap: bitmaps).

    Keys a kind reports beyond these (vector partitions, text tokens…) are in ``details``.
    """

    uuid: str
    num_rows: int
    num_pages: int | None = None
    min: str | None = None
    max: str | None = None
    num_bitmaps: int | None = None
    details: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class IndexStatistics:
    """``ds.stats.index_stats(name)`` (the keys of pylance's dict, typed)."""

    index_type: str
    name: str
    num_segments: int
    segments: tuple[SegmentStats, ...]
    num_indexed_fragments: int
    num_indexed_rows: int
    num_unindexed_fragments: int
    num_unindexed_rows: int
    updated_at_timestamp_ms: int | None

    @property
    def num_indices(self) -> int:
        """pylance's older name for ``num_segments``."""
        return self.num_segments
