"""Join-based column additions: ``LanceFragment.merge`` and ``LanceDataset.merge``.

New columns from another table, joined on a key, are written as one new data file per fragment
and committed as a ``Merge`` (as pylance does). Kept apart from :mod:`.reading` so reads never
load the writer or the commit protocol.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError, SchemaError
from lance_format.evolution.columns import _commit, _physical_batches, next_field_id
from lance_format.schema import LanceSchema
from lance_format.table.discard import discard_keys
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import data_file_key
from lance_format.table.transaction import LanceOperation
from lance_format.table.writing import to_batch_stream, write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset


@dataclasses.dataclass(frozen=True)
class _MergeRight:
    """The right-hand side of a merge, prepared once for every fragment it is joined onto."""

    right: pa.Table  # the data plus a row-position column
    right_on: str
    new_cols: list[str]
    new_arrow: pa.Schema
    lance_new: LanceSchema


_MERGE_POS = "__lf_merge_pos"


def _merge_right(ds: LanceDataset, data: Any, left_on: str, right_on: str | None,
                 start_field_id: int | None, schema: pa.Schema | None = None) -> _MergeRight:

    right_on = right_on or left_on
    # ``schema``: pylance's merge(schema=), the schema of an iterator of batches (or a cast target)
    schema, batches = to_batch_stream(data, schema)
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
    right = right.append_column(_MERGE_POS, pa.array(np.arange(right.num_rows, dtype=np.int64)))
    return _MergeRight(right, right_on, new_cols, new_arrow, lance_new)


def _merge_one(ds: LanceDataset, frag: FragmentMetadata, left_on: str, m: _MergeRight
               ) -> tuple[FragmentMetadata, LanceSchema]:

    right_keys = m.right.select([m.right_on, _MERGE_POS])
    values = m.right.select(m.new_cols)
    key_type = m.right.schema.field(m.right_on).type

    def joined() -> Any:
        for batch in _physical_batches(ds, frag, [left_on], 8192):
            left = pa.table({m.right_on: batch.column(0).cast(key_type), "__lf_left": np.arange(batch.num_rows)})
            j = left.join(right_keys, keys=m.right_on, join_type="left outer", use_threads=False)
            j = j.sort_by("__lf_left")
            if j.num_rows != batch.num_rows:
                raise InvalidInputError(f"{ds.uri}: merge data has duplicate values in {m.right_on!r}")
            out = values.take(j.column(_MERGE_POS))
            yield out.combine_chunks().to_batches()[0] if out.num_rows else pa.RecordBatch.from_pylist(
                [], schema=m.new_arrow)

    written = write_fragment_files(ds._store, m.lance_new.to_arrow(), joined(), m.lance_new,
                                   max_rows_per_file=2**62, data_storage_version=ds.data_storage_version)
    files = tuple(df for w in written for df in w.files)
    full = LanceSchema(ds.lance_schema.fields + m.lance_new.fields, ds.lance_schema.metadata)
    return dataclasses.replace(frag, files=frag.files + files), full


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
    return _merge_one(ds, frag, left_on, _merge_right(ds, data, left_on, right_on, start_field_id))


def merge_dataset(ds: LanceDataset, data: Any, left_on: str, right_on: str | None = None,
                  schema: pa.Schema | None = None) -> None:
    """pylance's ``LanceDataset.merge``: add the columns of ``data`` joined on a key, one ``Merge`` commit."""

    prepared = _merge_right(ds, data, left_on, right_on, None, schema)  # once, not per fragment
    frags: list[FragmentMetadata] = []
    keys: list[str] = []
    final: LanceSchema | None = None
    try:
        for frag in ds.manifest.fragments:
            new, final = _merge_one(ds, frag, left_on, prepared)
            keys += [data_file_key(df.path) for df in new.files[len(frag.files):]]
            frags.append(new)
    except BaseException:
        discard_keys(ds._store, keys)
        raise
    if final is None:
        raise InvalidInputError(f"{ds.uri}: merge into a dataset without fragments")
    _commit(ds, LanceOperation.Merge(frags, final, preserves_nullability=True), keys)
