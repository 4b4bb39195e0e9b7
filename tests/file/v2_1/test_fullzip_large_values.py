"""Full-zip pages of large values (each value copied as one slice when values average 256 bytes or
more, on write and on read) read back identically by pylance 14.0.2 and by us: nulls, empty values
and lists of large values, whole and taken."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format


def _blob(i: int) -> bytes | None:
    if i % 7 == 3:
        return None
    if i % 11 == 5:
        return b""
    return bytes([i % 251]) * (300 + (i * 37) % 3000)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_large_binary_values_round_trip_through_pylance(tmp_path: Path, version: str) -> None:
    n = 400
    blobs = [_blob(i) for i in range(n)]
    lists = [None if i % 9 == 0 else [b for b in (_blob(i), _blob(i + 1)) if b is not None] for i in range(n)]
    table = pa.table({"id": pa.array(np.arange(n)), "b": pa.array(blobs, pa.binary()),
                      "s": pa.array([None if b is None else b.decode("latin-1") for b in blobs], pa.string()),
                      "l": pa.array(lists, pa.list_(pa.binary()))})
    uri = str(tmp_path / "big.lance")
    lance_format.write_dataset(table, uri, data_storage_version=version)
    assert lance.dataset(uri).to_table().equals(table)
    assert lance_format.dataset(uri).to_table().equals(table)
    rows = [0, 3, 5, 77, 399]
    assert lance_format.dataset(uri).take(rows).equals(lance.dataset(uri).take(rows))
