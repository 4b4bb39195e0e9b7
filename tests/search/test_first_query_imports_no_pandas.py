"""A fresh process opens a dataset and runs its first ``nearest=`` query without importing pandas.

pyarrow imports pandas (~0.3 s of CPU) on a first ``pa.array`` from numpy, ``pa.scalar`` or
``to_numpy``; pylance pays for it inside ``import lance``. Our search path converts through Arrow
buffers instead (``lance_format/arrays.py``), so a cold process's first query,
filtered (prefilter, a SQL literal) or not, leaves pandas unloaded. The rows it returns are those
the same query returns in this (warm) process, and pylance's up to ties (PQ/SQ codes give equal
distances, ``ties.py``). The HNSW kind reads its graph's list column on the first query too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import lance_format

from .ties import tie_groups

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

REPO = Path(__file__).resolve().parents[2]
N, DIM, FRAG = 3000, 16, 1000
KINDS = ["IVF_PQ", "IVF_SQ", "IVF_HNSW_SQ"]
FILTER = "cat < 2"


def _table() -> pa.Table:
    x = np.random.default_rng(0).standard_normal((N, DIM)).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(N)), "cat": pa.array(np.arange(N) % 5),
                     "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _query() -> list[float]:
    q: list[float] = np.random.default_rng(11).standard_normal(DIM).astype(np.float32).tolist()
    return q


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("first_query")
    out = {}
    for kind in KINDS:
        uri = str(root / f"{kind}.lance")
        ds = lance.write_dataset(_table(), uri, max_rows_per_file=FRAG)
        kw = {"num_sub_vectors": 4} if "PQ" in kind else {}
        ds.create_index("vec", kind, num_partitions=4, **kw)
        out[kind] = uri
    return out


def _fresh(uri: str) -> dict[str, Any]:
    """Open ``uri`` and search it twice (plain, then prefiltered) in a new interpreter."""
    script = (
        "import json, sys\nimport lance_format\n"
        f"ds = lance_format.dataset({uri!r})\nq = {_query()!r}\n"
        "near = {'column': 'vec', 'q': q, 'k': 10, 'nprobes': 2}\n"
        "a = ds.to_table(nearest=near, columns=['id'], with_row_id=True)\n"
        "after_plain = 'pandas' in sys.modules\n"
        f"b = ds.to_table(nearest=near, columns=['id'], with_row_id=True, filter={FILTER!r}, prefilter=True)\n"
        "print(json.dumps({'pandas': [after_plain, 'pandas' in sys.modules],\n"
        "                  'plain': [a['_rowid'].to_pylist(), a['_distance'].to_pylist()],\n"
        "                  'filtered': [b['_rowid'].to_pylist(), b['_distance'].to_pylist()],\n"
        "                  'filtered_ids': b['id'].to_pylist()}))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, RUST_LOG="error"))
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _same_up_to_ties(a: tuple[list[int], list[float]], b: tuple[list[int], list[float]]) -> None:
    """The same distances rank by rank, and the same rows in every tie group but the last (which k cuts)."""
    ids_a, ids_b = np.asarray(a[0]), np.asarray(b[0])
    d_a, d_b = np.asarray(a[1]), np.asarray(b[1])
    np.testing.assert_allclose(d_b, d_a, rtol=1e-5, atol=1e-6)
    groups = tie_groups(d_a)
    for g in range(int(groups[-1])):
        assert set(ids_a[groups == g].tolist()) == set(ids_b[groups == g].tolist())


@pytest.mark.parametrize("kind", KINDS)
def test_first_query_of_a_fresh_process_imports_no_pandas_and_finds_the_same_rows(
        built: dict[str, str], kind: str) -> None:
    uri = built[kind]
    fresh = _fresh(uri)
    assert fresh["pandas"] == [False, False]
    near = {"column": "vec", "q": np.asarray(_query(), np.float32), "k": 10, "nprobes": 2}
    ours = lance_format.dataset(uri)
    for key, extra in (("plain", {}), ("filtered", {"filter": FILTER, "prefilter": True})):
        warm = ours.to_table(nearest=near, columns=["id"], with_row_id=True, **extra)
        _same_up_to_ties((warm["_rowid"].to_pylist(), warm["_distance"].to_pylist()), fresh[key])
        theirs = lance.dataset(uri).to_table(nearest=near, columns=["id", "_distance"], with_row_id=True, **extra)
        assert len(fresh[key][0]) == 10
        if key == "filtered":
            assert all(i % 5 < 2 for i in fresh["filtered_ids"])
        overlap = len(set(theirs["_rowid"].to_pylist()) & set(fresh[key][0])) / 10
        assert overlap >= (0.7 if "HNSW" in kind else 0.9), (kind, key, overlap)
        if "HNSW" not in kind:  # same probed partitions, same codes: pylance's distances
            _same_up_to_ties((theirs["_rowid"].to_pylist(), theirs["_distance"].to_pylist()), fresh[key])
