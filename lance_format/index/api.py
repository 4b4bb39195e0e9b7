"""Listing and describing indices (``list_indices``, ``describe_indices``, ``stats.index_stats``).

Shapes follow pylance 14.0.2's ``LanceDataset.list_indices()`` /
``describe_indices()`` / ``DatasetStats.index_stats()`` as typed values; system
indices (``__lance_frag_reuse``) are left out as pylance leaves them out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lance_format.errors import IndexNotFoundError
from lance_format.index._compat import manifest_indices
from lance_format.index.models import IndexDescription, IndexInfo, IndexStatistics, SegmentStats, is_system
from lance_format.index.registry import display_type, for_segment
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexMetadata

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


def _field_names(ds: LanceDataset, ids: tuple[int, ...]) -> tuple[str, ...]:
    by_id = {f.id: f.name for f in ds.lance_schema.fields}
    return tuple(by_id.get(i, str(i)) for i in ids)


def _user_indices(ds: LanceDataset) -> list[IndexMetadata]:
    return [m for m in manifest_indices(ds.manifest) if not is_system(m)]


def list_indices(ds: LanceDataset) -> list[IndexInfo]:
    """Every index segment of the checked-out version."""
    return [IndexInfo(m.name, display_type(m), m.uuid, _field_names(ds, m.fields), m.dataset_version,
                      m.fragment_bitmap or frozenset(), m.base_id) for m in _user_indices(ds)]


def _rows_in(ds: LanceDataset, frag_ids: frozenset[int]) -> int:
    return sum(f.num_rows for f in ds.manifest.fragments if f.id in frag_ids)


def describe_indices(ds: LanceDataset) -> list[IndexDescription]:
    """One entry per index name (its segments summed)."""
    by_name: dict[str, list[IndexMetadata]] = {}
    for m in _user_indices(ds):
        by_name.setdefault(m.name, []).append(m)
    out = []
    for name, segs in by_name.items():
        covered = frozenset().union(*(s.fragment_bitmap or frozenset() for s in segs))
        size = sum(f.size_bytes for s in segs for f in s.files or ())
        out.append(IndexDescription(name, segs[0].index_details.type_url if segs[0].index_details else "",
                                    _rows_in(ds, covered), segs[0].fields, _field_names(ds, segs[0].fields),
                                    len(segs), size))
    return out


_SEGMENT_KEYS = frozenset(f for f in SegmentStats.__dataclass_fields__ if f not in ("uuid", "num_rows", "details"))


def _segment_stats(ds: LanceDataset, m: IndexMetadata) -> SegmentStats:
    rows = _rows_in(ds, m.fragment_bitmap or frozenset())
    kind = for_segment(m)
    if kind is None or not kind.understands(m):
        return SegmentStats(m.uuid, rows)
    index_dir = IndexDir(ds._store, m.uuid, sizes={f.path: f.size_bytes for f in m.files or ()})
    found = kind.statistics(index_dir, m, {f.id: f.physical_rows for f in ds.manifest.fragments})
    known = {k: v for k, v in found.items() if k in _SEGMENT_KEYS}
    return SegmentStats(m.uuid, rows, **known,
                        details=tuple(sorted((k, v) for k, v in found.items() if k not in _SEGMENT_KEYS)))


def index_stats(ds: LanceDataset, name: str) -> IndexStatistics:
    """Statistics of index ``name``.

    Raises:
        IndexNotFoundError: no such index.
    """
    segs = [m for m in _user_indices(ds) if m.name == name]
    if not segs:
        raise IndexNotFoundError(f"{ds.uri}: version {ds.version} has no index named {name!r}")
    covered = frozenset().union(*(s.fragment_bitmap or frozenset() for s in segs))
    live = {f.id: f.num_rows for f in ds.manifest.fragments}
    unindexed = [i for i in live if i not in covered]
    created = [s.created_at for s in segs if s.created_at is not None]
    return IndexStatistics(
        index_type=display_type(segs[0]), name=name, num_segments=len(segs),
        segments=tuple(_segment_stats(ds, s) for s in segs),
        num_indexed_fragments=sum(1 for i in live if i in covered),
        num_indexed_rows=sum(n for i, n in live.items() if i in covered),
        num_unindexed_fragments=len(unindexed), num_unindexed_rows=sum(live[i] for i in unindexed),
        updated_at_timestamp_ms=int(max(created).timestamp() * 1000) if created else None)


class DatasetStats:
    """``ds.stats`` (pylance's ``DatasetStats``): statistics about the dataset's indices."""

    def __init__(self, ds: LanceDataset):
        self._ds = ds

    def index_stats(self, name: str) -> IndexStatistics:
        """Statistics of index ``name`` (see :func:`index_stats`)."""
        return index_stats(self._ds, name)
