"""One real local SparkSession (``local[2]``, loopback only) for every Spark test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session's SparkSession with the ``lance`` data source registered."""
    pytest.importorskip("pyspark")
    from pyspark import cloudpickle

    from lance_format.spark import local_session

    # Functions defined in these test modules travel to the Python workers by value
    # (the workers cannot import the test package by name).
    package = __name__.rpartition(".")[0]
    if package:
        cloudpickle.register_pickle_by_value(sys.modules[package])

    session = local_session("local[2]", shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
