"""``spark.readStream.format("lance")``: versions as offsets, appended rows exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.spark.streaming import BATCH_ID_KEY

pytestmark = pytest.mark.slow


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


def _run(spark: Any, uri: str, sink: str, checkpoint: Path, **options: str) -> Any:
    """One ``availableNow`` run of a Lance → Lance stream; returns the finished query."""
    reader = spark.readStream.format("lance")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load(uri).writeStream.format("lance").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(sink))
    try:
        query.awaitTermination(180)
    except Exception:  # noqa: BLE001  (a failed query: the caller checks query.exception())
        assert query.exception() is not None
    return query


def _ids(uri: str) -> list[int]:
    return sorted(lance.dataset(uri).to_table(columns=["id"]).column("id").to_pylist())


def test_snapshot_then_appends_exactly_once_across_restarts(spark: Any, tmp_path: Path) -> None:
    uri, sink, ckpt = str(tmp_path / "src.lance"), str(tmp_path / "sink.lance"), tmp_path / "ckpt"
    lance.write_dataset(_rows(25), uri, max_rows_per_file=10)
    lance.dataset(uri).delete("id % 4 = 1")                            # before the stream: in the snapshot
    q = _run(spark, uri, sink, ckpt)
    assert q.exception() is None
    assert _ids(sink) == _ids(uri)

    lance.write_dataset(_rows(7, start=100), uri, mode="append")        # v3: delivered
    lance.dataset(uri).optimize.compact_files(target_rows_per_fragment=1000)   # v4: same rows
    lance.dataset(uri).create_scalar_index("id", "BTREE")               # v5: same rows
    lance.write_dataset(_rows(3, start=200), uri, mode="append")        # v6: delivered
    assert _run(spark, uri, sink, ckpt).exception() is None
    assert _ids(sink) == _ids(uri)
    sink_version = lance.dataset(sink).version

    assert _run(spark, uri, sink, ckpt).exception() is None             # nothing new: no batch
    assert lance.dataset(sink).version == sink_version

    # A crash after the sink committed but before Spark recorded the batch: Spark replays the
    # batch's offsets (the same versions), and neither side delivers a row twice.
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    (ckpt / "commits" / str(last)).unlink()
    (ckpt / "commits" / f".{last}.crc").unlink(missing_ok=True)
    assert _run(spark, uri, sink, ckpt).exception() is None
    assert _ids(sink) == _ids(uri) and lance.dataset(sink).version == sink_version


def test_change_commits_fail_the_stream_unless_skipped(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "src.lance")
    lance.write_dataset(_rows(10), uri)
    assert _run(spark, uri, str(tmp_path / "a.lance"), tmp_path / "ca").exception() is None
    lance.dataset(uri).delete("id < 3")                                  # v2: a change
    lance.write_dataset(_rows(2, start=50), uri, mode="append")          # v3
    failed = _run(spark, uri, str(tmp_path / "a.lance"), tmp_path / "ca")
    assert "version 2 is a Delete" in str(failed.exception())
    assert "skip_change_commits" in str(failed.exception())

    from_start = _run(spark, uri, str(tmp_path / "b.lance"), tmp_path / "cb", starting_version="1")
    assert "version 2 is a Delete" in str(from_start.exception())
    skipped = str(tmp_path / "c.lance")
    q = _run(spark, uri, skipped, tmp_path / "cc", starting_version="1", skip_change_commits="true")
    assert q.exception() is None
    assert _ids(skipped) == list(range(10)) + [50, 51]                   # v1 and v3; v2 skipped


def test_starting_version_streams_each_appending_version(spark: Any, tmp_path: Path) -> None:
    uri, sink = str(tmp_path / "src.lance"), str(tmp_path / "sink.lance")
    lance.write_dataset(_rows(5), uri)                                   # v1: before the start
    lance.write_dataset(_rows(4, start=10), uri, mode="append")         # v2
    new = _rows(3, start=20)
    lance.dataset(uri).merge_insert("id").when_not_matched_insert_all().execute(new)   # v3: inserts only
    q = _run(spark, uri, sink, tmp_path / "ckpt", starting_version="2")
    assert q.exception() is None
    assert _ids(sink) == [10, 11, 12, 13, 20, 21, 22]
    # pylance's rows of the versions the stream read, column for column
    got = lance.dataset(sink).to_table().sort_by("id")
    assert got.equals(lance.dataset(uri).to_table(filter="id >= 10").sort_by("id"))


def test_max_rows_per_trigger_admits_whole_versions(spark: Any, tmp_path: Path) -> None:
    uri, sink = str(tmp_path / "src.lance"), str(tmp_path / "sink.lance")
    lance.write_dataset(_rows(2), uri)
    for start in (10, 20, 30):
        lance.write_dataset(_rows(2, start=start), uri, mode="append")
    q = _run(spark, uri, sink, tmp_path / "ckpt", starting_version="1", max_rows_per_trigger="5")
    assert q.exception() is None
    ds = lance_format.dataset(sink)
    sizes = []
    for version in range(1, ds.version + 1):
        txn = ds.read_transaction(version)
        assert txn is not None and BATCH_ID_KEY in txn.transaction_properties
        sizes.append(ds.checkout_version(version).count_rows() - (sizes and sum(sizes) or 0))
    assert sizes == [4, 4]                                                # two versions (4 rows) per batch
    assert _ids(sink) == [0, 1, 10, 11, 20, 21, 30, 31]


def test_batch_only_options_are_refused_for_streams(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "src.lance")
    lance.write_dataset(_rows(3), uri)
    with pytest.raises(Exception, match="batch reads only"):
        q = _run(spark, uri, str(tmp_path / "s.lance"), tmp_path / "ckpt", version="1")
        raise AssertionError(str(q.exception()))
