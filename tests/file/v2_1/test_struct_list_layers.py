"""A list (without nulls of its own) under a nullable struct: pylance needs a nullable-list layer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lance.file import LanceFileReader as PyFileReader

from lance_format.file import LanceFileReader, LanceFileWriter


@pytest.mark.parametrize("version", ["2.1", "2.2"])
@pytest.mark.parametrize(
    ("offsets", "values"),
    [
        ([0, 1, 1, 4], [1, None, 3, 4]),  # null items, the null struct row spans no items
        ([0, 1, 2, 5], [1, 9, None, 3, 4]),  # the null struct row still spans an item
        ([0, 1, 2, 5], [1, 9, 2, 3, 4]),  # no null items at all
    ],
)
def test_list_under_null_struct_reads_in_pylance(
    tmp_path: Path, version: str, offsets: list[int], values: list[int | None]
) -> None:
    items = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.int8()))
    n = len(offsets) - 1
    mask = pa.array([False, True, False])
    struct = pa.StructArray.from_arrays([pa.array(range(n), pa.int8()), items], names=["c0", "c1"], mask=mask)
    table = pa.table({"f": struct})
    path = str(tmp_path / "f.lance")
    with LanceFileWriter(path, table.schema, version=version) as writer:
        writer.write_batch(table)
    expected = table.to_pylist()  # a null struct row hides whatever its children hold
    assert PyFileReader(path).read_all().to_table().to_pylist() == expected
    assert LanceFileReader(path).read_all().to_table().to_pylist() == expected
