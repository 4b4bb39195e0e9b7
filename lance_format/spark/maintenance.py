"""Maintenance as Spark jobs: the local operations with their execute step on executors.

Each function opens the dataset on the driver, plans there, runs the execute step through
a :class:`~lance_format.spark.runner.SparkRunner` (one Spark task per compaction task, per
index-build read task, per batch of file deletions) and commits on the driver — the same
code as the local calls (:mod:`lance_format.optimize`, :mod:`lance_format.cleanup`,
:mod:`lance_format.index.optimize`), so the metrics returned are the same types.

Executors need ``lance_format`` (and ``boto3`` for ``s3://``) installed and the dataset's
storage reachable with the ``storage_options`` given here; they receive them with each task.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lance_format.cleanup import CleanupStats
from lance_format.cleanup import cleanup_old_versions as _cleanup
from lance_format.dataset import LanceDataset
from lance_format.optimize import CompactionMetrics
from lance_format.optimize import compact_files as _compact
from lance_format.spark.runner import SparkRunner


def _open(uri: str | LanceDataset, storage_options: Mapping[str, str] | None) -> LanceDataset:
    if isinstance(uri, LanceDataset):
        return uri.checkout_latest()
    return LanceDataset(uri, storage_options=storage_options)


def compact_files(spark: Any, uri: str | LanceDataset, *, storage_options: Mapping[str, str] | None = None,
                  **options: Any) -> CompactionMetrics:
    """Compact the latest version of ``uri`` with one Spark task per compaction task.

    Args:
        spark: The SparkSession whose executors rewrite the fragments.
        uri: Dataset URI (or an open dataset; its latest version is compacted).
        storage_options: Backend options (credentials, endpoint) for driver and executors.
        **options: pylance's ``compact_files`` keywords (``target_rows_per_fragment``,
            ``materialize_deletions``, ``max_rows_per_group``, …; see ``CompactionOptions``).

    Returns:
        The same ``CompactionMetrics`` as ``ds.optimize.compact_files``; all zero (and no new
        version) when there is nothing to compact.
    """
    return _compact(_open(uri, storage_options), runner=SparkRunner(spark, job_description="lance compaction"),
                    **options)


def optimize_indices(spark: Any, uri: str | LanceDataset, *, index_names: list[str] | None = None,
                     storage_options: Mapping[str, str] | None = None) -> LanceDataset:
    """Bring the indices up to date, their build tasks running on Spark.

    Returns:
        The dataset at its new version (unchanged when nothing needed doing).
    """
    ds = _open(uri, storage_options)
    ds.optimize.optimize_indices(index_names=index_names,
                                 runner=SparkRunner(spark, job_description="lance optimize_indices"))
    return ds


def cleanup_old_versions(spark: Any, uri: str | LanceDataset, older_than: dt.timedelta | None = None,
                         retain_versions: int | None = None, *, delete_unverified: bool = False,
                         error_if_tagged_old_versions: bool = True, dry_run: bool = False,
                         batch_size: int = 1000,
                         storage_options: Mapping[str, str] | None = None) -> CleanupStats:
    """Remove old versions: planned on the driver, file deletions fanned out over executors.

    Arguments as ``ds.cleanup_old_versions``; ``batch_size`` keys are deleted per Spark task.

    Returns:
        The same ``CleanupStats`` as the local call.
    """
    return _cleanup(_open(uri, storage_options), older_than, retain_versions, delete_unverified=delete_unverified,
                    error_if_tagged_old_versions=error_if_tagged_old_versions, dry_run=dry_run,
                    runner=SparkRunner(spark, job_description="lance cleanup"), batch_size=batch_size)


__all__ = ["cleanup_old_versions", "compact_files", "optimize_indices"]
