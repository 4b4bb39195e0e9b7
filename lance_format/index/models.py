"""Index kinds, constants and the typed results of the index API.

Type URLs and display names are those pylance 14.0.2 records and reports
(``ScalarIndexPluginRegistry::get_plugin_by_details``,
``rust/lance-index/src/scalar/registry.rs``: the plugin is the last ``.`` token of the
type URL with ``IndexDetails`` stripped).
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Literal

from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata

ScalarIndexType = Literal["BTREE", "BITMAP", "LABEL_LIST"]

#: Name of the system index written by a compaction that defers index remapping
#: (``FRAG_REUSE_INDEX_NAME``, ``rust/lance-index/src/frag_reuse.rs``).
FRAG_REUSE_INDEX = "__lance_frag_reuse"

BTREE_URL = "/lance.table.BTreeIndexDetails"
BITMAP_URL = "/lance.table.BitmapIndexDetails"
LABEL_LIST_URL = "/lance.table.LabelListIndexDetails"
FRAG_REUSE_URL = "/lance.table.FragmentReuseIndexDetails"

#: LABEL_LIST: pylance 14.0.2 keeps the rows whose list is null in a second global buffer
#: of the file (named by the ``lance:label_list_nulls`` metadata), see ``bitmap``.
TYPE_URLS: dict[str, str] = {"BTREE": BTREE_URL, "BITMAP": BITMAP_URL, "LABEL_LIST": LABEL_LIST_URL}
#: Index kinds this package reads and rewrites (by details message name).
REWRITABLE = frozenset({"BTreeIndexDetails", "BitmapIndexDetails", "LabelListIndexDetails"})
#: Kinds our scanner queries (LABEL_LIST answers ``array_has_*``, which our SQL lacks).
QUERYABLE = frozenset({"BTreeIndexDetails", "BitmapIndexDetails"})
#: Highest ``index_version`` of each kind we understand (pylance ignores newer ones
#: too: ``retain_supported_indices``). pylance 14.0.2 records BTree version 1 on
#: datasets with stable row ids (0 otherwise): same files, but ``ids`` are row addresses.
SUPPORTED_VERSION = {"BTreeIndexDetails": 1, "BitmapIndexDetails": 0, "LabelListIndexDetails": 1}


def index_version_for(index_type: str, stable_row_ids: bool) -> int:
    """The ``index_version`` pylance 14.0.2 records for a new segment."""
    if index_type == "LABEL_LIST":
        return 1  # pylance 14.0.2 records LabelList version 1 (null lists in a global buffer)
    return 1 if index_type == "BTREE" and stable_row_ids else 0


def stores_addresses(meta: IndexMetadata, stable_row_ids: bool) -> bool:
    """Whether the segment's ids are row addresses (else stable row ids).

    Observed on pylance 14.0.2: on a dataset with stable row ids a BTree segment of
    version 1 holds row addresses (and compaction remaps it), a version 0 segment and a
    Bitmap hold stable row ids (and compaction leaves them).
    """
    return not stable_row_ids or (kind_of(meta) == "BTreeIndexDetails" and meta.index_version >= 1)

_DISPLAY = {"BTreeIndexDetails": "BTree", "BitmapIndexDetails": "Bitmap", "LabelListIndexDetails": "LabelList",
            "InvertedIndexDetails": "Inverted", "NGramIndexDetails": "NGram", "ZoneMapIndexDetails": "ZoneMap",
            "VectorIndexDetails": "Vector", "FragmentReuseIndexDetails": "FragmentReuse"}


def kind_of(meta: IndexMetadata) -> str:
    """Details message name of an index (``"BTreeIndexDetails"``…; ``""`` if unrecorded)."""
    return meta.index_details.type_name if meta.index_details is not None else ""


def display_type(meta: IndexMetadata) -> str:
    """pylance's ``type`` string for an index (``"BTree"``, ``"Bitmap"``…)."""
    kind = kind_of(meta)
    return _DISPLAY.get(kind, kind.removesuffix("IndexDetails") or "Unknown")


def is_system(meta: IndexMetadata) -> bool:
    """Whether ``meta`` is a system index (fragment reuse, mem-wal), hidden from listings."""
    return meta.name.startswith("__lance_")


def new_index_metadata(*, name: str, field_id: int, dataset_version: int, fragment_ids: frozenset[int],
                       type_url: str, files: tuple[IndexFile, ...], uuid: str | None = None,
                       index_version: int = 0) -> IndexMetadata:
    """Metadata for a freshly written index segment, filled as pylance fills it."""
    return IndexMetadata(
        uuid=uuid or str(_uuid.uuid4()), name=name, fields=(field_id,), dataset_version=dataset_version,
        fragment_bitmap=fragment_ids, index_details=IndexDetails(type_url), index_version=index_version,
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
    """Statistics of one index segment (BTree: pages and min/max; Bitmap: bitmaps)."""

    uuid: str
    num_rows: int
    num_pages: int | None = None
    min: str | None = None
    max: str | None = None
    num_bitmaps: int | None = None


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
