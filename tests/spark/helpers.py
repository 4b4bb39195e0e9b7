"""Helpers shared by the Spark tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa


def plan_text(df: Any) -> str:
    """The executed physical plan of ``df`` as text."""
    return str(df._jdf.queryExecution().executedPlan().toString())


def spark_table(df: Any, sort_by: str = "id") -> pa.Table:
    """Collect ``df`` as an Arrow table sorted by ``sort_by``."""
    return df.toArrow().sort_by(sort_by)


def data_files(uri: str) -> set[str]:
    """Names of the files under the dataset's ``data/`` directory."""
    root = Path(uri) / "data"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def pickled_read_task(source: Any, path: Path) -> Path:
    """Write what Spark's planner ships to a worker for ``source``: its reader in a closure, and the
    partitions, cloudpickled to ``path`` (a fresh interpreter then unpickles it as ``task``)."""
    from pyspark import cloudpickle

    reader = source.reader(source.schema())
    partitions = reader.partitions()

    def data_source_read_func(partition: Any) -> Any:
        return reader.read(partition)

    path.write_bytes(cloudpickle.dumps((data_source_read_func, partitions)))
    return path
