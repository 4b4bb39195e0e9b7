"""BTREE: sorted pages of ``(value, id)`` with a page lookup (:mod:`lance_format.index.btree`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lance_format.index import btree
from lance_format.index.kind import BuildContext, IndexKind, TrainingData, check_scalar_type
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


def concat_training(chunks: Sequence[TrainingData], ctx: BuildContext) -> TrainingData:
    """Every task's rows as one column (typed as the indexed column) and one id array."""
    if not chunks:
        return TrainingData(pa.array([], ctx.field_type), np.empty(0, np.uint64))
    if len(chunks) == 1:  # one task (up to TASK_ROWS rows): no copy
        values, ids = chunks[0].values, chunks[0].ids
    else:
        values, ids = pa.concat_arrays([c.values for c in chunks]), np.concatenate([c.ids for c in chunks])
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return TrainingData(values if values.type == ctx.field_type else values.cast(ctx.field_type), ids)


class BTreeKind(IndexKind):
    """pylance's ``BTreeIndexDetails`` (``rust/lance-index/src/scalar/btree.rs``)."""

    name: ClassVar[str] = "BTREE"
    details: ClassVar[str] = "BTreeIndexDetails"
    display: ClassVar[str] = "BTree"
    # pylance 14.0.2 records version 1 on datasets with stable row ids: same files, but the ids
    # are row addresses (and compaction remaps them).
    supported_version: ClassVar[int] = 1
    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True

    def index_version(self, stable_row_ids: bool) -> int:
        return 1 if stable_row_ids else 0

    def stores_addresses(self, meta: IndexMetadata, stable_row_ids: bool) -> bool:
        return not stable_row_ids or meta.index_version >= 1

    def reads_addresses(self, stable_row_ids: bool) -> bool:
        return stable_row_ids

    def check_column(self, column: str, typ: pa.DataType) -> None:
        check_scalar_type(self.name, column, typ)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        data = concat_training(chunks, ctx)
        values, ids = btree.sort_training_data(data.values, data.ids)
        return btree.write_btree(out, values, ids)

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> btree.BTreeIndex:
        return btree.BTreeIndex(src, domain)

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        values, ids = btree.BTreeIndex(src).read_all()
        new_ids, keep = amap.translate(ids)
        return btree.write_btree(out, values.filter(keep), new_ids)

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        index = btree.BTreeIndex(src)
        lo, hi = index.value_range()
        return {"num_pages": index.num_pages, "min": lo, "max": hi}


KIND = BTreeKind()
