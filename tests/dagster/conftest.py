"""Fixtures for the Dagster integration tests (real Dagster execution, datasets under tmp_path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance

from lance_dagster import LanceIOManager, LanceResource


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture
def io_manager(root: str) -> LanceIOManager:
    return LanceIOManager(root_uri=root)


@pytest.fixture
def lance_resource(root: str) -> LanceResource:
    return LanceResource(root_uri=root)


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A loopback ``local[2]`` SparkSession per test module (the Spark frame and merge tests)."""
    from lance_format.spark import local_session

    session = local_session("local[2]", shuffle_partitions=2)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
