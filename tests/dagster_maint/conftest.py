"""Fixtures for the maintenance tests: real Dagster runs on a real instance, datasets under tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import DagsterInstance, instance_for_test

from lance_dagster import LanceIOManager, LanceResource


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture
def lance(root: str) -> LanceResource:
    return LanceResource(root_uri=root)


@pytest.fixture
def io_manager(root: str) -> LanceIOManager:
    return LanceIOManager(root_uri=root)


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    # Pools hold one op each, as the example project configures its instance.
    with instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as inst:
        yield inst


def batch(start: int, n: int = 3) -> pa.Table:
    """``n`` rows with ids ``start .. start+n-1``."""
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"row-{i}" for i in ids]})
