"""Reading-API pieces of pylance's ``LanceDataset`` / ``LanceFragment`` built on the scanner.

``sample``, ``_take_rows`` (by row id: stable ids or row addresses) and ``asof`` version
lookup. Nothing here writes: the join-based column additions (``merge``) live in
:mod:`lance_format.evolution.merge_columns`, so a reading process never loads the writer or
the commit protocol.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError, VersionNotFoundError
from lance_format.evolution.arguments import U64_MAX, integer
from lance_format.projection import evaluate_outputs, plan
from lance_format.scanner import FragmentScan, take_rows
from lance_format.table.versions import local_time

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


def sample(ds: LanceDataset, num_rows: int, columns: Sequence[str] | Mapping[str, str] | None = None,
           randomize_order: bool = True) -> pa.Table:
    """``num_rows`` distinct random live rows (in random order unless ``randomize_order=False``).

    Raises:
        InvalidInputError: if ``num_rows`` exceeds the live row count or is negative.
    """
    num_rows = integer(num_rows, "sample(): num_rows", maximum=U64_MAX)
    total = ds.count_rows()
    if num_rows > total:
        raise InvalidInputError(f"{ds.uri}: sample(): num_rows={num_rows} exceeds the {total} live rows")
    indices = random.sample(range(total), num_rows)
    if not randomize_order:
        indices.sort()
    return take_projected(ds, indices, columns)


def take_projected(ds: LanceDataset, indices: Sequence[int] | npt.NDArray[Any],
                   columns: Sequence[str] | Mapping[str, str] | None) -> pa.Table:
    """``take`` with pylance's column forms (names, ``"s.x"`` paths, ``{name: SQL}``)."""

    projection = plan(ds.schema, columns)
    table = take_rows(ds._ctx, indices, projection.read_columns)
    return _derive(table, projection)


def _derive(table: pa.Table, projection: Any) -> pa.Table:
    if projection.outputs is None:
        return table
    import pyarrow.compute as pc


    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    computed: dict[str, pa.Array] | None = None
    for o in projection.outputs:
        if o.kind == "column":
            cols[o.name] = table.column(o.source)
        elif o.kind == "path":
            arr = table.column(o.source[0]).combine_chunks()
            for p in o.source[1:]:
                arr = pc.struct_field(arr, p)
            cols[o.name] = arr
        elif o.kind == "expr":
            if computed is None:  # every computed column in one evaluation
                computed = evaluate_outputs(table, projection.outputs)
            cols[o.name] = computed[o.name]
        else:
            raise NotSupportedError(f"take(): column {o.name!r} is not supported here; use a scan")
    return pa.table(cols)


