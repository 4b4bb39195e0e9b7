"""Index coverage: how many live rows each index of a dataset does not cover yet.

Every Lance index records which fragments it covers (``fragment_bitmap`` in the manifest), whatever its
kind (BTREE, BITMAP, LABEL_LIST, INVERTED, vector indices), so coverage is read from the manifest alone:
rows of fragments appended after an index was built are scanned unindexed until the index is
optimized. System indices (``__lance_frag_reuse``) are left out.
"""

from __future__ import annotations

from typing import Any

from dagster import MetadataValue

from lance_format.dataset import LanceDataset
from lance_format.index.registry import maintained

#: Metadata key of the most rows any index lacks, and the prefix of each index's own count.
UNINDEXED_ROWS = "lance/unindexed_rows"
UNINDEXED_ROWS_PREFIX = "lance/unindexed_rows/"


def unindexed_rows(ds: LanceDataset) -> dict[str, int]:
    """Live rows each user index does not cover, by index name (segments of one index merged).

    An index whose manifest entry has no fragment bitmap (written by an old client) is left out:
    its coverage is unknown.
    """
    covered: dict[str, set[int]] = {}
    unknown: set[str] = set()
    for index in ds.manifest.indices:
        name = str(index.name)
        if name.startswith("__"):
            continue
        bitmap = getattr(index, "fragment_bitmap", None)
        if bitmap is None:
            unknown.add(name)
            continue
        covered.setdefault(name, set()).update(int(i) for i in bitmap)
    fragments = [(int(f.id), int(f.num_rows)) for f in ds.manifest.fragments]
    return {name: sum(rows for fid, rows in fragments if fid not in ids)
            for name, ids in sorted(covered.items()) if name not in unknown}


def unmaintained_indices(ds: LanceDataset) -> tuple[str, ...]:
    """User indices of a kind this package cannot rebuild (unknown kind or newer version).

    They are kept intact and their coverage is reported, but maintenance cannot bring them up to
    date, so their unindexed rows must not keep asking for it.
    """
    names = {str(m.name) for m in ds.manifest.indices
             if not str(m.name).startswith("__") and maintained(m) is None}
    return tuple(sorted(names))


def coverage_metadata(counts: dict[str, int]) -> dict[str, Any]:
    """``lance/unindexed_rows`` (the most any index lacks) and ``lance/unindexed_rows/<index>`` entries."""
    if not counts:
        return {}
    md: dict[str, Any] = {UNINDEXED_ROWS: MetadataValue.int(max(counts.values()))}
    md.update({UNINDEXED_ROWS_PREFIX + name: MetadataValue.int(n) for name, n in counts.items()})
    return md
