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


def _write(plan: WritePlan) -> Any:
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from lance_format.spark.writer import write_task

        message = write_task(plan, batches)
        yield pa.RecordBatch.from_pydict({"fragments": [pickle.dumps(list(message.fragments))]},
                                         schema=pa.schema([("fragments", pa.binary())]))

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
        rows = df.mapInArrow(_write(plan), "fragments binary").collect()
        out: list[FragmentMetadata] = []
        for row in rows:
            out.extend(pickle.loads(row["fragments"]))
        return out

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
