"""A fresh process's first BTREE / BITMAP query answers without importing pandas.

pyarrow imports pandas (~0.3 s of CPU) on most conversions from Python or numpy values
(``pa.scalar``, ``pa.array(ndarray)``, ``Array.to_numpy``, ``fill_null(False)``). pylance pays
that inside ``import lance``; a first indexed query of ours should not pay it at all. Each case
runs open + one filtered ``to_table`` in a new interpreter, on 2.0 and 2.2 files, and compares
the rows with pylance 14.0.2's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[2]

FILTERS = {
    "btree_point": "id = 4321",
    "btree_range": "id >= 1000 AND id < 5200",
    "btree_in_list": "id IN (3, 4097, 5999)",
    "bitmap_equality": "category = 'c7'",
    "bitmap_in_list": "category IN ('c1', 'c13')",
    "general_planner": "category != 'c7' AND id < 50",  # lance_format/index/query.py, not fastplan
}


@pytest.fixture(scope="module", params=["2.0", "2.2"])
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """6,000 rows (two BTREE pages) with a BTREE on ``id`` and a BITMAP on 20-value ``category``."""
    n = 6000
    rng = np.random.default_rng(3)
    table = pa.table({"id": pa.array(rng.permutation(n).astype(np.int64)),
                      "category": pa.array([f"c{i % 20}" for i in range(n)]),
                      "x": pa.array(rng.random(n))})
    uri = str(tmp_path_factory.mktemp(f"v{request.param}") / "ds.lance")
    ds = lance.write_dataset(table, uri, data_storage_version=request.param)
    ds.create_scalar_index("id", "BTREE")
    ds.create_scalar_index("category", "BITMAP")
    return uri


def _ours_in_a_fresh_process(uri: str, where: str) -> dict[str, object]:
    script = ("import json, sys\n"
              "import lance_format\n"
              f"table = lance_format.dataset({uri!r}).to_table(filter={where!r})\n"
              "print(json.dumps({'ids': sorted(table.column('id').to_pylist()),\n"
              "                  'categories': sorted(table.column('category').to_pylist()),\n"
              "                  'pandas': 'pandas' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("case", sorted(FILTERS))
def test_first_indexed_query_matches_pylance_without_importing_pandas(indexed: str, case: str) -> None:
    where = FILTERS[case]
    theirs = lance.dataset(indexed).to_table(filter=where)
    assert theirs.num_rows > 0
    ours = _ours_in_a_fresh_process(indexed, where)
    assert ours == {"ids": sorted(theirs.column("id").to_pylist()),
                    "categories": sorted(theirs.column("category").to_pylist()),
                    "pandas": False}


def test_first_indexed_query_with_row_ids_matches_pylance_without_importing_pandas(indexed: str) -> None:
    where = "category = 'c7' OR id = 4321"
    theirs = lance.dataset(indexed).to_table(filter=where, with_row_id=True)
    script = ("import json, sys\n"
              "import lance_format\n"
              f"table = lance_format.dataset({indexed!r}).to_table(filter={where!r}, with_row_id=True)\n"
              "print(json.dumps({'rows': sorted(table.column('_rowid').to_pylist()),\n"
              "                  'pandas': 'pandas' in sys.modules}))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "rows": sorted(theirs.column("_rowid").to_pylist()), "pandas": False}
