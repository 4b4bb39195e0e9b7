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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lance_format.spark.columns import add_columns
    from lance_format.spark.dataframe import count_rows, write_dataframe
    from lance_format.spark.maintenance import cleanup_old_versions, compact_files, optimize_indices
    from lance_format.spark.rowlevel import delete, merge_insert, update
    from lance_format.spark.runner import SparkRunner
    from lance_format.spark.session import local_session, register
    from lance_format.spark.source import LanceDataSource
    from lance_format.spark.tables import create_table, save_as_table

#: Public name -> its module, loaded on first use (PEP 562): a Spark Python worker unpickling the
#: data source or its reader imports this package, and needs none of the row-level writes,
#: maintenance or catalog code (tests/test_lazy_import.py).
_HOMES = {
    "add_columns": "lance_format.spark.columns",
    "count_rows": "lance_format.spark.dataframe",
    "write_dataframe": "lance_format.spark.dataframe",
    "cleanup_old_versions": "lance_format.spark.maintenance",
    "compact_files": "lance_format.spark.maintenance",
    "optimize_indices": "lance_format.spark.maintenance",
    "delete": "lance_format.spark.rowlevel",
    "merge_insert": "lance_format.spark.rowlevel",
    "update": "lance_format.spark.rowlevel",
    "SparkRunner": "lance_format.spark.runner",
    "local_session": "lance_format.spark.session",
    "register": "lance_format.spark.session",
    "LanceDataSource": "lance_format.spark.source",
    "create_table": "lance_format.spark.tables",
    "save_as_table": "lance_format.spark.tables",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lance_format.spark' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


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
