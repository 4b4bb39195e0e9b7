"""Scalar indices (BTREE, BITMAP) in pylance 14.0.2's on-disk format.

* build: :func:`~lance_format.index.build.create_scalar_index` (plan → execute on a
  ``Runner`` → one ``CreateIndex`` commit), also ``LanceDataset.create_scalar_index``;
* query: the scanner asks :mod:`lance_format.index.scan` for candidate rows of a SQL
  filter, and ``explain_plan()`` shows ``ScalarIndexQuery`` when an index was used;
* compaction: :func:`~lance_format.index.remap.remap_indices` (immediate) and
  :mod:`lance_format.index.frag_reuse` (deferred), folded by
  :func:`~lance_format.index.optimize.optimize_indices`.

Submodules are imported lazily by the dataset and scanner, so importing the package
core does not pull this in.
"""

from lance_format.index.models import (
    FRAG_REUSE_INDEX,
    IndexDescription,
    IndexInfo,
    IndexStatistics,
    ScalarIndexType,
    SegmentStats,
)

__all__ = [
    "FRAG_REUSE_INDEX",
    "IndexDescription",
    "IndexInfo",
    "IndexStatistics",
    "ScalarIndexType",
    "SegmentStats",
]
