"""Indexed queries on version after version of a dataset keep a bounded number of files open.

A long-lived process answering ZONEMAP / BTREE queries while the dataset gains versions
(deletes, appends) reads the same data files at every version: the fragment readers it keeps
are shared between versions instead of one more set of open files per version (each held
until the session's cache evicts it: ~9 descriptors per version here, thousands over a day).
The opened index segment itself is still kept per version (one descriptor each).
Rows still follow each version (deletions, renamed columns) and equal pylance's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")
os.environ.setdefault("RUST_LOG", "error")


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
@pytest.mark.parametrize("kind", ["ZONEMAP", "BTREE"])
def test_open_files_stay_bounded_over_versions(tmp_path: Path, kind: str) -> None:
    uri = str(tmp_path / "ds.lance")
    n = 4000
    lance.write_dataset(pa.table({"x": pa.array(np.arange(n)), "y": pa.array(np.arange(n) * 3)}), uri,
                        max_rows_per_file=1000)
    lance.dataset(uri).create_scalar_index("x", kind)
    flt = "x >= 10 and x < 3900" if kind == "ZONEMAP" else "x in (5, 1500, 2500, 3500)"
    counts = []
    for i in range(40):
        lance.dataset(uri).delete(f"x = {1000 * (i % 4) + i}")
        ours = lance_format.dataset(uri)
        got = ours.to_table(filter=flt, columns=["x", "y"]).sort_by("x")
        assert ours.count_rows(filter=flt) == got.num_rows
        if i % 10 == 0:
            assert got.to_pylist() == lance.dataset(uri).to_table(filter=flt, columns=["x", "y"]).sort_by("x").to_pylist()
        counts.append(_open_files())
    # at most the opened index segment per version (kept by version: its row domain comes from the
    # manifest); the fragment readers (4 fragments, 1-2 column sets) are shared
    assert counts[-1] - counts[5] <= 34 + 5, counts


def test_renamed_columns_read_their_own_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds.lance")
    n = 3000
    lance.write_dataset(pa.table({"a": pa.array(np.arange(n)), "b": pa.array(np.arange(n) * 10)}), uri)
    lance.dataset(uri).create_scalar_index("a", "ZONEMAP")
    flt = "a >= 100 and a < 110"
    first = lance_format.dataset(uri).to_table(filter=flt, columns=["a", "b"])
    assert first.column("b").to_pylist() == [10 * v for v in range(100, 110)]
    for old, new in (("b", "c"), ("a", "b"), ("c", "a")):  # names swapped, the same data files
        lance.dataset(uri).alter_columns({"path": old, "name": new})
    flt = "b >= 100 and b < 110"
    want = lance.dataset(uri).to_table(filter=flt, columns=["b", "a"]).sort_by("b")
    got = lance_format.dataset(uri).to_table(filter=flt, columns=["b", "a"]).sort_by("b")
    assert got.to_pylist() == want.to_pylist()
