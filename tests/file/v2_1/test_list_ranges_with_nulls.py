"""Row ranges of list columns with null rows, read from the middle of a page (2.1 and 2.2).

An indexed scan reads the row windows around its candidates (``index/scan.py``), so a range
starting inside a page must decode like the same rows of a whole read; Arrow refuses to build a
list array whose sliced offsets carry a validity mask, which once surfaced as a corrupt file.
"""

from __future__ import annotations

from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from .helpers import open_decoder, write_file


def _table(n: int = 3000) -> pa.Table:
    rng = np.random.default_rng(7)
    words = np.array(["x", "y", "zz", "w"], dtype=object)
    tags = [None if rng.random() < 0.1 else list(rng.choice(words, rng.integers(0, 4))) for _ in range(n)]
    tags[:40] = [None, []] * 20  # a range inside these starts at list offset 0 but not at row 0
    return pa.table({"tags": pa.array(tags, pa.list_(pa.string())),
                     "nested": pa.array([None if t is None else [t] for t in tags], pa.list_(pa.list_(pa.string())))})


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize(("start", "stop"), [(0, 1024), (1, 7), (5, 60), (1024, 2048), (1500, 3000), (2999, 3000)])
def test_a_range_inside_a_page_reads_the_rows_pylance_reads(tmp_path: Path, version: str, start: int,
                                                              stop: int) -> None:
    table = _table()
    ours = tmp_path / "ours.lance"
    write_file(str(ours), table, version)
    theirs = str(tmp_path / "theirs.lance")
    writer = lf.LanceFileWriter(theirs, table.schema, version=version)
    writer.write_batch(table)
    writer.close()
    for path in (str(ours), theirs):
        batch = open_decoder(path).read_range(start, stop)
        assert batch.to_pylist() == table.slice(start, stop - start).to_pylist()
        expected = lf.LanceFileReader(path).read_range(start, stop - start).to_table()
        assert pa.Table.from_batches([batch]).equals(expected)
