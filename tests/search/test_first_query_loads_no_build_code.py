"""A fresh process's first ``nearest=`` query loads no index-building code and takes only its rows.

The vector kinds' build half (k-means, the HNSW builder, PQ/SQ training, the build pipeline:
``lance_format/index/kinds/vector_build.py``) is loaded by the registry only for builds, remaps
and ``optimize_indices``; a process that opens a dataset and searches pylance's IVF_PQ or
IVF_RQ index imports none of it. Its first take of a result column (one larger than
``rows.WHOLE_ON_FIRST_TAKE`` per fragment, set to 0 here) reads the result rows only; a second
query keeps the fragments' columns whole for the warm queries after it. The rows it
returns are pylance's, up to ties (PQ codes give equal distances).
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

from .ties import tie_groups

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")

REPO = Path(__file__).resolve().parents[2]
N, DIM, FRAG = 4000, 16, 1000
#: index kind -> pylance's build arguments
KINDS = {"IVF_PQ": {"num_sub_vectors": 4}, "IVF_RQ": {}}
#: Modules a search must not load: training and the build pipeline.
BUILD_MODULES = ("lance_format.index.vector.kmeans", "lance_format.index.vector.hnsw",
                 "lance_format.index.vector.quantize", "lance_format.index.vector.build",
                 "lance_format.index.kinds.vector_build", "lance_format.index.build")


def _table() -> pa.Table:
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((12, DIM)) * 3
    x = (centres[rng.integers(0, 12, N)] + rng.standard_normal((N, DIM))).astype(np.float32)
    return pa.table({"id": pa.array(np.arange(N)), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM)})


def _queries() -> list[list[float]]:
    rng = np.random.default_rng(5)
    first, other = ((rng.standard_normal(DIM) * 3).astype(np.float32).tolist() for _ in range(2))
    return [first, first, other]  # the first query again: its fragments' columns are touched twice


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("no_build_code")
    out = {}
    for kind, kw in KINDS.items():
        uri = str(root / f"{kind}.lance")
        lance.write_dataset(_table(), uri, max_rows_per_file=FRAG).create_index("vec", kind, num_partitions=8, **kw)
        out[kind] = uri
    return out


def _fresh(uri: str) -> dict[str, Any]:
    """Open ``uri`` in a new interpreter and run the queries one after the other."""
    script = (
        "import json, sys\nimport lance_format\nfrom lance_format.search import rows\n"
        "rows.WHOLE_ON_FIRST_TAKE = 0  # these fragments are small: take rows first all the same\n"
        f"ds = lance_format.dataset({uri!r})\nout = {{'results': [], 'kept': []}}\n"
        f"for q in {_queries()!r}:\n"
        "    t = ds.to_table(nearest={'column': 'vec', 'q': q, 'k': 10, 'nprobes': 3}, columns=['id'],\n"
        "                    with_row_id=True)\n"
        "    out['results'].append([t['_rowid'].to_pylist(), t['_distance'].to_pylist(), t['id'].to_pylist()])\n"
        "    out['kept'].append(len(rows._KEPT.arrays))\n"
        f"out['loaded'] = [m for m in {BUILD_MODULES!r} if m in sys.modules]\n"
        "print(json.dumps(out))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, RUST_LOG="error"))
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _same_up_to_ties(ours: list[Any], theirs: pa.Table) -> None:
    """Pylance's distances rank by rank and its rows in every tie group but the last (which k cuts)."""
    ids, dist = np.asarray(ours[0]), np.asarray(ours[1])
    t_ids, t_dist = np.asarray(theirs["_rowid"].to_pylist()), theirs["_distance"].to_numpy()
    np.testing.assert_allclose(dist, t_dist, rtol=1e-4, atol=1e-4)
    groups = tie_groups(t_dist)
    for g in range(int(groups[-1])):
        assert set(ids[groups == g].tolist()) == set(t_ids[groups == g].tolist())


@pytest.mark.parametrize("kind", list(KINDS))
def test_first_query_loads_no_build_code_and_finds_pylances_rows(built: dict[str, str], kind: str) -> None:
    fresh = _fresh(built[kind])
    assert fresh["loaded"] == []
    theirs_ds = lance.dataset(built[kind])
    for q, ours in zip(_queries(), fresh["results"], strict=True):
        theirs = theirs_ds.to_table(nearest={"column": "vec", "q": np.asarray(q, np.float32), "k": 10, "nprobes": 3},
                                    columns=["id", "_distance"], with_row_id=True)
        _same_up_to_ties(ours, theirs)
        assert ours[2] == [(r >> 32) * FRAG + (r & 0xFFFFFFFF) for r in ours[0]]


def test_first_take_reads_rows_and_the_second_keeps_columns_whole(built: dict[str, str]) -> None:
    fresh = _fresh(built["IVF_PQ"])
    # the first query took its rows without keeping any column; the same query again kept the
    # columns of the fragments it touched; a third query keeps as many or more
    assert fresh["kept"][0] == 0
    assert 0 < fresh["kept"][1] <= fresh["kept"][2] <= N // FRAG
