"""Reading-API pieces of pylance's ``LanceDataset`` / ``LanceFragment`` built on the scanner.

``sample``, ``_take_rows`` (by row id: stable ids or row addresses), ``asof`` version
lookup, and the join-based column additions ``LanceFragment.merge`` /
``LanceDataset.merge`` (new columns from another table, written as one new data file
per fragment, committed as a ``Merge`` as pylance does).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError, SchemaError, VersionNotFoundError
from lance_format.schema import LanceSchema
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import data_file_key

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


def sample(ds: LanceDataset, num_rows: int, columns: Sequence[str] | Mapping[str, str] | None = None,
           randomize_order: bool = True) -> pa.Table:
    """``num_rows`` distinct random live rows (in random order unless ``randomize_order=False``).

    Raises:
        InvalidInputError: if ``num_rows`` exceeds the live row count or is negative.
    """
    total = ds.count_rows()
    if not 0 <= num_rows <= total:
        raise InvalidInputError(f"{ds.uri}: cannot sample {num_rows} rows from {total}")
    indices = random.sample(range(total), num_rows)
    if not randomize_order:
        indices.sort()
    return take_projected(ds, indices, columns)


def take_projected(ds: LanceDataset, indices: Sequence[int] | npt.NDArray[Any],
                   columns: Sequence[str] | Mapping[str, str] | None) -> pa.Table:
    """``take`` with pylance's column forms (names, ``"s.x"`` paths, ``{name: SQL}``)."""
    from lance_format.projection import plan
    from lance_format.scanner import take_rows

    projection = plan(ds.schema, columns)
    table = take_rows(ds._ctx, indices, projection.read_columns)
    return _derive(table, projection)


def _derive(table: pa.Table, projection: Any) -> pa.Table:
    if projection.outputs is None:
        return table
    import pyarrow.compute as pc

    from lance_format.projection import _evaluate

    cols: dict[str, pa.Array | pa.ChunkedArray] = {}
    for o in projection.outputs:
        if o.kind == "column":
            cols[o.name] = table.column(o.source)
        elif o.kind == "path":
            arr = table.column(o.source[0]).combine_chunks()
            for p in o.source[1:]:
                arr = pc.struct_field(arr, p)
            cols[o.name] = arr
        elif o.kind == "expr":
            cols[o.name] = _evaluate(table, o.source, o.name)
        else:
            raise NotSupportedError(f"take(): column {o.name!r} is not supported here; use a scan")
    return pa.table(cols)


