"""BITMAP: one row set per distinct value (:mod:`lance_format.index.bitmap`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lance_format.index import bitmap
from lance_format.index.kind import BuildContext, IndexKind, check_scalar_type
from lance_format.index.kinds.btree import concat_training
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


class BitmapKind(IndexKind):
    """pylance's ``BitmapIndexDetails`` (``rust/lance-index/src/scalar/bitmap.rs``)."""

    name: ClassVar[str] = "BITMAP"
    details: ClassVar[str] = "BitmapIndexDetails"
    display: ClassVar[str] = "Bitmap"
    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True

    def check_column(self, column: str, typ: pa.DataType) -> None:
        check_scalar_type(self.name, column, typ)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        data = concat_training(chunks, ctx)
        return bitmap.write_bitmap(out, *bitmap.group_rows(data.values, data.ids))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> bitmap.BitmapIndex:
        return bitmap.BitmapIndex(src, domain.fragment_rows, domain)

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        keys, rows = bitmap.BitmapIndex(src, fragment_rows.get).read_all()
        return bitmap.write_bitmap(out, keys, [np.sort(amap.translate(r)[0]) for r in rows])

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        return {"num_bitmaps": bitmap.BitmapIndex(src, fragment_rows.get).num_bitmaps}


KIND = BitmapKind()
