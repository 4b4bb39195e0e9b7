"""An IVF_RQ index built on Spark executors (SparkRunner) is the local build, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index import build as index_build
from lance_format.index.store import IndexDir
from lance_format.index.vector.layout import RQStorage, read_segment
from lance_format.maintenance.runner import LocalRunner


@pytest.mark.slow
def test_spark_rq_build_equals_local_build(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_format.spark import SparkRunner

    monkeypatch.setattr(index_build, "TASK_ROWS", 1000)  # one encode task per fragment
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3000, 32)).astype(np.float32)
    tbl = pa.table({"id": np.arange(3000), "vec": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 32)})
    segs = []
    for name, runner in (("local", LocalRunner()), ("spark", SparkRunner(spark))):
        uri = str(tmp_path / name)
        shutil.rmtree(uri, ignore_errors=True)
        lance.write_dataset(tbl, uri, max_rows_per_file=1000)
        lance_format.dataset(uri).create_index("vec", "IVF_RQ", num_partitions=4, runner=runner)
        ds = lance_format.dataset(uri)
        segs.append(read_segment(IndexDir(ds._store, ds.manifest.indices[0].uuid)))
        assert "ANNSubIndex" in str(lance.dataset(uri).scanner(
            nearest={"column": "vec", "q": x[0], "k": 5}, columns=["id"]).explain_plan())
    local, remote = segs
    assert np.array_equal(local.centroids, remote.centroids) and np.array_equal(local.row_ids, remote.row_ids)
    assert isinstance(local.storage, RQStorage) and isinstance(remote.storage, RQStorage)
    assert local.storage.metadata == remote.storage.metadata  # the same rotation signs
    assert local.storage.columns.equals(remote.storage.columns)
