"""A failed materialization leaves no dataset, no version and no files (checked with pylance 14.0.2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest
from dagster import DagsterInstance, asset, materialize

import lance_format
from lance_dagster import LanceIOManager


def _t(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": [float(i) for i in range(n)]})


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


def test_failing_first_materialization_creates_no_dataset(tmp_path: Path, instance: DagsterInstance) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))

    @asset(name="fresh")
    def fresh() -> pa.RecordBatchReader:
        def gen() -> Any:
            for k in range(5):
                yield _t(k * 10, 10).to_batches()[0]
            raise RuntimeError("source died")
        return pa.RecordBatchReader.from_batches(_t(0, 1).schema, gen())

    res = materialize([fresh], resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert not res.success
    uri = str(tmp_path / "fresh.lance")
    with pytest.raises(ValueError):
        lance.dataset(uri)
    with pytest.raises(lance_format.errors.DatasetNotFoundError):
        lance_format.dataset(uri)
    assert not res.get_asset_materialization_events()


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_midstream_failure_writes_no_version_and_no_files(tmp_path: Path, instance: DagsterInstance,
                                                          mode: str) -> None:
    io = LanceIOManager(root_uri=str(tmp_path))
    fail = {"now": False}

    @asset(name="stream", metadata={"mode": mode})
    def stream() -> pa.RecordBatchReader:
        def gen() -> Any:
            for k in range(6):
                yield _t(k * 4, 4).to_batches()[0]
                if fail["now"] and k == 3:
                    raise RuntimeError("connection reset")
        return pa.RecordBatchReader.from_batches(_t(0, 1).schema, gen())

    assert materialize([stream], resources={"io_manager": io}, instance=instance).success
    uri = str(tmp_path / "stream.lance")
    before = _files(uri)
    want = lance.dataset(uri).to_table()
    fail["now"] = True
    res = materialize([stream], resources={"io_manager": io}, instance=instance, raise_on_error=False)
    assert not res.success and not res.get_asset_materialization_events()
    assert lance.dataset(uri).version == 1 and lance.dataset(uri).to_table().equals(want)
    assert _files(uri) == before
