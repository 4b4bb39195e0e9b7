"""Full-zip pages of fixed-width values (wide vectors) decode as rows of a strided view.

pylance 14.0.2 writes a 2.1/2.2 column of 128-float vectors as full-zip pages: each item is a
control word (when the column has nulls) followed by 512 value bytes. We read such pages as a
2-D view instead of gathering byte by byte; these tests check the rows against pylance's on
pages with and without control words, with null vectors, null struct parents, and on takes."""

from __future__ import annotations

from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.errors import LanceError

DIM = 128


def _vectors(n: int, seed: int) -> pa.FixedSizeListArray:
    values = np.random.default_rng(seed).standard_normal(n * DIM).astype(np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values), DIM)


def _with_nulls(arr: pa.FixedSizeListArray, every: int) -> pa.Array:
    mask = pa.array(np.arange(len(arr)) % every == 0)
    return pa.compute.if_else(mask, pa.nulls(len(arr), arr.type), arr)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_wide_vector_pages_read_as_pylance_reads_them(tmp_path: Path, version: str) -> None:
    n = 3000
    vec = _vectors(n, 1)
    table = pa.table({
        "id": pa.array(np.arange(n)),
        "vec": vec,
        "nullable_vec": _with_nulls(_vectors(n, 2), 7),
        "s": pa.StructArray.from_arrays([_vectors(n, 3)], names=["v"],
                                        mask=pa.array(np.arange(n) % 11 == 0)),
    })
    uri = str(tmp_path / "v.lance")
    lance.write_dataset(table, uri, data_storage_version=version, max_rows_per_file=1000)
    ours = lance_format.dataset(uri)
    theirs = lance.dataset(uri)
    assert ours.to_table().equals(theirs.to_table())
    idx = [0, 6, 7, 999, 1000, 1777, 2999]
    assert ours.take(idx).equals(theirs.take(idx))
    flt = "id >= 500 AND id < 2100"
    assert ours.to_table(filter=flt).equals(theirs.to_table(filter=flt))


def test_compaction_of_wide_vectors_keeps_every_row(tmp_path: Path) -> None:
    n = 4000
    table = pa.table({"id": pa.array(np.arange(n)), "vec": _with_nulls(_vectors(n, 4), 13)})
    uri = str(tmp_path / "c.lance")
    lance.write_dataset(table, uri, data_storage_version="2.2", max_rows_per_file=400)
    lance.dataset(uri).delete("id % 10 = 3")
    expected = lance.dataset(uri).to_table()
    lance_format.dataset(uri).optimize.compact_files()
    after = lance.dataset(uri)
    assert len(after.get_fragments()) == 1
    assert after.to_table().equals(expected)


@pytest.mark.parametrize("version", ["2.1", "2.2"])
def test_null_vectors_built_by_pyarrow_write_for_pylance(tmp_path: Path, version: str) -> None:
    # pa.array([None, [...]]) puts DIM null items under each null vector
    rows = [None if i % 5 == 0 else [float(i + k) for k in range(DIM)] for i in range(300)]
    table = pa.table({"vec": pa.array(rows, pa.list_(pa.float32(), DIM))})
    assert table.column("vec").chunk(0).values.null_count > 0
    uri = str(tmp_path / "n.lance")
    lance_format.write_dataset(table, uri, data_storage_version=version)
    assert lance.dataset(uri).to_table().equals(table)
    assert lance_format.dataset(uri).to_table().equals(table)


def test_null_items_inside_a_vector_are_refused_by_name(tmp_path: Path) -> None:
    values = pa.array([1.0, None] + [0.0] * (DIM - 2), pa.float32())
    table = pa.table({"vec": pa.FixedSizeListArray.from_arrays(values, DIM)})
    with pytest.raises(LanceError, match="null items"):
        lance_format.write_dataset(table, str(tmp_path / "bad.lance"), data_storage_version="2.2")
    assert not (tmp_path / "bad.lance" / "_versions").exists()
