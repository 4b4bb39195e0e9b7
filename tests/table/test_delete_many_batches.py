"""Deletes whose predicate scan spans several of its large batches and fragments match pylance."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.table.delete import DELETE_SCAN_BATCH_ROWS

ROWS = DELETE_SCAN_BATCH_ROWS + 70_000  # first fragment: more than one predicate-scan batch


@pytest.mark.parametrize("version", ["legacy", "2.0", "2.2"])
def test_repeated_deletes_across_batches_and_fragments(tmp_path: Path, version: str) -> None:
    uri = str(tmp_path / "ds.lance")
    ids = np.arange(ROWS + 30_000, dtype=np.int64)
    table = pa.table({"id": ids, "s": pa.array(ids % 13).cast(pa.string())})
    lance_format.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=ROWS)
    ds = lance_format.dataset(uri)
    ds.delete("id % 10 = 0")
    ds = lance_format.dataset(uri)  # the second delete merges into existing deletion vectors
    ds.delete("id % 7 = 3 OR id >= 200000 AND id < 200005")
    live = ids[(ids % 10 != 0) & (ids % 7 != 3) & ~((ids >= 200_000) & (ids < 200_005))]

    ours = lance_format.dataset(uri)
    assert ours.count_rows() == live.size
    got = ours.to_table(columns=["id"]).column("id").to_numpy()
    np.testing.assert_array_equal(got, live)
    theirs = lance.dataset(uri)
    assert theirs.version == ours.version
    np.testing.assert_array_equal(theirs.to_table(columns=["id"]).column("id").to_numpy(), live)
    assert theirs.to_table(filter="id = 13").column("s").to_pylist() == ["0"]
