"""LABEL_LIST: a BITMAP over list elements plus the null lists (:mod:`lance_format.index.bitmap`).

Answers ``array_has_any`` (the union of the values' bitmaps; ``array_has`` / ``array_contains``
plan as ``array_has_any`` of one value, as pylance does) and ``array_has_all`` (their
intersection), as upstream's ``LabelListIndex::search`` (``rust/lance-index/src/scalar/label_list.rs``).
A null value selects the null key, the rows holding a null element, which is what the SQL
functions match. Inexact: the index holds elements, not a row's list, so fetched rows cannot be
checked against a value; the scan's filter re-checks them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import UnsupportedIndexTypeError
from lance_format.index import bitmap
from lance_format.index.kind import BuildContext, IndexKind, check_scalar_type
from lance_format.index.kinds.btree import concat_training
from lance_format.index.predicates import HasAll, HasAny, IndexQuery
from lance_format.index.rowset import RowDomain
from lance_format.index.store import IndexDir
from lance_format.table.index_metadata import IndexFile, IndexMetadata

if TYPE_CHECKING:
    from lance_format.index.remap import RowAddressMap


U64 = npt.NDArray[np.uint64]


class LabelListReader:
    """An opened LABEL_LIST segment answering ``array_has_any`` / ``array_has_all`` (no values: inexact)."""

    def __init__(self, index: bitmap.BitmapIndex):
        self.index = index

    @property
    def path(self) -> str:
        """The segment's file."""
        return self.index.path

    def _positions(self, values: tuple[pa.Scalar, ...]) -> tuple[npt.NDArray[np.int64], bool]:
        """Key positions of the distinct ``values``, and whether every one of them is a key."""
        keys = self.index.keys
        wanted = [v.as_py() for v in values if v.is_valid]
        found = np.empty(0, np.int64)
        if wanted:
            codes = pc.index_in(pa.array(wanted, keys.type), value_set=keys, skip_nulls=True)
            found = np.unique(codes.drop_null().to_numpy(zero_copy_only=False).astype(np.int64))
            complete = len(found) == len(set(wanted))
        else:
            complete = True
        if len(wanted) < len(values):  # a null value asks for the null key (rows with a null element)
            nulls = np.flatnonzero(keys.is_null().to_numpy(zero_copy_only=False))
            found = np.concatenate([found, nulls])
            complete = complete and nulls.size > 0
        return found, complete

    def search_values(self, query: IndexQuery) -> tuple[U64, pa.Array]:
        """Rows whose list holds any (``HasAny``) or all (``HasAll``) of the values, with null values.

        Raises:
            UnsupportedIndexTypeError: another query (the planner only hands over these two).
            CorruptFileError: a bitmap is malformed or names a row the segment does not cover.
        """
        if not isinstance(query, (HasAny, HasAll)):
            raise UnsupportedIndexTypeError(f"{self.path}: a LABEL_LIST index cannot answer {query.describe('column')}")
        which, complete = self._positions(query.values)
        ids = np.empty(0, np.uint64)
        if isinstance(query, HasAny):
            parts = self.index.key_rows(which)
            ids = np.unique(np.concatenate(parts)) if parts else ids
        elif complete and which.size:
            parts = sorted(self.index.key_rows(which), key=len)  # smallest first: the cut shrinks fastest
            ids = parts[0]
            for part in parts[1:]:
                ids = np.intersect1d(ids, part, assume_unique=True)
        return ids, pa.nulls(ids.size, self.index.keys.type)


class LabelListKind(IndexKind):
    """pylance's ``LabelListIndexDetails`` (``rust/lance-index/src/scalar/label_list.rs``)."""

    name: ClassVar[str] = "LABEL_LIST"
    details: ClassVar[str] = "LabelListIndexDetails"
    display: ClassVar[str] = "LabelList"
    # pylance 14.0.2 records version 1: the null lists live in a second global buffer.
    supported_version: ClassVar[int] = 1
    buildable: ClassVar[bool] = True
    queryable: ClassVar[bool] = True
    remappable: ClassVar[bool] = True
    exact: ClassVar[bool] = False

    def index_version(self, stable_row_ids: bool) -> int:
        return 1

    def check_column(self, column: str, typ: pa.DataType) -> None:
        if not (pa.types.is_list(typ) or pa.types.is_large_list(typ)):
            raise UnsupportedIndexTypeError(
                f"a LABEL_LIST index needs a list column; column {column!r} is of type {typ}")
        check_scalar_type(self.name, column, typ.value_type)

    def answers(self, query: IndexQuery) -> bool:
        """``array_has_any`` / ``array_has_all`` (and ``array_has``, planned as ``array_has_any``)."""
        return isinstance(query, (HasAny, HasAll))

    def open(self, src: IndexDir, meta: IndexMetadata, domain: RowDomain) -> LabelListReader:
        return LabelListReader(bitmap.BitmapIndex(src, domain.fragment_rows, domain))

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