def address_of_row_ids(ds: LanceDataset, row_ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Row addresses of live rows with ``row_ids`` (same order); missing/deleted ids map to ``2**64-1``."""
    missing = np.uint64(2**64 - 1)
    ctx = ds._ctx
    out = np.full(row_ids.size, missing, dtype=np.uint64)
    if not ds.has_stable_row_ids:
        # Row ids are addresses: keep those naming a live row of an existing fragment.
        frag_ids = row_ids >> np.uint64(32)
        offsets = row_ids & np.uint64(0xFFFFFFFF)
        for fid in np.unique(frag_ids):
            frag = ds.manifest.fragment(int(fid))
            if frag is None:
                continue
            sel = np.flatnonzero(frag_ids == fid)
            live = offsets[sel] < np.uint64(frag.physical_rows)
            deleted = ctx.deleted_offsets(frag)
            if deleted.size:  # deleted rows are not returned (pylance's default, ignore_deletions=False)
                live &= ~np.isin(offsets[sel], deleted.astype(np.uint64))
            out[sel[live]] = row_ids[sel[live]]
        return out
    order = np.argsort(row_ids, kind="stable")
    sorted_ids = row_ids[order]
    for frag in ds.manifest.fragments:
        ids = ctx.row_ids(frag)
        if ids is None:
            continue
        positions = np.flatnonzero(np.isin(ids, row_ids))
        deleted = ctx.deleted_offsets(frag)
        if deleted.size:  # an updated row's old copy keeps its id: only the live copy counts
            positions = positions[~np.isin(positions, deleted)]
        if not positions.size:
            continue
        found = ids[positions].astype(np.uint64)
        # Every request of an id (ids may be asked for more than once) gets its address.
        lo = np.searchsorted(sorted_ids, found, side="left")
        hi = np.searchsorted(sorted_ids, found, side="right")
        addresses = (np.uint64(frag.id) << np.uint64(32)) | positions.astype(np.uint64)
        counts = hi - lo
        slots = order[np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts,
                                                                                     counts))]
        out[slots] = np.repeat(addresses, counts)
    return out


def take_row_ids(ds: LanceDataset, row_ids: Sequence[int] | pa.Array | npt.NDArray[Any],
                 columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
    """Rows by row id (stable ids, else row addresses) in the given order; deleted/unknown ids are skipped."""

    ids = np.asarray(row_ids.to_numpy(zero_copy_only=False) if isinstance(row_ids, (pa.Array, pa.ChunkedArray))
                     else row_ids, dtype=np.uint64)
    projection = plan(ds.schema, columns)
    target = pa.schema([ds.schema.field(c) for c in projection.read_columns])
    addresses = address_of_row_ids(ds, ids)
    keep = addresses != np.uint64(2**64 - 1)
    addresses = addresses[keep]
    if addresses.size == 0:
        return _derive(target.empty_table(), projection)
    frag_ids = (addresses >> np.uint64(32)).astype(np.int64)
    pieces: list[pa.Table] = []
    order: list[npt.NDArray[np.int64]] = []
    for fid in np.unique(frag_ids):
        sel = np.flatnonzero(frag_ids == fid)
        frag = ds.manifest.fragment(int(fid))
        assert frag is not None
        offs = (addresses[sel] & np.uint64(0xFFFFFFFF)).astype(np.uint64)
        uniq, inverse = np.unique(offs, return_inverse=True)
        batch = FragmentScan(ds._ctx, frag, projection.read_columns).take(uniq)
        pieces.append(pa.Table.from_batches([batch]).take(pa.array(inverse)))
        order.append(sel)
    table = pa.concat_tables(pieces).take(pa.array(np.argsort(np.concatenate(order), kind="stable")))
    return _derive(table, projection)


def version_asof(summaries: list[dict[str, Any]], asof: dt.datetime | str, where: str) -> int:
    """The newest version committed before ``asof``, by pylance's rule.

    pylance compares ``asof`` with the timestamps its ``versions()`` shows (naive local time,
    whole microseconds, float-rounded) and keeps the versions strictly before it (``dataset``
    in ``python/python/lance/__init__.py``); so does this, or the two would open different
    versions for the same ``asof`` (one taken from ``versions()`` picks the version before it).
    ``summaries`` are :func:`lance_format.table.versions.version_summaries` entries. A
    timezone-aware ``asof`` is converted to local time first (pylance cannot compare it).
    """
    when: Any = asof
    if isinstance(asof, str):
        try:
            when = dt.datetime.fromisoformat(asof)
        except ValueError:
            raise InvalidInputError(f"{where}: asof {asof!r:.80} is not an ISO 8601 timestamp") from None
    if not isinstance(when, dt.datetime):
        raise InvalidInputError(f"{where}: asof must be a datetime or an ISO 8601 string, got "
                                f"{type(asof).__name__} {asof!r:.80}")
    if when.tzinfo is not None:
        when = when.astimezone().replace(tzinfo=None)
    found = [int(v["version"]) for v in summaries if local_time(int(v["timestamp_ns"])) < when]
    if not found:
        raise VersionNotFoundError(f"{where}: no version was committed before {asof}")
    return max(found)
