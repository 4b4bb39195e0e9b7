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
