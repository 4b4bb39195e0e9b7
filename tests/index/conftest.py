"""Fixtures for index tests: small datasets written by us or by pylance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest


def sample_table(n: int = 600, seed: int = 0) -> pa.Table:
    """Integers with nulls, strings with nulls, floats: every kind the indices handle."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(rng.integers(0, 40, n), pa.int64(), mask=rng.random(n) < 0.05),
        "s": pa.array(rng.choice(np.array(["x", "y", "z", "w"], dtype=object), n), pa.string(),
                      mask=rng.random(n) < 0.05),
        "f": pa.array(rng.random(n) * 10, pa.float64()),
    })


def rowids(table: pa.Table) -> list[int]:
    """Sorted ``_rowid`` values of a scan result."""
    return sorted(table.column("_rowid").to_pylist())


@pytest.fixture
def make_path(tmp_path: Path) -> Callable[[str], str]:
    """A fresh dataset path under the test's temporary directory."""
    def make(name: str) -> str:
        return str(tmp_path / f"{name}.lance")
    return make


FILTERS = [
    "a = 3",
    "a < 5",
    "a <= 5",
    "a > 30",
    "a >= 30",
    "a BETWEEN 10 AND 12",
    "a IN (1, 2, 39)",
    "a IS NULL",
    "s = 'x'",
    "s IN ('y', 'w')",
    "s IS NULL",
    "a > 20 AND s = 'x'",
    "a < 3 OR s IS NULL",
    "(a = 1 OR a = 2) AND s <> 'x'",
    "f > 9.5",
]
