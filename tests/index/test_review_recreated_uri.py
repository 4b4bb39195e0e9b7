"""A dataset deleted and written again at the same URI reads its new rows through an index.

The second dataset has the same URI, version numbers and fragment ids as the first, so readers
kept in the session between indexed queries must not be found by those alone (they would still
read the first dataset's data files, open or not).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")


@pytest.mark.parametrize("kind", ["ZONEMAP", "BLOOMFILTER", "BTREE"])
def test_rewritten_dataset_at_same_uri_reads_new_rows(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "ds.lance")
    for scale in (1, 2):
        shutil.rmtree(uri, ignore_errors=True)
        n = 5000
        tbl = pa.table({"x": pa.array(np.arange(n)), "y": pa.array(np.arange(n) * scale)})
        lance.write_dataset(tbl, uri)
        lance.dataset(uri).create_scalar_index("x", kind)
        for flt in ("x = 7", "x in (7, 4000)"):
            want = lance.dataset(uri).to_table(filter=flt).sort_by("x")
            got = lance_format.dataset(uri).to_table(filter=flt).sort_by("x")
            assert got.to_pylist() == want.to_pylist(), (scale, flt)
