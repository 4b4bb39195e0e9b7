"""``add_columns`` from Spark expressions or UDFs: executors write the new data files, one commit.

``add_columns(spark, uri, {"double_id": F.col("id") * 2, "label": my_udf("name")})``
adds columns as pylance's ``ds.add_columns`` does — one ``Merge`` transaction whose
fragments each gain one data file holding only the new fields — with the values computed
by Spark:

1. The driver pins the latest version and reads it through the ``lance`` source with
   ``_rowaddr``, one input partition per fragment, and selects the expressions (any Spark
   ``Column``, Python or pandas UDF; a string is a Spark SQL expression).
2. Each task receives one fragment's live rows in order and writes a data file covering
   every physical row of that fragment (deleted rows get nulls: no version shows them).
3. The driver commits the ``Merge`` with the new fields (nullable, field ids after every id
   the dataset ever used); a retryable conflict re-runs the job on the newest version.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.dataset import LanceDataset
from lance_format.errors import InvalidInputError, RetryableCommitConflictError, SchemaError
from lance_format.evolution.columns import next_field_id
from lance_format.schema import LanceSchema
from lance_format.spark.types import convert_column
from lance_format.table.commit import commit_transaction
from lance_format.table.discard import discard_keys
from lance_format.table.models import DataFile
from lance_format.table.naming import data_file_key
from lance_format.table.rowids import encode_uniform_versions
from lance_format.table.transaction import LanceOperation, Transaction
from lance_format.table.writing import write_fragment_files

_ADDR = "_rowaddr"


@dataclasses.dataclass(frozen=True)
class ColumnsPlan:
    """What every task needs: the pinned version and the new fields."""

    uri: str
    version: int
    storage: tuple[tuple[str, str], ...]
    fields: LanceSchema


def run_task(plan: ColumnsPlan, batches: Iterator[pa.RecordBatch]) -> tuple[int, tuple[DataFile, ...]] | None:
    """Write one fragment's new data file from its live rows' values (on an executor).

    Returns:
        ``(fragment id, new data files)``, or ``None`` for a partition without rows.
    """
    received = [b for b in batches if b.num_rows]
    if not received:
        return None
    table = pa.Table.from_batches(received)
    ds = LanceDataset(plan.uri, plan.version, storage_options=dict(plan.storage) or None)
    addr = table.column(_ADDR).to_numpy().astype(np.uint64)
    fids = np.unique(addr >> np.uint64(32))
    if fids.size != 1:
        raise InvalidInputError(f"{plan.uri}: add_columns task got rows of fragments {fids.tolist()}; the read "
                                "must keep one fragment per partition")
    frag = ds.manifest.fragment(int(fids[0]))
    assert frag is not None, f"fragment {int(fids[0])} of version {plan.version}"
    where = np.full(frag.physical_rows, -1, dtype=np.int64)
    where[(addr & np.uint64(0xFFFFFFFF)).astype(np.int64)] = np.arange(table.num_rows)
    target = plan.fields.to_arrow()
    values = table.drop_columns([_ADDR]).take(pa.array(where, mask=where < 0))
    arrays = [convert_column(values.column(f.name).combine_chunks(), f.type, f.name) for f in target]
    batches_out = pa.Table.from_arrays(arrays, schema=target).to_batches(max_chunksize=65536)
    written = write_fragment_files(ds._store, target, iter(batches_out), plan.fields, max_rows_per_file=2**62,
                                   data_storage_version=ds.data_storage_version)
    return frag.id, tuple(df for w in written for df in w.files)


def _task_fn(plan: ColumnsPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"result": pa.array([pickle.dumps(run_task(plan, batches))], pa.binary())})

    return run


def _expressions(columns: Mapping[str, Any]) -> list[Any]:
    from pyspark.sql import functions as F

    return [(F.expr(value) if isinstance(value, str) else value).alias(name) for name, value in columns.items()]


def _attempt(spark: Any, ds: LanceDataset, columns: Mapping[str, Any], read_columns: Sequence[str] | None,
             storage: Mapping[str, str] | None, properties: Mapping[str, str]) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    reader = (spark.read.format("lance").option("version", str(ds.version))
              .option("max_rows_per_partition", str(2**31 - 1)))  # one partition per fragment
    reader = reader.option("columns", ",".join([*(read_columns or ds.schema.names), _ADDR]))
    for key, value in (storage or {}).items():
        reader = reader.option(f"storage.{key}", value)
    out = reader.load(ds.uri).select(_ADDR, *_expressions(columns))
    new_arrow = to_arrow_schema(out.drop(_ADDR).schema, timezone="UTC")
    fields = LanceSchema.from_arrow(pa.schema([f.with_nullable(True) for f in new_arrow]),
                                    start_id=next_field_id(ds))
    plan = ColumnsPlan(ds.uri, ds.version, tuple(sorted((storage or {}).items())), fields)
    results = [pickle.loads(r["result"]) for r in out.mapInArrow(_task_fn(plan), "result binary").collect()]
    files = {fid: dfs for fid, dfs in (r for r in results if r is not None)}
    keys = [data_file_key(df.path) for dfs in files.values() for df in dfs]
    frags = []
    for frag in ds.manifest.fragments:
        if frag.id not in files:
            discard_keys(ds._store, keys)
            raise InvalidInputError(f"{ds.uri}: add_columns computed no values for fragment {frag.id}")
        new = dataclasses.replace(frag, files=frag.files + files[frag.id])
        if ds.has_stable_row_ids:  # every row of the fragment has new values, as pylance records it
            new = dataclasses.replace(new, last_updated_at_version_meta=encode_uniform_versions(
                frag.physical_rows, ds.version + 1))
        frags.append(new)
    schema = LanceSchema(ds.lance_schema.fields + fields.fields, ds.lance_schema.metadata)
    txn = Transaction(ds.version, LanceOperation.Merge(frags, schema, preserves_nullability=True),
                      transaction_properties=dict(properties))
    try:
        commit_transaction(ds._store, txn, base=ds.manifest)
    except BaseException:
        discard_keys(ds._store, keys)
        raise


def add_columns(spark: Any, uri: str, columns: Mapping[str, Any], *, read_columns: Sequence[str] | None = None,
                storage_options: Mapping[str, str] | None = None,
                transaction_properties: Mapping[str, str] | None = None,
                conflict_retries: int = 10) -> LanceDataset:
    """Add columns computed by Spark to the dataset at ``uri`` as one ``Merge`` commit.

    Args:
        spark: The SparkSession whose executors compute and write the columns.
        uri: Dataset location.
        columns: New column name → a Spark ``Column`` (expression, UDF) or a Spark SQL string,
            over the dataset's columns.
        read_columns: The columns the expressions use (all by default; fewer read less).
        storage_options: Backend options for driver and executors.
        transaction_properties: Stored with the commit.
        conflict_retries: Re-runs after a retryable conflict (a concurrent append, delete, rewrite).

    Returns:
        The dataset at its new version.

    Raises:
        SchemaError: a new name is taken.
        InvalidInputError: no columns.
    """
    ds = LanceDataset(uri, storage_options=storage_options)
    if not columns:
        raise InvalidInputError(f"{uri}: add_columns needs at least one column")
    clash = [n for n in columns if n in ds.schema.names]
    if clash:
        raise SchemaError(f"{uri}: cannot add column(s) {clash}: the name is taken")
    for n in range(conflict_retries + 1):
        current = ds if n == 0 else ds.checkout_latest()
        try:
            _attempt(spark, current, columns, read_columns, storage_options, transaction_properties or {})
            return current.checkout_latest()
        except RetryableCommitConflictError:
            if n == conflict_retries:
                raise
    raise AssertionError("unreachable")


__all__ = ["ColumnsPlan", "add_columns", "run_task"]
