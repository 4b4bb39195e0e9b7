"""add_columns from a reader or an iterator of batches (reader_schema=), as pylance 14.0.2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format

lance = pytest.importorskip("lance")

LIBS = {"lance": lance, "lance_format": lance_format}


def _dataset(package: str, tmp: Path) -> Any:
    ds = LIBS[package].write_dataset(pa.table({"a": list(range(10))}), str(tmp / package), max_rows_per_file=4)
    ds.delete("a = 2 OR a = 9")
    return LIBS[package].dataset(str(tmp / package))


@pytest.mark.parametrize("shape", ["reader", "table", "iterator"])
def test_new_columns_follow_the_live_rows(tmp_path: Path, shape: str) -> None:
    new = pa.table({"b": pa.array(range(8), pa.int32()), "c": [f"x{i}" for i in range(8)]})
    results = {}
    for package in LIBS:
        ds = _dataset(package, tmp_path)
        if shape == "reader":
            ds.add_columns(new.to_reader(max_chunksize=3))
        elif shape == "table":
            ds.add_columns(new.to_reader())
        else:
            ds.add_columns(iter(new.to_batches(max_chunksize=2)), reader_schema=new.schema)
        results[package] = (ds.version, ds.to_table(), [len(f.data_files()) if hasattr(f, "data_files")
                                                        else len(f.metadata.files) for f in ds.get_fragments()])
    assert results["lance_format"][0] == results["lance"][0]
    assert results["lance_format"][1].equals(results["lance"][1])
    assert results["lance_format"][2] == results["lance"][2]


@pytest.mark.parametrize(("rows", "message"), [(5, "ended before producing values for all rows"),
                                               (9, "produced more values than expected")])
def test_wrong_row_counts_are_refused_like_pylance(tmp_path: Path, rows: int, message: str) -> None:
    for package in LIBS:
        ds = _dataset(package, tmp_path)
        with pytest.raises(OSError, match=message):
            ds.add_columns(pa.table({"b": list(range(rows))}).to_reader())
        assert LIBS[package].dataset(str(tmp_path / package)).version == 2  # nothing committed


def test_pylance_reads_columns_we_added(tmp_path: Path) -> None:
    ds = _dataset("lance_format", tmp_path)
    ds.add_columns(pa.table({"b": list(range(8))}).to_reader())
    assert lance.dataset(str(tmp_path / "lance_format")).to_table().equals(ds.to_table())


def test_merge_takes_an_iterator_with_its_schema(tmp_path: Path) -> None:
    right = pa.table({"a": [1, 3, 5, 7], "b": ["x", "y", "z", "w"]})
    results = {}
    for package, lib in LIBS.items():
        ds = lib.write_dataset(pa.table({"a": list(range(6))}), str(tmp_path / f"m_{package}"), max_rows_per_file=4)
        ds.merge(iter(right.to_batches(max_chunksize=2)), "a", schema=right.schema)
        results[package] = (ds.version, ds.to_table())
    assert results["lance_format"][0] == results["lance"][0]
    assert results["lance_format"][1].equals(results["lance"][1])


def test_fragment_merge_columns_then_one_merge_commit(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    tables = {}
    for package, lib in LIBS.items():
        uri = str(tmp_path / f"mc_{package}")
        ds = lib.write_dataset(pa.table({"a": list(range(6)), "z": list(range(6))}), uri, max_rows_per_file=4)
        ds.delete("a = 1")
        frags = ds.get_fragments()
        first, schema = frags[0].merge_columns(
            lambda b: pa.record_batch([pc.multiply(b.column("a"), 2)], names=["b"]), columns=["a"])
        second, schema2 = frags[1].merge_columns({"b": "a * 2"})
        assert list(first.files[-1].fields) == list(second.files[-1].fields) == [2]
        op = lib.LanceOperation.Merge([first, second], schema)
        tables[package] = lib.LanceDataset.commit(uri, op, read_version=ds.version).to_table()
    assert tables["lance_format"].equals(tables["lance"])
