"""One real local SparkSession (``local[2]``, loopback only) for every Spark test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's SparkSession with the ``lance`` data source registered."""
    pytest.importorskip("pyspark")
    from pyspark import cloudpickle

    from lance_format.spark import local_session

    # Functions defined in these test modules travel to the Python workers by value
    # (the workers cannot import the test package by name).
    package = __name__.rpartition(".")[0]
    if package:
        cloudpickle.register_pickle_by_value(sys.modules[package])

    # Catalog tables of the tests live in a temporary warehouse, not in the working directory.
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = local_session("local[2]", shuffle_partitions=2, conf={"spark.sql.warehouse.dir": str(warehouse)})
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
