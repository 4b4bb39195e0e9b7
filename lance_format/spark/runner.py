"""``SparkRunner``: the maintenance ``Runner`` whose tasks run as one Spark job.

Each item becomes one Spark partition (``sc.parallelize(items, len(items))``), so every
task — a compaction group, a batch of deletions — is one Spark task that Spark schedules,
retries and reports like any other. ``fn`` must be a picklable module-level function and
the items picklable values; results come back to the driver in item order. Nothing is
committed here: the caller commits once after ``map`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class SparkRunner:
    """Runs maintenance tasks on a Spark cluster (implements ``lance_format.maintenance.runner.Runner``).

    Args:
        spark: The ``SparkSession`` whose executors run the tasks.
        job_description: Shown for the job in the Spark UI.
    """

    def __init__(self, spark: Any, *, job_description: str = "lance maintenance") -> None:
        self.spark = spark
        self.job_description = job_description

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """Apply ``fn`` to every item, one Spark task per item; results in item order.

        Raises:
            Exception: the Spark job failed (a task raised after Spark's retries).
        """
        items = list(items)
        if not items:
            return []
        sc = self.spark.sparkContext
        sc.setJobDescription(self.job_description)
        try:
            result: list[R] = sc.parallelize(items, len(items)).map(fn).collect()
        finally:
            sc.setJobDescription(None)
        return result

    def __repr__(self) -> str:
        return f"SparkRunner(master={self.spark.sparkContext.master!r})"


__all__ = ["SparkRunner"]
