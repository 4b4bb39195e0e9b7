"""``take`` with pylance's row columns (``_rowid``, ``_rowaddr``, ``_rowoffset``) and fragment takes.

pylance 14.0.2 lets ``ds.take(indices, columns=[...])`` name the row columns beside data columns
(``python/python/lance/dataset.py``, ``LanceDataset.take``): ``_rowaddr`` is the row address
(fragment id << 32 | physical offset), ``_rowid`` the stable row id on tables that have them and
the address otherwise, ``_rowoffset`` the requested live-row position itself. The data columns go
through the ordinary take; the row columns are computed from the positions, vectorised per
fragment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.evolution.reading import take_projected
from lance_format.table.read import live_to_physical, row_indices

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

#: The row columns ``take`` computes rather than reads.
ROW_COLUMNS = ("_rowid", "_rowaddr", "_rowoffset")


def names_row_columns(columns: Sequence[str] | Mapping[str, str] | None) -> bool:
    """Whether a ``take`` column list names a row column (dict projections go the usual way)."""
    return columns is not None and not isinstance(columns, Mapping) and any(c in ROW_COLUMNS for c in columns)


def _row_ids_and_addresses(ds: LanceDataset, idx: npt.NDArray[np.int64]
                           ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    ctx = ds._ctx
    frags = list(ds.manifest.fragments)
    counts = np.array([f.num_rows for f in frags], dtype=np.int64)
    bounds = np.cumsum(counts)
    total = int(bounds[-1]) if bounds.size else 0
    if idx.size and (idx.min() < 0 or idx.max() >= total):
        raise InvalidInputError(f"{ds.uri}: take: row index out of range (dataset has {total} rows)")
    which = np.searchsorted(bounds, idx, side="right")
    local = idx - (bounds[which] - counts[which]) if idx.size else idx
    addresses = np.zeros(idx.size, dtype=np.uint64)
    row_ids = np.zeros(idx.size, dtype=np.uint64)
    for k in np.unique(which).tolist():
        frag, sel = frags[k], np.flatnonzero(which == k)
        deleted = ctx.deleted_offsets(frag)
        phys = live_to_physical(local[sel], deleted) if deleted.size else local[sel]
        addresses[sel] = (np.uint64(frag.id) << np.uint64(32)) | phys.astype(np.uint64)
        stable = ctx.row_ids(frag) if ds.has_stable_row_ids else None
        row_ids[sel] = addresses[sel] if stable is None else np.asarray(stable, dtype=np.uint64)[phys]
    return row_ids, addresses


def take_with_row_columns(ds: LanceDataset, indices: Sequence[int] | pa.Array | npt.NDArray[Any],
                          columns: Sequence[str]) -> pa.Table:
    """Rows at live positions ``indices`` with the named data and row columns, in ``columns`` order.

    Raises:
        InvalidInputError: for indices that are not integers or out of range, unknown columns.
    """
    idx = row_indices(indices)
    data_columns = [c for c in columns if c not in ROW_COLUMNS]
    data = take_projected(ds, idx, data_columns) if data_columns else None
    row_ids, addresses = _row_ids_and_addresses(ds, idx)
    computed = {"_rowid": row_ids, "_rowaddr": addresses, "_rowoffset": idx.astype(np.uint64)}
    fields, arrays = [], []
    for c in columns:
        if c in ROW_COLUMNS:
            # pylance declares the offset column non-nullable, the row id and address columns nullable.
            fields.append(pa.field(c, pa.uint64(), nullable=c != "_rowoffset"))
            arrays.append(pa.array(computed[c], pa.uint64()))
        else:
            fields.append(data.schema.field(c))  # type: ignore[union-attr]
            arrays.append(data.column(c))  # type: ignore[union-attr]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def fragment_positions(ds: LanceDataset, fragment_id: int, num_rows: int,
                       indices: Sequence[int] | pa.Array | npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Dataset-wide live positions of a fragment's live positions ``indices`` (``LanceFragment.take``).

    Raises:
        InvalidInputError: for an index outside the fragment's live rows, or a fragment not in ``ds``.
    """
    idx = row_indices(indices)
    if idx.size and (idx.min() < 0 or idx.max() >= num_rows):
        raise InvalidInputError(f"{ds.uri}: fragment {fragment_id}: take: row index out of range "
                                f"(the fragment has {num_rows} live rows)")
    start = 0
    for f in ds.manifest.fragments:
        if f.id == fragment_id:
            return idx + start
        start += f.num_rows
    raise InvalidInputError(f"{ds.uri}: fragment {fragment_id} is not in version {ds.version}")


__all__ = ["ROW_COLUMNS", "fragment_positions", "names_row_columns", "take_with_row_columns"]
