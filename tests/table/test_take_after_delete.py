"""take() on fragments with deletions maps live-row indices to physical rows without a survivors table."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

import lance_format
from lance_format.table.read import live_to_physical


def test_live_indices_map_to_the_surviving_physical_rows() -> None:
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(1, 400))
        deleted = np.sort(rng.choice(n, int(rng.integers(0, n)), replace=False)).astype(np.uint32)
        survivors = np.setdiff1d(np.arange(n), deleted)
        if survivors.size == 0:
            continue
        live = rng.integers(0, survivors.size, 30)
        assert (live_to_physical(live, deleted) == survivors[live]).all()


def test_take_after_deletes_matches_pylance(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"id": np.arange(3_000, dtype=np.int64), "s": [f"v{i}" for i in range(3_000)]})
    lance.write_dataset(t, uri, max_rows_per_file=1_000)
    lance.dataset(uri).delete("id % 7 = 0 OR id < 5 OR (id >= 1990 AND id < 2010)")
    ours, theirs = lance_format.dataset(uri), lance.dataset(uri)
    n = theirs.count_rows()
    idx = [0, 1, n - 1, 990, 991, 1_985, 1_986, 1_987, 500, 500]
    assert ours.take(idx).equals(theirs.take(idx))
