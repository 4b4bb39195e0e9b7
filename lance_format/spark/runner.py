"""``SparkRunner``: the maintenance ``Runner`` whose tasks run as one Spark job.

With a classic session each item becomes one Spark partition
(``sc.parallelize(items, len(items))``), so every task — a compaction group, a batch of
deletions — is one Spark task that Spark schedules, retries and reports like any other.
A Spark Connect session has no ``SparkContext``: the items (pickled) then travel as rows of
a DataFrame, hash-partitioned over ``len(items)`` partitions, and ``mapInArrow`` runs ``fn``
on the server's executors — the same code through DataFrame operations only.

``fn`` must be a picklable module-level function and the items picklable values; results
come back to the driver in item order. Nothing is committed here: the caller commits once
after ``map`` returns.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pyarrow as pa

T = TypeVar("T")
R = TypeVar("R")


def _context(spark: Any) -> Any:
    """The session's ``SparkContext``, or ``None`` for a Spark Connect session."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001  (Connect raises its own "not supported" error types)
        return None


def _apply(fn: Callable[[Any], Any]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index, payload in zip(batch.column("i").to_pylist(), batch.column("item").to_pylist(), strict=True):
                result = pickle.dumps(fn(pickle.loads(payload)))
                yield pa.record_batch({"i": pa.array([index], pa.int64()), "result": pa.array([result], pa.binary())})

    return run


class SparkRunner:
    """Runs maintenance tasks on a Spark cluster (implements ``lance_format.maintenance.runner.Runner``).

    Args:
        spark: The ``SparkSession`` (classic or Spark Connect) whose executors run the tasks.
        job_description: Shown for the job in the Spark UI (classic sessions).
    """

    def __init__(self, spark: Any, *, job_description: str = "lance maintenance") -> None:
        self.spark = spark
        self.job_description = job_description

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Apply ``fn`` to every item on the executors; results in item order.

        Raises:
            Exception: the Spark job failed (a task raised after Spark's retries).
        """
        items = list(items)
        if not items:
            return []
        sc = _context(self.spark)
        if sc is None:
            return self._map_connect(fn, items)
        sc.setJobDescription(self.job_description)
        try:
            result: list[R] = sc.parallelize(items, len(items)).map(fn).collect()
        finally:
            sc.setJobDescription(None)
        return result

    def _map_connect(self, fn: Callable[[T], R], items: list[T]) -> list[R]:
        table = pa.table({"i": pa.array(range(len(items)), pa.int64()),
                          "item": pa.array([pickle.dumps(item) for item in items], pa.binary())})
        df = self.spark.createDataFrame(table).repartition(len(items), "i")
        rows = df.mapInArrow(_apply(fn), "i long, result binary").collect()
        by_index = {int(row["i"]): row["result"] for row in rows}
        return [pickle.loads(by_index[i]) for i in range(len(items))]

    def __repr__(self) -> str:
        sc = _context(self.spark)
        return f"SparkRunner(master={sc.master!r})" if sc is not None else "SparkRunner(connect)"


__all__ = ["SparkRunner"]
