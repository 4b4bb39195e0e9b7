"""LABEL_LIST: a BITMAP over list elements plus the null lists (:mod:`lance_format.index.bitmap`).

Answers ``array_has_any`` / ``array_has_all``, which our SQL does not plan through an index
yet, so it is built and remapped but not queried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index import bitmap
from lance_format.index.kind import BuildContext, IndexKind, check_scalar_type
from lance_format.index.kinds.btree import concat_training
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


class LabelListKind(IndexKind):
    """pylance's ``LabelListIndexDetails`` (``rust/lance-index/src/scalar/label_list.rs``)."""

    name: ClassVar[str] = "LABEL_LIST"
    details: ClassVar[str] = "LabelListIndexDetails"
    display: ClassVar[str] = "LabelList"
    # pylance 14.0.2 records version 1: the null lists live in a second global buffer.
    supported_version: ClassVar[int] = 1
    buildable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True

    def index_version(self, stable_row_ids: bool) -> int:
        return 1

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)):
            raise UnsupportedIndexTypeError(
                f"a LABEL_LIST index needs a list column; column {column!r} is of type {typ}")
        check_scalar_type(self.name, column, typ.value_type)

    def write(self, out: IndexDir, chunks: Sequence[Any], model: Any, ctx: BuildContext) -> tuple[IndexFile, ...]:
        data = concat_training(chunks, ctx)
        return bitmap.write_label_list(out, *bitmap.label_list_rows(data.values, data.ids))

    def remap(self, src: IndexDir, out: IndexDir, meta: IndexMetadata, amap: RowAddressMap,
              fragment_rows: Mapping[int, int]) -> tuple[IndexFile, ...]:
        keys, rows = bitmap.BitmapIndex(src, fragment_rows.get).read_all()
        nulls = bitmap.read_label_list_nulls(src, fragment_rows.get)
        return bitmap.write_label_list(out, keys, [np.sort(amap.translate(r)[0]) for r in rows],
                                       np.sort(amap.translate(nulls)[0]))

    def statistics(self, src: IndexDir, meta: IndexMetadata, fragment_rows: Mapping[int, int]) -> dict[str, Any]:
        return {"num_bitmaps": bitmap.BitmapIndex(src, fragment_rows.get).num_bitmaps}


KIND = LabelListKind()
