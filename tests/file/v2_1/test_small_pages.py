"""Few-chunk pages decode through their fast paths exactly as pylance wrote them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lance_format.file import LanceFileReader

from ..helpers import write_public_file

pytestmark = pytest.mark.usefixtures("fresh_caches")


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("rows", [1, 7, 300, 1000, 1500, 2100, 5000])
def test_small_page_fast_paths_match_pylance(tmp_path: Path, version: str, rows: int) -> None:
    """Few-chunk pages (strings, bit-packed ints) decode exactly as pylance wrote them."""
    lance_file = pytest.importorskip("lance.file")
    rng = np.random.default_rng(rows)
    strings = [None if i % 11 == 3 else "x" * int(rng.integers(0, 40)) for i in range(rows)]
    table = pa.table({
        "i": pa.array(rng.integers(-(1 << 40), 1 << 40, rows)),
        "small": pa.array(rng.integers(0, 100, rows).astype(np.int32)),
        "s": pa.array(strings, pa.string()),
        "ls": pa.array(strings, pa.large_string()),
        "f": pa.array(rng.random(rows)),
    })
    path = tmp_path / "theirs.lance"
    writer = lance_file.LanceFileWriter(str(path), table.schema, version=version)
    writer.write_batch(table)
    writer.close()
    got = LanceFileReader(str(path)).read_all().to_table()
    assert got.equals(table)
    ours = tmp_path / "ours.lance"
    write_public_file(ours, table, version)
    assert LanceFileReader(str(ours)).read_all().to_table().equals(table)
    back = lance_file.LanceFileReader(str(ours)).read_all().to_table()
    assert back.equals(table)
