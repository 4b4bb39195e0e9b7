"""Lance on Spark: a PySpark data source, Spark-run maintenance and a streaming sink.

Install with the ``spark`` extra; this package is the only part of ``lance_format`` that
imports ``pyspark``.

* :func:`local_session` / :func:`register` — a loopback-only local session / register the
  ``lance`` format with any session (once per session).
* ``spark.read.format("lance").load(uri)`` — options ``version``, ``tag``, ``columns``,
  ``batch_size``, ``max_rows_per_partition`` and storage options (:mod:`.options`).
* ``df.write.format("lance").mode("append" | "overwrite").save(uri)`` — one commit per
  job; options ``mode=create``, ``data_storage_version``, ``max_rows_per_file``,
  ``enable_stable_row_ids``, ``transaction_properties`` (JSON), ``commit_message``.
* :func:`write_dataframe` — the same write, returning the dataset at the version it committed.
* ``df.writeStream.format("lance")`` — one commit per micro-batch, exactly once.
* :class:`SparkRunner` — the maintenance ``Runner`` that fans tasks out as a Spark job;
  :func:`compact_files`, :func:`optimize_indices`, :func:`cleanup_old_versions` — the
  maintenance operations with their execute step on Spark executors.
"""

from __future__ import annotations

from lance_format.spark.columns import add_columns
from lance_format.spark.dataframe import count_rows, write_dataframe
from lance_format.spark.maintenance import cleanup_old_versions, compact_files, optimize_indices
from lance_format.spark.rowlevel import delete, merge_insert, update
from lance_format.spark.runner import SparkRunner
from lance_format.spark.session import local_session, register
from lance_format.spark.source import LanceDataSource
from lance_format.spark.tables import create_table, save_as_table

__all__ = [
    "LanceDataSource",
    "SparkRunner",
    "add_columns",
    "cleanup_old_versions",
    "compact_files",
    "count_rows",
    "create_table",
    "delete",
    "local_session",
    "merge_insert",
    "optimize_indices",
    "register",
    "save_as_table",
    "update",
    "write_dataframe",
]
