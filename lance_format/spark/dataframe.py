"""DataFrame helpers: a write that returns its version, and a count the data source cannot push.

``write_dataframe``: a DataFrame write that returns the Lance version it committed.

``df.write.format("lance")…save(uri)`` commits from a Spark-side Python worker, so the
caller does not learn which version it produced (another writer may commit right after).
This helper tags the commit with a unique write id in its transaction properties and finds
that version afterwards — what an orchestrator (e.g. the Dagster IO manager) records as
the data version of a materialization.

``count_rows``: PySpark's Python data sources get no aggregate pushdown, so
``spark.read.format("lance").load(uri).count()`` reads every row of every column; this
counts from the manifest as pylance's ``count_rows`` does (a filtered count reads only
the filter's columns, on the executors).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from lance_format.dataset import LanceDataset
from lance_format.errors import LanceError
from lance_format.scanner import referenced_columns
from lance_format.spark.session import register
from lance_format.sql import to_expression

#: Transaction property carrying the id of one ``write_dataframe`` call.
WRITE_ID_KEY = "lance.spark.write_id"


def write_dataframe(df: Any, uri: str, *,
                    mode: Literal["append", "overwrite", "create", "error", "errorifexists", "ignore"] = "append",
                    transaction_properties: Mapping[str, str] | None = None,
                    storage_options: Mapping[str, str] | None = None,
                    data_storage_version: str | None = None, max_rows_per_file: int | None = None,
                    enable_stable_row_ids: bool = False, commit_message: str | None = None) -> LanceDataset:
    """Write ``df`` to the Lance dataset at ``uri`` as one commit; return the dataset at that version.

    Args:
        df: A ``pyspark.sql.DataFrame``.
        uri: Dataset location.
        mode: ``"append"`` (creates the dataset when missing), ``"overwrite"``, ``"create"``
            (or ``"error"`` / ``"errorifexists"``: fails when a dataset exists) or ``"ignore"``
            (writes nothing when a dataset exists, and returns it as it is).
        transaction_properties: Caller metadata stored with the commit (string keys and values).
        storage_options: Backend options (credentials, endpoint) for driver and executors.
        data_storage_version: Lance file version for a new dataset.
        max_rows_per_file: Rows per data file (fragment).
        enable_stable_row_ids: Stable row ids (new datasets only).
        commit_message: Stored under the commit-message key.

    Returns:
        The dataset checked out at the version this write committed.

    Raises:
        LanceError: the committed version cannot be found (it was cleaned up concurrently).
    """
    register(df.sparkSession)
    write_id = uuid.uuid4().hex
    props = {**(transaction_properties or {}), WRITE_ID_KEY: write_id}
    writer = df.write.format("lance").mode("overwrite" if mode == "overwrite" else "append")
    if mode != "append" and mode != "overwrite":
        writer = writer.option("mode", mode)
    writer = writer.option("transaction_properties", json.dumps(props))
    if storage_options:
        writer = writer.option("storage_options", json.dumps(dict(storage_options)))
    if data_storage_version is not None:
        writer = writer.option("data_storage_version", data_storage_version)
    if max_rows_per_file is not None:
        writer = writer.option("max_rows_per_file", str(max_rows_per_file))
    if enable_stable_row_ids:
        writer = writer.option("enable_stable_row_ids", "true")
    if commit_message is not None:
        writer = writer.option("commit_message", commit_message)
    writer.save(uri)
    if mode == "ignore":
        try:
            return find_write(uri, write_id, storage_options)
        except LanceError:
            return LanceDataset(uri, storage_options=storage_options)  # it existed: nothing was written
    return find_write(uri, write_id, storage_options)


def find_write(uri: str, write_id: str, storage_options: Mapping[str, str] | None = None) -> LanceDataset:
    """The dataset at the version whose transaction carries ``write_id`` (newest first).

    Raises:
        LanceError: no version carries it.
    """
    ds = LanceDataset(uri, storage_options=storage_options)
    for version in range(ds.version, 0, -1):
        txn = ds.read_transaction(version)
        if txn is not None and txn.transaction_properties.get(WRITE_ID_KEY) == write_id:
            return ds.checkout_version(version)
    raise LanceError(f"{uri}: no version carries write id {write_id}")


def count_rows(spark: Any, uri: str, filter: str | None = None, *, version: int | str | None = None,
               storage_options: Mapping[str, str] | None = None) -> int:
    """Live rows of the dataset at ``uri`` (matching the Lance SQL ``filter``), as pylance counts.

    Without a filter the count comes from the manifest (no data is read); with one, a Spark
    job reads only the columns the filter names.

    Args:
        spark: The SparkSession that runs a filtered count.
        uri: Dataset location.
        filter: A Lance SQL predicate (``"id > 5 AND cat = 'a'"``).
        version: Version number or tag (latest when ``None``).
        storage_options: Backend options (credentials, endpoint).
    """
    ds = LanceDataset(uri, version, storage_options=storage_options)
    if filter is None:
        return ds.count_rows()
    expr = to_expression(filter, ds.schema)
    assert expr is not None
    columns = referenced_columns(expr, ds.schema.names) or ds.schema.names[:1]
    register(spark)
    reader = (spark.read.format("lance").option("version", str(ds.version)).option("filter", filter)
              .option("columns", ",".join(columns)))
    if storage_options:
        reader = reader.option("storage_options", json.dumps(dict(storage_options)))
    result: int = reader.load(uri).count()
    return result


__all__ = ["WRITE_ID_KEY", "count_rows", "find_write", "write_dataframe"]
