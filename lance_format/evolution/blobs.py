"""``take_blobs``: rows of a blob column as :class:`~lance_format.table.blobs.BlobFile` objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.evolution.reading import address_of_row_ids
from lance_format.table.blobs import BlobFile, blob_files, check_selector, is_blob_field
from lance_format.table.read import FragmentScan, ReadContext

_Ints: TypeAlias = Sequence[int] | pa.Array | None


def _ints(values: Sequence[int] | pa.Array) -> np.ndarray:
    raw = values.to_numpy(zero_copy_only=False) if isinstance(values, (pa.Array, pa.ChunkedArray)) else values
    return np.asarray(raw, dtype=np.uint64).reshape(-1)


def take_blobs(ds: Any, ctx: ReadContext, column: str, ids: _Ints = None, addresses: _Ints = None,
               indices: _Ints = None) -> list[BlobFile | None]:
    """File-like handles on the blobs of ``column`` at the chosen rows, in the order asked.

    Args:
        ds: The dataset (turns ``indices`` and ``ids`` into row addresses).
        ctx: The dataset version's read context.
        column: A top-level blob column.
        ids: Row ids (stable row ids, else addresses).
        addresses: Row addresses (``fragment id << 32 | offset``).
        indices: Live-row positions.

    Raises:
        InvalidInputError: not exactly one selector, or ``column`` is not a blob column.
    """
    check_selector(ids, addresses, indices)
    if column not in ctx.arrow_schema.names or not is_blob_field(ctx.arrow_schema.field(column)):
        raise InvalidInputError(f"{ds.uri}: take_blobs: {column!r} is not a blob column")
    if indices is not None:
        addr = _ints(ds.take(indices, columns=["_rowaddr"]).column("_rowaddr"))
    elif ids is not None:
        want = _ints(ids)
        addr = address_of_row_ids(ds, want)
        missing = addr == np.uint64(2**64 - 1)
        if missing.any():
            raise InvalidInputError(f"{ds.uri}: take_blobs: no live row has id {int(want[missing][0])}")
    else:
        addr = _ints(addresses) if addresses is not None else np.zeros(0, np.uint64)
    out: list[BlobFile | None] = [None] * len(addr)
    frags = {f.id: f for f in ctx.manifest.fragments}
    frag_ids = (addr >> np.uint64(32)).astype(np.int64)
    for fid in np.unique(frag_ids).tolist():
        frag = frags.get(fid)
        if frag is None:
            raise InvalidInputError(f"{ds.uri}: take_blobs: no fragment {fid}")
        at = np.flatnonzero(frag_ids == fid)
        offsets = addr[at] & np.uint64(0xFFFFFFFF)
        uniq, inverse = np.unique(offsets, return_inverse=True)
        scan = FragmentScan(ctx, frag, [column], blob_descriptions=True)
        desc = scan.take(uniq).column(0)
        df = scan.data_file_of(column)
        files = blob_files(ctx.data_store(df), df.path, desc)
        for k, j in zip(at.tolist(), inverse.reshape(-1).tolist(), strict=True):
            f = files[j]
            # each requested row gets its own handle (its own cursor), as pylance's
            out[k] = None if f is None else BlobFile(f._store, f._key, f._start, f._size)
    return out
