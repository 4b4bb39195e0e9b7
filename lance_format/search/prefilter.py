"""Which rows a ``prefilter=True`` filter keeps, for the candidates of a ``nearest=`` search.

The filter is evaluated once per fragment, on whole columns (the decoded copies
:mod:`.rows` keeps for fixed-width columns, else a scan of that fragment), and the answer is
one boolean per physical row of the searched fragments laid end to end. It is kept per dataset
version and filter text: a version never changes, so repeated searches with the same filter
only look candidates up (one gather), instead of scanning and sorting row addresses again.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.arrays import numbers, true_mask
from lance_format.search.rows import kept_column
from lance_format.table.read import ROW_ADDR, ReadContext
from lance_format.table.scan import Scan, ScanOptions, filter_mask, referenced_columns

U64 = npt.NDArray[np.uint64]
#: Filters remembered per dataset version.
KEPT_FILTERS = 8


@dataclass(frozen=True)
class RowMask:
    """One flag per physical row of ``fragments`` (in that order, laid end to end)."""

    fragments: tuple[int, ...]
    bases: npt.NDArray[np.int64]  # first position of each fragment
    flags: npt.NDArray[np.bool_]

    def positions(self, addrs: U64) -> npt.NDArray[np.int64]:
        """Position of each row address in :attr:`flags`; -1 for rows of other fragments."""
        return row_positions(self.fragments, self.bases, addrs)


def layout(frags: Sequence[Any]) -> tuple[tuple[int, ...], npt.NDArray[np.int64]]:
    """Fragment ids and the first position of each when their physical rows are laid end to end."""
    ids = tuple(int(f.id) for f in frags)
    rows = np.fromiter((int(f.physical_rows) for f in frags), np.int64, len(frags))
    return ids, np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)


def row_positions(fragments: tuple[int, ...], bases: npt.NDArray[np.int64], addrs: U64) -> npt.NDArray[np.int64]:
    """Positions of row addresses in the layout of :func:`layout`; -1 outside those fragments."""
    if not fragments:
        return np.full(addrs.size, -1, np.int64)
    ids = np.asarray(fragments, np.int64)
    order = np.argsort(ids, kind="stable")
    frag = (addrs >> np.uint64(32)).astype(np.int64)
    at = np.minimum(np.searchsorted(ids[order], frag), ids.size - 1)
    hit = ids[order][at] == frag
    pos = bases[order][at] + (addrs & np.uint64(0xFFFFFFFF)).astype(np.int64)
    out: npt.NDArray[np.int64] = np.where(hit, pos, -1)
    return out


_MASKS: weakref.WeakKeyDictionary[ReadContext, OrderedDict[tuple[str, tuple[int, ...]], RowMask]] = \
    weakref.WeakKeyDictionary()


def _fragment_flags(ctx: ReadContext, frag: Any, expr: pc.Expression, columns: list[str],
                    filter_sql: str | None) -> npt.NDArray[np.bool_]:
    n = int(frag.physical_rows)
    arrays = [kept_column(ctx, frag, c) for c in columns]
    if all(a is not None for a in arrays):
        data = pa.table(arrays, names=columns) if columns else pa.table({"_": pa.nulls(n)})
        mask = filter_mask(expr, data)
        if isinstance(mask, (pa.Array, pa.ChunkedArray)):
            return true_mask(mask)  # from the bitmaps: fill_null / to_numpy would import pandas
        keep = mask.as_py() if isinstance(mask, pa.Scalar) else mask
        return np.full(n, keep is True)
    # Columns not kept whole (strings, large vectors): a scan of this fragment (which may
    # answer from a scalar index through the filter text).
    opts = ScanOptions([], expr, with_row_address=True, fragments=[frag], filter_sql=filter_sql)
    out = np.zeros(n, bool)
    for b in Scan(ctx, opts).to_batches():
        out[(numbers(b.column(ROW_ADDR)) & np.uint64(0xFFFFFFFF)).astype(np.int64)] = True
    return out


def prefilter_mask(ctx: ReadContext, frags: Sequence[Any], expr: pc.Expression, filter_sql: str | None) -> RowMask:
    """Which physical rows of ``frags`` the filter keeps (deleted rows may be flagged too:
    callers drop them separately)."""
    ids, bases = layout(frags)
    key = (filter_sql if filter_sql is not None else str(expr), ids)
    kept = _MASKS.setdefault(ctx, OrderedDict())
    hit = kept.get(key)
    if hit is not None:
        kept.move_to_end(key)
        return hit
    columns = referenced_columns(expr, ctx.arrow_schema.names)
    parts = [_fragment_flags(ctx, f, expr, columns, filter_sql) for f in frags]
    flags = np.concatenate(parts) if parts else np.zeros(0, bool)
    flags.flags.writeable = False  # shared by later queries
    out = kept[key] = RowMask(ids, bases, flags)
    while len(kept) > KEPT_FILTERS:
        kept.popitem(last=False)
    return out
