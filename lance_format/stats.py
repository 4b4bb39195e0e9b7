"""``ds.stats`` as pylance's ``LanceStats``: dataset, data and index statistics.

``data_stats()`` sums, per field, the page bytes of the field's column in every data file (what
pylance 14.0.2 reports as ``bytes_on_disk``: the stored, possibly compressed, page buffers); the
column sizes come from each file's column metadata (``LanceFileReader.file_statistics``), so only
file tails are read. ``dataset_stats()`` counts deleted rows, fragments and fragments smaller than
a row group.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypedDict

from lance_format.file.reader import LanceFileReader
from lance_format.index.api import DatasetStats as _IndexStats

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

__all__ = ["DataStatistics", "DatasetStatsDict", "FieldStatistics", "LanceStats", "data_statistics"]


@dataclasses.dataclass
class FieldStatistics:
    """Statistics about one field of the dataset."""

    id: int  #: id of the field
    bytes_on_disk: int  #: stored (possibly compressed) bytes of the field's pages


@dataclasses.dataclass
class DataStatistics:
    """Statistics about the data of the dataset (one entry per stored field, by field id)."""

    fields: list[FieldStatistics]


class DatasetStatsDict(TypedDict):
    """pylance's ``DatasetStats`` dict."""

    num_deleted_rows: int
    num_fragments: int
    num_small_files: int


def data_statistics(ds: LanceDataset) -> DataStatistics:
    """Bytes on disk per field over every data file of ``ds``'s version."""
    sizes: dict[int, int] = {}
    ctx = ds._ctx
    for frag in ds.manifest.fragments:
        for df in frag.files:
            reader = LanceFileReader(None, store=ctx.data_store(df), key=df.path,
                                     file_size=df.file_size_bytes or None)
            columns = reader.file_statistics().columns
            indices = list(df.column_indices) or list(range(len(df.fields)))
            for field_id, col in zip(df.fields, indices, strict=False):
                if field_id < 0 or col < 0 or col >= len(columns):
                    continue
                sizes[field_id] = sizes.get(field_id, 0) + columns[col].size_bytes
    # every field of the schema, stored or not (a struct without its own column has 0 bytes)
    ids = sorted({f.id for f in ds.lance_schema.flat()} | set(sizes))
    return DataStatistics([FieldStatistics(fid, sizes.get(fid, 0)) for fid in ids])


class LanceStats(_IndexStats):
    """``ds.stats``: ``dataset_stats()``, ``data_stats()`` and ``index_stats(name)`` as pylance's."""

    def dataset_stats(self, max_rows_per_group: int = 1024) -> DatasetStatsDict:
        """Deleted rows, fragments, and fragments with fewer rows than ``max_rows_per_group``."""
        frags = self._ds.manifest.fragments
        deleted = sum(f.deletion_file.num_deleted_rows for f in frags if f.deletion_file is not None)
        small = sum(1 for f in frags if f.physical_rows < max_rows_per_group)
        return {"num_deleted_rows": deleted, "num_fragments": len(frags), "num_small_files": small}

    def data_stats(self) -> DataStatistics:
        """Bytes on disk per field (see the module docstring)."""
        return data_statistics(self._ds)
