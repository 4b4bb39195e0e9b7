"""pylance's ``LanceFragment.merge_columns``: new columns for one fragment, written but not committed.

The values come from ``{name: SQL expression}`` or a function / ``batch_udf`` over the fragment's
physical rows (deleted rows included, so the new file lines up with the old ones), as in
``add_columns``. The caller commits every fragment's result with
``LanceOperation.Merge(fragments, schema)``; new field ids start after every id the dataset used,
so the fragments of one dataset version agree on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.evolution.columns import _check_new_names, _physical_batches, next_field_id
from lance_format.evolution.sqlexpr import compile_expressions, evaluate, value_expression
from lance_format.evolution.udf import BatchUDF
from lance_format.scanner import referenced_columns
from lance_format.schema import LanceSchema
from lance_format.table.models import FragmentMetadata
from lance_format.table.writing import write_fragment_files

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset

__all__ = ["merge_fragment_columns"]

_BATCH = 1024


def _sql_function(ds: LanceDataset, exprs: Mapping[str, str]) -> tuple[Any, list[str]]:
    cols: list[str] = []
    for text in exprs.values():  # parsed first: a bad expression fails before anything is written
        expr = value_expression(str(text), ds.schema)[0]
        cols += [c for c in referenced_columns(expr, ds.schema.names) if c not in cols]
    compiled = compile_expressions({str(k): str(v) for k, v in exprs.items()},
                                   ds.schema.empty_table().select(cols).schema)

    def compute(batch: pa.RecordBatch) -> pa.RecordBatch:
        out = evaluate(pa.Table.from_batches([batch]), compiled)
        return pa.RecordBatch.from_arrays(list(out.values()), names=list(out))

    return compute, cols


def merge_fragment_columns(ds: LanceDataset, frag: FragmentMetadata, value_func: Any,
                           columns: Sequence[str] | None = None, batch_size: int | None = None
                           ) -> tuple[FragmentMetadata, LanceSchema]:
    """Write ``frag``'s new columns as one data file; return the fragment and the dataset's new schema.

    Raises:
        InvalidInputError: for transforms other than SQL expressions and functions, or a function
            returning the wrong number of rows.
        SchemaError: a new column name is taken.
    """
    if isinstance(value_func, Mapping):
        fn, cols = _sql_function(ds, value_func)
    elif callable(value_func):
        fn = value_func._call if isinstance(value_func, BatchUDF) else value_func
        cols = list(columns) if columns is not None else list(ds.schema.names)
    else:
        raise InvalidInputError("merge_columns(): value_func must be {name: SQL} or a function of a RecordBatch")

    def results() -> Iterator[pa.RecordBatch]:
        for batch in _physical_batches(ds, frag, cols, max(1, batch_size or _BATCH)):
            res = fn(batch)
            if isinstance(res, pa.Table):
                res = pa.RecordBatch.from_arrays(res.combine_chunks().columns, schema=res.schema)
            if not isinstance(res, pa.RecordBatch) or res.num_rows != batch.num_rows:
                raise InvalidInputError(f"merge_columns(): the function must return a RecordBatch of "
                                        f"{batch.num_rows} rows, got {type(res).__name__}")
            yield res

    stream = results()
    first = next(stream, None)
    if first is None:
        raise InvalidInputError(f"merge_columns(): fragment {frag.id} has no rows")
    _check_new_names(ds, first.schema.names)
    lance_new = LanceSchema.from_arrow(first.schema, start_id=next_field_id(ds))

    def chained() -> Iterator[pa.RecordBatch]:
        yield first
        yield from stream

    written = write_fragment_files(ds._store, lance_new.to_arrow(), chained(), lance_new, max_rows_per_file=2**62,
                                   data_storage_version=ds.data_storage_version)
    files = tuple(df for w in written for df in w.files)
    schema = LanceSchema(ds.lance_schema.fields + lance_new.fields, ds.lance_schema.metadata)
    return dataclasses.replace(frag, files=frag.files + files), schema
