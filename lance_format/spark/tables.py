"""Catalog tables over Lance datasets: ``CREATE TABLE ... USING lance LOCATION`` and ``save_as_table``.

PySpark (4.3) gives a Python data source no options when it reads a catalog table — not
even the location — so ``LanceDataSource.schema`` stores the location in the schema the
catalog keeps (field metadata ``lance.uri``) when the table is created from an existing
dataset, and reads find it there:

* ``CREATE TABLE t USING lance LOCATION '<uri>'`` (or :func:`create_table`) registers an
  existing dataset; ``spark.table("t")``, ``SELECT ... FROM t`` and
  ``spark.readStream.table("t")`` read its latest version.
* Time travel on a table: ``SELECT * FROM t WITH ('version' = '3')`` (also ``tag``,
  ``timestamp``). Spark refuses ``VERSION AS OF`` / ``TIMESTAMP AS OF`` for tables of
  Python data sources before the source sees them (``UNSUPPORTED_FEATURE.TIME_TRAVEL``).
* ``df.write.saveAsTable(name, path=...)`` writes the dataset but registers a table without
  the location (its schema is the DataFrame's): use :func:`save_as_table`, which writes with
  the ``lance`` source and then registers the table as above.
* Writes through the catalog (``INSERT INTO t``, ``df.write.insertInto``) reach the source
  without the target's location and are refused; write to the location instead.
* Path-based SQL: Spark refuses ``SELECT * FROM lance.`/path``` for Python data sources;
  ``CREATE TEMPORARY VIEW v USING lance OPTIONS (path '<uri>', version '2')`` works.
* ``DROP TABLE t`` removes the catalog entry only; the dataset stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from lance_format.dataset import LanceDataset
from lance_format.spark.dataframe import write_dataframe
from lance_format.spark.session import register


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table(spark: Any, name: str, uri: str, *, replace: bool = False) -> None:
    """Register the existing dataset at ``uri`` as catalog table ``name``.

    Args:
        spark: The session whose catalog gets the table.
        name: Table name (``db.table`` or ``table``), as SQL spells it.
        uri: Dataset location.
        replace: Drop an existing table of that name first (its dataset stays); otherwise an
            existing table is kept as it is.
    """
    register(spark)
    if replace:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING lance LOCATION {_literal(uri)}")


def save_as_table(df: Any, name: str, uri: str, *,
                  mode: Literal["append", "overwrite", "create", "error", "errorifexists", "ignore"] = "append",
                  storage_options: Mapping[str, str] | None = None, **write_options: Any) -> LanceDataset:
    """Write ``df`` to the dataset at ``uri`` (one commit) and register it as table ``name``.

    What ``df.write.saveAsTable(name, path=uri)`` means, in a form whose table PySpark can
    read back. The table is re-registered after an overwrite (its schema may have changed).

    Args:
        df: A ``pyspark.sql.DataFrame``.
        name: Table name.
        uri: Dataset location.
        mode: As :func:`lance_format.spark.write_dataframe`.
        storage_options: Backend options (credentials, endpoint).
        **write_options: :func:`lance_format.spark.write_dataframe`'s keywords.

    Returns:
        The dataset at the version this write committed.
    """
    ds = write_dataframe(df, uri, mode=mode, storage_options=storage_options, **write_options)
    create_table(df.sparkSession, name, uri, replace=mode == "overwrite")
    return ds


__all__ = ["create_table", "save_as_table"]
