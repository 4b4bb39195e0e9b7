"""Computed columns (``columns={name: SQL}``) with a filter an index answers equal pylance's.

The indexed scan builds the batches the projection then derives its columns from: those carry
the columns read, not the caller's computed ones (an indexed filter raised ``KeyError``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

FILTERS = ["x = 4001", "x in (3, 4500)", "x >= 3000 and x < 3100"]
PROJECTIONS = [{"x2": "x * 2", "s": "s"}, {"v1": "v + 1"}, {"s": "s", "y3": "y * 3"}]


@pytest.fixture(scope="module", params=["ZONEMAP", "BLOOMFILTER", "BTREE"])
def uri(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("computed") / "ds.lance")
    n = 6000
    tbl = pa.table({"x": pa.array(np.arange(n)), "y": pa.array(np.arange(n) % 7),
                    "v": pa.array(np.arange(n) / 3), "s": pa.array([f"s{i}" for i in range(n)])})
    lance.write_dataset(tbl, out, max_rows_per_file=2500)
    lance.dataset(out).create_scalar_index("x", request.param)
    lance.dataset(out).delete("x % 5 = 1")
    return out


@pytest.mark.parametrize("flt", FILTERS)
@pytest.mark.parametrize("columns", PROJECTIONS, ids=lambda c: ",".join(c))
def test_computed_columns_with_indexed_filter_match_pylance(uri: str, flt: str, columns: dict[str, str]) -> None:
    want = lance.dataset(uri).to_table(filter=flt, columns=columns)
    computed: Any = columns  # our signature lists names only; a mapping is accepted as pylance's
    got = lance_format.dataset(uri).to_table(filter=flt, columns=computed)
    assert got.schema.names == want.schema.names
    key = [(c, "ascending") for c in want.schema.names]
    assert got.sort_by(key).to_pylist() == want.sort_by(key).to_pylist()
