"""A damaged data file inside a dataset is a LanceError naming it."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import LanceError

_RNG = np.random.default_rng(0)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize("damage", ["truncate", "zero_middle"])
def test_damaged_data_file_in_dataset_is_a_lance_error(tmp_path: Path, version: str, damage: str) -> None:
    uri = str(tmp_path / "ds")
    t = pa.table({"a": pa.array(_RNG.integers(0, 1 << 40, 5000)), "s": [f"s{i % 7}" * 3 for i in range(5000)]})
    lance.write_dataset(t, uri, data_storage_version=version)
    path = next((Path(uri) / "data").glob("*.lance"))
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:
        mid = len(data) // 4
        path.write_bytes(data[:mid] + b"\xff" * 512 + data[mid + 512:])
    ds = lf.dataset(uri)
    try:
        got = ds.to_table()
    except LanceError as exc:
        assert path.name in str(exc)
    else:  # flipping value bytes may still decode; then the schema must hold
        assert got.schema == t.schema and got.num_rows == 5000
