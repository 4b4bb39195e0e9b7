"""Lance on Spark: a PySpark data source, SQL table functions, row-level writes and maintenance.

Install with the ``spark`` extra; this package is the only part of ``lance_format`` that
imports ``pyspark``.

* :func:`local_session` / :func:`register` — a loopback-only local session / register the
  ``lance`` format and the SQL table functions with any session (once per session).
* ``spark.read.format("lance").load(uri)`` — options in :mod:`.options` (``version``, ``tag``,
  ``timestamp``, ``columns``, ``filter``, ``limit``, ``fragment_ids``, metadata columns,
  storage options); :func:`count_rows` counts without reading rows.
* ``spark.readStream.format("lance")`` — versions as offsets (:mod:`.stream_reader`).
* ``df.write.format("lance").save(uri)`` / :func:`write_dataframe` — one commit per job
  (:mod:`.writer`); ``df.writeStream.format("lance")`` — one commit per micro-batch.
* :func:`merge_insert`, :func:`update`, :func:`delete`, :func:`add_columns` — row-level
  writes whose work runs on the executors (:mod:`.rowlevel`, :mod:`.columns`).
* :func:`create_table`, :func:`save_as_table` — catalog tables (:mod:`.tables`);
  ``lance_optimize`` / ``lance_vacuum`` / ``lance_create_index`` / ``lance_versions`` in SQL
  (:mod:`.sql_functions`).
* :class:`SparkRunner` — the maintenance ``Runner`` that fans tasks out as a Spark job
  (classic or Spark Connect); :func:`compact_files`, :func:`optimize_indices`,
  :func:`cleanup_old_versions` — the maintenance operations with their execute step on
  Spark executors.
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