def address_of_row_ids(ds: LanceDataset, row_ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Row addresses of live rows with ``row_ids`` (same order); missing/deleted ids map to ``2**64-1``."""
    missing = np.uint64(2**64 - 1)
    ctx = ds._ctx
    out = np.full(row_ids.size, missing, dtype=np.uint64)
    if not ds.has_stable_row_ids:
        for i, rid in enumerate(row_ids):
            frag = ds.manifest.fragment(int(rid >> np.uint64(32)))
            off = int(rid & np.uint64(0xFFFFFFFF))
            if frag is not None and off < frag.physical_rows:
                out[i] = rid
    else:
        want: dict[int, list[int]] = {}
        for i, r in enumerate(row_ids):
            want.setdefault(int(r), []).append(i)
        for frag in ds.manifest.fragments:
            ids = ctx.row_ids(frag)
            if ids is None:
                continue
            hits = np.flatnonzero(np.isin(ids, row_ids))
            deleted = ctx.deleted_offsets(frag)
            if deleted.size:  # an updated row's old copy keeps its id: only the live copy counts
                hits = hits[~np.isin(hits, deleted)]
            for pos in hits:
                out[want[int(ids[pos])]] = (np.uint64(frag.id) << np.uint64(32)) | np.uint64(pos)
    # Deleted rows are not returned (pylance's default, ignore_deletions=False).
    for i, addr in enumerate(out):
        if addr == missing:
            continue
        frag = ds.manifest.fragment(int(addr >> np.uint64(32)))
        assert frag is not None
        deleted = ctx.deleted_offsets(frag)
        if deleted.size and np.isin(int(addr & np.uint64(0xFFFFFFFF)), deleted):
            out[i] = missing
    return out


def take_row_ids(ds: LanceDataset, row_ids: Sequence[int] | pa.Array | npt.NDArray[Any],
                 columns: Sequence[str] | Mapping[str, str] | None = None) -> pa.Table:
    """Rows by row id (stable ids, else row addresses) in the given order; deleted/unknown ids are skipped."""
    from lance_format.projection import plan
    from lance_format.scanner import FragmentScan

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
    """The newest version committed at or before ``asof``.

    ``summaries`` are :func:`lance_format.table.versions.version_summaries` entries
    (exact ``timestamp_ns``). Naive datetimes are local time, as ``versions()`` returns them.
    """
    when = dt.datetime.fromisoformat(asof) if isinstance(asof, str) else asof
    if when.tzinfo is None:
        when = when.astimezone()
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    delta = when - epoch  # exact to the microsecond (a float timestamp is not)
    limit_ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    found = [int(v["version"]) for v in summaries if int(v["timestamp_ns"]) <= limit_ns]
    if not found:
        raise VersionNotFoundError(f"{where}: no version was committed at or before {asof}")
    return max(found)


# -- join-based column addition ---------------------------------------------------------------


def merge_fragment(ds: LanceDataset, frag: FragmentMetadata, data: Any, left_on: str, right_on: str | None = None,
                   *, start_field_id: int | None = None) -> tuple[FragmentMetadata, LanceSchema]:
    """Left-join ``data`` onto ``frag`` on ``left_on``/``right_on``; write the new columns as one file.

    Rows without a match get nulls. Nothing is committed: commit the returned fragments
    and schema with ``LanceOperation.Merge``.

    Returns:
        ``(fragment with the new data file, full new schema)``.

    Raises:
        SchemaError: join columns missing, or new columns clashing with existing ones.
    """
    from lance_format.evolution.columns import _physical_batches, next_field_id
    from lance_format.write import to_batch_stream, write_fragment_files

    right_on = right_on or left_on
    schema, batches = to_batch_stream(data)
    right = pa.Table.from_batches(list(batches), schema=schema)
    if left_on not in ds.schema.names or right_on not in right.column_names:
        raise SchemaError(f"{ds.uri}: merge join columns {left_on!r} / {right_on!r} are missing")
    new_cols = [c for c in right.column_names if c != right_on]
    clash = [c for c in new_cols if c in ds.schema.names]
    if clash or not new_cols:
        raise SchemaError(f"{ds.uri}: merge would add {new_cols}, clashing with {clash}" if clash
                          else f"{ds.uri}: merge data has no new columns")
    new_arrow = pa.schema([right.schema.field(c) for c in new_cols])
    lance_new = LanceSchema.from_arrow(new_arrow, start_id=next_field_id(ds) if start_field_id is None
                                       else start_field_id)
    key = "__lf_merge_pos"
    right = right.append_column(key, pa.array(np.arange(right.num_rows, dtype=np.int64)))
    right_keys = right.select([right_on, key])

    def joined() -> Any:
        for batch in _physical_batches(ds, frag, [left_on], 8192):
            left = pa.table({right_on: batch.column(0).cast(right.schema.field(right_on).type),
                             "__lf_left": np.arange(batch.num_rows)})
            j = left.join(right_keys, keys=right_on, join_type="left outer", use_threads=False)
            j = j.sort_by("__lf_left")
            if j.num_rows != batch.num_rows:
                raise InvalidInputError(f"{ds.uri}: merge data has duplicate values in {right_on!r}")
            pos = j.column(key)
            out = right.select(new_cols).take(pos)
            yield out.combine_chunks().to_batches()[0] if out.num_rows else pa.RecordBatch.from_pylist(
                [], schema=new_arrow)

    written = write_fragment_files(ds._store, lance_new.to_arrow(), joined(), lance_new, max_rows_per_file=2**62,
                                   data_storage_version=ds.data_storage_version)
    files = tuple(df for w in written for df in w.files)
    full = LanceSchema(ds.lance_schema.fields + lance_new.fields, ds.lance_schema.metadata)
    return dataclasses.replace(frag, files=frag.files + files), full


def merge_dataset(ds: LanceDataset, data: Any, left_on: str, right_on: str | None = None) -> None:
    """pylance's ``LanceDataset.merge``: add the columns of ``data`` joined on a key, one ``Merge`` commit."""
    from lance_format.evolution import rowops
    from lance_format.evolution.columns import _commit
    from lance_format.table.transaction import LanceOperation
    from lance_format.write import to_batch_stream

    schema, batches = to_batch_stream(data)
    table = pa.Table.from_batches(list(batches), schema=schema)
    frags: list[FragmentMetadata] = []
    keys: list[str] = []
    final: LanceSchema | None = None
    try:
        for frag in ds.manifest.fragments:
            new, final = merge_fragment(ds, frag, table, left_on, right_on)
            keys += [data_file_key(df.path) for df in new.files[len(frag.files):]]
            frags.append(new)
    except BaseException:
        rowops.discard(ds, keys)
        raise
    if final is None:
        raise InvalidInputError(f"{ds.uri}: merge into a dataset without fragments")
    _commit(ds, LanceOperation.Merge(frags, final, preserves_nullability=True), keys)
