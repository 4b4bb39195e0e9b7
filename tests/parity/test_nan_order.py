"""Filters order NaN by its sign as pylance 14.0.2 does: -NaN below -inf, +NaN above +inf.

Each NaN equals a NaN of its own sign only, while -0.0 still equals 0.0. Checked with and
without a scalar index on the column, on float64 and float32, against pylance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format

FILTERS = [
    "x > 0", "x < 0", "x >= 0", "x <= 0", "x = 2", "x != 1", "x > 2", "x < -1e308", "x > -1e308",
    "x BETWEEN 0 AND 5", "x IN (1, 2)", "NOT (x > 0)", "x > 0 OR x < 0", "x > -0.0", "x = -0.0",
    "x * 2 > 0", "x < y", "x > y", "x = y", "x != y", "x <= y", "x >= y",
]


def issue_table(dtype: Any) -> pa.Table:
    """The issue's values (``x > 0``: pylance 5 rows) and, in ``y``, NaNs of the other sign."""
    x = np.array([1, -np.nan, np.inf, -np.inf, 2, np.nan, 3, -0.0, 0.0], dtype=dtype)
    y = np.array([np.nan, np.nan, -np.nan, np.nan, -np.nan, -np.nan, np.nan, -np.nan, np.nan], dtype=dtype)
    return pa.table({"id": pa.array(range(len(x)), pa.int64()), "x": x, "y": y})


def many_rows(rows: int = 5000) -> pa.Table:
    """Signed NaNs, infinities and zeros spread over several index pages and fragments."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 10, rows)
    pick = rng.random(rows)
    x[pick < 0.05] = np.nan
    x[(pick >= 0.05) & (pick < 0.10)] = -np.nan
    x[(pick >= 0.10) & (pick < 0.12)] = np.inf
    x[(pick >= 0.12) & (pick < 0.14)] = -np.inf
    x[(pick >= 0.14) & (pick < 0.16)] = -0.0
    y = np.where(rng.random(rows) < 0.5, np.nan, -np.nan)
    return pa.table({"id": pa.array(range(rows), pa.int64()), "x": x, "y": y})


def _answers(lib: Any, uri: str, table: pa.Table, index: str | None) -> dict[str, list[int]]:
    ds = lib.write_dataset(table, uri, max_rows_per_file=2000)
    if index is not None:
        ds.create_scalar_index("x", index)
        ds = lib.dataset(uri)
    out = {}
    for f in FILTERS:
        ids = ds.to_table(columns=["id"], filter=f)["id"].to_pylist()
        assert ds.count_rows(filter=f) == len(ids), f
        out[f] = sorted(ids)
    return out


@pytest.mark.parametrize("index", [None, "BTREE", "BITMAP"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signed_nan_order_equals_pylance(tmp_path: Path, index: str | None, dtype: Any) -> None:
    t = issue_table(dtype)
    ours = _answers(lance_format, str(tmp_path / "ours.lance"), t, index)
    theirs = _answers(lance, str(tmp_path / "py.lance"), t, index)
    assert ours == theirs
    assert len(ours["x > 0"]) == 5  # the issue's numbers: 1, inf, 2, +NaN, 3
    assert len(ours["x < 0"]) == 2  # -NaN, -inf


@pytest.mark.parametrize("index", [None, "BTREE"])
def test_signed_nan_order_over_pages_equals_pylance(tmp_path: Path, index: str | None) -> None:
    t = many_rows()
    assert _answers(lance_format, str(tmp_path / "ours.lance"), t, index) == \
        _answers(lance, str(tmp_path / "py.lance"), t, index)
