"""``LanceFragment.update_columns``: rewrite some columns of one fragment (REWRITE_COLUMNS).

What pylance 14.0.2 writes (read back from its files): the updated columns of every
physical row go into one new data file that keeps the columns' field ids; in the older
files of the fragment those ids become ``-2`` (tombstones; files left with only
tombstones are dropped). Rows without a match in the new data keep their values. The
caller commits ``LanceOperation.Update(updated_fragments=[...], fields_modified=ids,
update_mode="rewrite_columns")``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution.columns import TOMBSTONE, _physical_batches, _tombstoned
from lance_format.table.models import FragmentMetadata
from lance_format.table.read import ROW_ID
from lance_format.table.writing import to_batch_stream, write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

_POS = "__lf_right_pos"
_LEFT = "__lf_left_pos"


def update_fragment_columns(ds: LanceDataset, frag: FragmentMetadata, data: Any, left_on: str = ROW_ID,
                            right_on: str | None = None) -> tuple[FragmentMetadata, list[int]]:
    """Rewrite the columns of ``data`` (other than the key) in ``frag``; nothing is committed.

    Rows are matched on ``left_on`` (``"_rowid"``: the row id, i.e. the stable id or the
    row address) = ``right_on``; with several matches one of them is used.

    Returns:
        ``(new fragment metadata, ids of the modified fields)``.

    Raises:
        SchemaError: unknown or non-top-level columns, or a missing join column.
    """

    right_on = right_on or left_on
    schema, batches = to_batch_stream(data)
    right = pa.Table.from_batches(list(batches), schema=schema)
    if right_on not in right.column_names:
        raise SchemaError(f"{ds.uri}: update_columns data lacks the join column {right_on!r}")
    cols = [c for c in right.column_names if c != right_on]
    unknown = [c for c in cols if c not in ds.schema.names]
    if unknown or not cols:
        raise SchemaError(f"{ds.uri}: update_columns: {unknown or 'no'} columns to update in {ds.schema.names}")
    if left_on != ROW_ID and left_on not in ds.schema.names:
        raise SchemaError(f"{ds.uri}: update_columns: no column {left_on!r} to join on")
    target = ds.schema.empty_table().select(cols).schema
    try:
        right = right.select([right_on, *cols]).cast(pa.schema([right.schema.field(right_on), *target]))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"{ds.uri}: update_columns data cannot be cast to {target}: {exc}") from exc
    right = right.append_column(_POS, pa.array(np.arange(right.num_rows, dtype=np.int64)))
    keys = right.select([right_on, _POS])
    stable_ids = ds._ctx.row_ids(frag) if left_on == ROW_ID else None
    read_cols = cols + ([left_on] if left_on != ROW_ID and left_on not in cols else [])

    def rewritten() -> Iterator[pa.RecordBatch]:
        start = 0
        for batch in _physical_batches(ds, frag, read_cols, 65536):
            n = batch.num_rows
            offsets = np.arange(start, start + n, dtype=np.uint64)
            if left_on == ROW_ID:
                key = stable_ids[start:start + n] if stable_ids is not None else \
                    (np.uint64(frag.id) << np.uint64(32)) | offsets
                key_arr = pa.array(key, pa.uint64())
            else:
                key_arr = batch.column(left_on)
            start += n
            left = pa.table({right_on: key_arr.cast(keys.schema.field(right_on).type),
                             _LEFT: np.arange(n, dtype=np.int64)})
            joined = left.join(keys, keys=right_on, join_type="left outer", use_threads=False)
            # One match per left row (pylance takes any one of several).
            joined = joined.sort_by([(_LEFT, "ascending")])
            first = np.unique(joined.column(_LEFT).to_numpy(), return_index=True)[1]
            pos = joined.column(_POS).take(pa.array(first))
            hit = pc.is_valid(pos)
            arrays = [pc.if_else(hit, right.column(c).take(pos.fill_null(0)), batch.column(c))
                      for c in cols]
            yield pa.RecordBatch.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
                                              for a in arrays], schema=target)

    lance_cols = ds.lance_schema.project(cols)
    written = write_fragment_files(ds._store, lance_cols.to_arrow(), rewritten(), lance_cols,
                                   max_rows_per_file=2**62, data_storage_version=ds.data_storage_version)
    if len(written) != 1 or written[0].physical_rows != frag.physical_rows:
        raise InvalidInputError(f"{ds.uri}: update_columns wrote {sum(w.physical_rows for w in written)} rows "
                                f"for a fragment of {frag.physical_rows}")
    ids = {f.id for f in lance_cols.flat()}
    old = [_tombstoned(df, ids) for df in frag.files]
    kept = tuple(df for df in old if any(f != TOMBSTONE for f in df.fields))
    modified = sorted(f.id for f in lance_cols.fields)
    return dataclasses.replace(frag, files=kept + written[0].files), modified
