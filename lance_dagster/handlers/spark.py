"""PySpark handler: ``pyspark.sql.DataFrame`` outputs written by the executors, inputs read by Spark.

Outputs never pass through the driver: every Spark task writes its rows as uncommitted Lance
fragments with the ``lance`` data source's task writer (:func:`lance_format.spark.writer.write_task`)
and returns their metadata; the IO manager then commits them once, with the Dagster lineage
properties (:mod:`lance_dagster.distributed`). Inputs are ``spark.read.format("lance")`` DataFrames
pinned to the version read, with the column selection and the partition filter given to the scan.
Needs the ``spark`` extra and an active ``SparkSession``.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError, UnsupportedFrameTypeError
from lance_format.fragment import FragmentMetadata

from ..merge_keys import MergeSpec, key_values, matching
from .base import FrameHandler, import_extra, is_class_named

if TYPE_CHECKING:
    from lance_format.spark.writer import WritePlan

    from ..reader import ArrowSource

def _session() -> Any:
    spark = import_extra("pyspark.sql", "spark").SparkSession.getActiveSession()
    if spark is None:
        raise InvalidInputError("loading an input as a Spark DataFrame needs an active SparkSession (create one, "
                                "e.g. with a PySparkResource, before the step runs)")
    from lance_format.spark import register

    register(spark)
    return spark


def _count_outside(expr: pc.Expression) -> Any:
    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lance_format.scanner import apply_filter

        outside = 0
        for batch in batches:
            outside += batch.num_rows - apply_filter(batch, expr).num_rows
        yield pa.RecordBatch.from_pydict({"outside": [outside]})

    return count


_WRITTEN = pa.schema([("fragments", pa.binary()), ("keys", pa.binary())])


def _with_nulls(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` plus all-null columns for the table columns it lacks (``schema_mode="merge"``)."""
    missing = [f for f in target if batch.schema.get_field_index(f.name) < 0]
    if not missing:
        return batch
    arrays = list(batch.columns) + [pa.nulls(batch.num_rows, f.type) for f in missing]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names + [f.name for f in missing])


def _write(plan: WritePlan, merge: MergeSpec | None = None) -> Any:
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lance_format.spark.writer import write_task

        seen: list[pa.Array] = []

        def rows() -> Iterator[pa.RecordBatch]:
            for batch in batches:
                batch = _with_nulls(batch, plan.schema) if plan.mode == "append" else batch
                if merge is None:
                    yield batch
                    continue
                seen.append(key_values(batch, merge.keys))  # every source key, for the driver's deletions
                if merge.target is not None:  # update-only or insert-only: keep matched or unmatched rows
                    hit = matching(batch, merge.keys, merge.target)
                    batch = batch.filter(hit if merge.keep_matched else pc.invert(hit))
                yield batch

        message = write_task(plan, rows())
        keys = b""
        if merge is not None:
            sink = pa.BufferOutputStream()
            table = pa.table({"key": pa.concat_arrays(seen) if seen else pa.array([], pa.string())})
            with pa.ipc.new_stream(sink, table.schema) as out:
                out.write_table(table)
            keys = sink.getvalue().to_pybytes()
        yield pa.RecordBatch.from_pydict({"fragments": [pickle.dumps(list(message.fragments))], "keys": [keys]},
                                         schema=_WRITTEN)

    return write



class SparkHandler(FrameHandler):
    """Writes Spark DataFrames from the executors and loads inputs as Spark DataFrames."""

    name = "pyspark"
    output_types = input_types = ("pyspark.sql.DataFrame",)
    #: Outputs are written by :meth:`write_fragments`, not converted to Arrow on the driver.
    distributed = True

    def handles_type(self, tp: Any) -> bool:
        """``pyspark.sql.DataFrame`` (classic or Connect), matched without importing pyspark."""
        return is_class_named(tp, "pyspark", "DataFrame")

    def handles_value(self, obj: Any) -> bool:
        """Instances of ``pyspark.sql.DataFrame``."""
        return self.handles_type(type(obj))

    def to_arrow(self, obj: Any) -> pa.Table:
        """Refused: a DataFrame is written by its executors (:meth:`write_fragments`)."""
        raise UnsupportedFrameTypeError("Spark DataFrames are written by the executors; the IO manager calls "
                                        "SparkHandler.write_fragments")

    def arrow_schema(self, df: Any) -> pa.Schema:
        """The Arrow schema the executors' batches have (timestamps in UTC)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        schema: pa.Schema = to_arrow_schema(df.schema, timezone="UTC")
        return schema

    def rows_outside(self, df: Any, expr: pc.Expression) -> int:
        """Rows of ``df`` that do not satisfy ``expr`` (one Spark job; nothing is written)."""
        counts = df.mapInArrow(_count_outside(expr), "outside long").collect()
        return int(sum(row["outside"] for row in counts))

    def write_fragments(self, df: Any, plan: WritePlan) -> list[FragmentMetadata]:
        """Write ``df`` as uncommitted fragments, one Spark task per DataFrame partition."""
        return self.write_merge(df, plan, None)[0]

    def write_merge(self, df: Any, plan: WritePlan, merge: MergeSpec | None) -> tuple[list[FragmentMetadata],
                                                                                        pa.Array | None]:
        """Write ``df`` as uncommitted fragments; for an upsert (``merge``) the tasks keep only the
        rows to write and also return every source row's key (one array, ``None`` without ``merge``)."""
        rows = df.mapInArrow(_write(plan, merge), "fragments binary, keys binary").collect()
        out: list[FragmentMetadata] = []
        keys: list[pa.Array] = []
        for row in rows:
            out.extend(pickle.loads(row["fragments"]))
            if merge is not None:
                # a task with no rows sends an empty column of another type: left out
                keys.extend(c for c in pa.ipc.open_stream(row["keys"]).read_all().column("key").chunks if len(c))
        if merge is None:
            return out, None
        return out, pa.concat_arrays(keys) if keys else pa.array([], pa.string())

    def from_arrow(self, source: ArrowSource, tp: Any) -> Any:
        """A Spark DataFrame of the pinned version: selected columns, partition filter in the scan.

        A dataset not written yet (the first partition of a self-dependent asset) is an empty
        DataFrame of the declared schema.
        """
        spark = _session()
        if not source.exists:
            from pyspark.sql.pandas.types import from_arrow_schema

            return spark.createDataFrame([], schema=from_arrow_schema(source.schema))
        reader = spark.read.format("lance").option("version", str(source.version))
        if source.storage_options:
            reader = reader.option("storage_options", json.dumps(source.storage_options))
        predicate = source.row_filter_sql
        columns = list(source.spec.columns) if source.spec.columns is not None else None
        if columns is not None:
            # The scan's filter may only name scanned columns: scan the filter's too, drop them after.
            scanned = columns + [c for c in source.filter_columns if c not in columns]
            reader = reader.option("columns", ",".join(scanned))
        if predicate is not None:
            reader = reader.option("filter", predicate)
        frame = reader.load(source.uri)
        return frame.select(*columns) if columns is not None else frame
