"""batch_udf with a checkpoint file: a failed add_columns resumes without recomputing, as pylance 14.0.2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_format

lance = pytest.importorskip("lance")

LIBS = {"lance": lance, "lance_format": lance_format}
OUT = pa.schema([pa.field("b", pa.int64())])


def _run(package: str, tmp: Path, fail_from: int) -> dict[str, Any]:
    lib = LIBS[package]
    uri, checkpoint = str(tmp / f"{package}.lance"), tmp / f"{package}.sqlite"
    ds = lib.write_dataset(pa.table({"a": list(range(30))}), uri, max_rows_per_file=10)
    calls: list[int] = []
    failing = [True]

    @lib.batch_udf(output_schema=OUT, checkpoint_file=str(checkpoint))
    def double(batch: pa.RecordBatch) -> pa.RecordBatch:
        first = batch.column("a")[0].as_py()
        calls.append(first)
        if failing[0] and first >= fail_from:
            raise RuntimeError("boom")
        return pa.record_batch([pc.multiply(batch.column("a"), 2)], names=["b"])

    with pytest.raises(Exception, match="boom"):
        ds.add_columns(double, batch_size=5)
    first_calls, kept = list(calls), checkpoint.exists()
    calls.clear()
    failing[0] = False
    ds = lib.dataset(uri)
    ds.add_columns(double, batch_size=5)
    return {"first": first_calls, "kept": kept, "second": list(calls), "left": checkpoint.exists(),
            "version": ds.version, "table": ds.to_table(), "files": len(list((tmp / f"{package}.lance" / "data").iterdir()))}


@pytest.mark.parametrize("fail_from", [20, 25])
def test_resumes_from_the_checkpoint_like_pylance(tmp_path: Path, fail_from: int) -> None:
    theirs, ours = _run("lance", tmp_path, fail_from), _run("lance_format", tmp_path, fail_from)
    assert ours["first"] == theirs["first"]
    assert ours["second"] == theirs["second"]  # finished fragments and saved batches are not recomputed
    assert ours["kept"] is theirs["kept"] is True
    assert ours["left"] is theirs["left"] is False  # removed after the commit
    assert ours["version"] == theirs["version"] == 2
    assert ours["files"] == theirs["files"]
    assert ours["table"].equals(theirs["table"])


def test_batch_udf_without_checkpoint_and_its_call(tmp_path: Path) -> None:
    for package, lib in LIBS.items():
        ds = lib.write_dataset(pa.table({"a": [1, 2, 3]}), str(tmp_path / f"{package}.lance"))

        @lib.batch_udf()
        def plus(batch: pa.RecordBatch) -> pa.RecordBatch:
            return pa.record_batch([pc.add(batch.column("a"), 1)], names=["c"])

        assert type(plus).__name__ == "BatchUDF"
        assert plus(pa.record_batch([pa.array([5])], names=["a"])).column("c").to_pylist() == [6]
        ds.add_columns(plus)
        assert ds.to_table().column("c").to_pylist() == [2, 3, 4]


def test_checkpoint_tables_are_pylances(tmp_path: Path) -> None:
    import sqlite3

    from lance_format.evolution.udf import BatchUDFCheckpoint

    lance_udf = pytest.importorskip("lance.udf")
    lance_udf.BatchUDFCheckpoint(str(tmp_path / "t.sqlite"))
    BatchUDFCheckpoint(str(tmp_path / "o.sqlite"))

    def tables(path: Path) -> list[tuple[str, str]]:
        with sqlite3.connect(path) as conn:
            return sorted(conn.execute("SELECT name, sql FROM sqlite_master").fetchall())

    assert [n for n, _ in tables(tmp_path / "o.sqlite")] == [n for n, _ in tables(tmp_path / "t.sqlite")]
