"""The Structured Streaming sink: one commit per micro-batch, exactly once across restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lance_format
from lance_format.spark.streaming import BATCH_ID_KEY, STREAM_ID_KEY

from .helpers import data_files

pytestmark = pytest.mark.slow


def _run_once(spark: Any, source: Path, checkpoint: Path, uri: str) -> None:
    stream = spark.readStream.schema("id long, name string").parquet(str(source))
    query = (stream.writeStream.format("lance").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(uri))
    query.awaitTermination(120)
    assert query.exception() is None


def _batch_ids(uri: str) -> list[str]:
    ds = lance_format.dataset(uri)
    ids = []
    for version in range(1, ds.version + 1):
        txn = ds.read_transaction(version)
        assert txn is not None
        ids.append(txn.transaction_properties[BATCH_ID_KEY])
    return ids


def test_each_micro_batch_commits_once_across_restarts(spark: Any, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ckpt", str(tmp_path / "sink.lance")
    source.mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), source / "f1.parquet")
    _run_once(spark, source, checkpoint, uri)
    assert lance.dataset(uri).version == 1
    assert _batch_ids(uri) == ["0"]
    txn = lance_format.dataset(uri).read_transaction()
    assert txn is not None and txn.transaction_properties[STREAM_ID_KEY]

    # Crash after the Lance commit but before Spark recorded the batch: Spark replays batch 0.
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    files = data_files(uri)
    _run_once(spark, source, checkpoint, uri)
    assert lance.dataset(uri).version == 1  # the replay was not committed twice
    assert data_files(uri) == files  # and its files were removed
    assert sorted(lance.dataset(uri).to_table().column("id").to_pylist()) == [1, 2, 3]

    # A restart with new input commits the next batch.
    pq.write_table(pa.table({"id": [4, 5], "name": ["d", "e"]}), source / "f2.parquet")
    _run_once(spark, source, checkpoint, uri)
    assert _batch_ids(uri) == ["0", "1"]
    assert sorted(lance.dataset(uri).to_table().column("id").to_pylist()) == [1, 2, 3, 4, 5]


def test_a_stream_without_an_id_is_refused(spark: Any, tmp_path: Path) -> None:
    stream = spark.readStream.format("rate").load()
    with pytest.raises(Exception, match="checkpointLocation"):
        query = stream.writeStream.format("lance").start(str(tmp_path / "x.lance"))
        query.awaitTermination(30)
        raise AssertionError(str(query.exception()))
