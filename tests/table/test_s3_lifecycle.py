"""A whole dataset lifecycle on S3 (moto), shared with pylance; concurrent appends all land."""

from __future__ import annotations

import threading

import lance
import pyarrow as pa
import pytest
from conftest_s3 import S3Server  # the s3_server / s3_uri fixtures come from tests/conftest.py

import lance_format as lf
from lance_format.errors import (
    DatasetAlreadyExistsError,
)

T = pa.table({"a": pa.array(range(10), pa.int64()), "s": [f"r{i}" for i in range(10)]})


def test_s3_whole_lifecycle_with_pylance(s3_server: S3Server, s3_uri: str) -> None:
    _e, _b, opts = s3_server
    lf.write_dataset(T, s3_uri, max_rows_per_file=4, storage_options=opts, commit_message="c")
    lf.write_dataset(T, s3_uri, mode="append", storage_options=opts)
    ours = lf.dataset(s3_uri, storage_options=opts)
    ours.delete("a in (0, 1, 2, 3, 9)")
    with pytest.raises(DatasetAlreadyExistsError):
        lf.write_dataset(T, s3_uri, storage_options=opts)
    theirs = lance.dataset(s3_uri, storage_options=opts)
    ours = lf.dataset(s3_uri, storage_options=opts)
    assert ours.version == theirs.version == 3
    assert ours.to_table().equals(theirs.to_table())
    assert ours.to_table().num_rows == 10
    assert ours.count_rows("a > 5") == theirs.count_rows("a > 5")
    assert ours.take([0, 5, 9]).equals(theirs.take([0, 5, 9]))
    assert [(v["version"], v["timestamp"], v["metadata"]) for v in ours.versions()] == [
        (v["version"], v["timestamp"], v["metadata"]) for v in theirs.versions()]
    # pylance appends + deletes on S3, we read
    lance.write_dataset(T.slice(0, 3), s3_uri, mode="append", storage_options=opts, data_storage_version="2.0")
    lance.dataset(s3_uri, storage_options=opts).delete("a = 4")
    ours = lf.dataset(s3_uri, storage_options=opts)
    assert ours.version == 5
    assert ours.to_table().equals(lance.dataset(s3_uri, storage_options=opts).to_table())
    # old versions + restore + tags on S3
    assert lf.dataset(s3_uri, version=1, storage_options=opts).to_table().equals(T)
    ours.tags.create("one", 1)
    assert lance.dataset(s3_uri, version="one", storage_options=opts).to_table().equals(T)
    lf.dataset(s3_uri, version="one", storage_options=opts).restore()
    assert lance.dataset(s3_uri, storage_options=opts).to_table().equals(T)
    lf.write_dataset(T.slice(0, 1), s3_uri, mode="overwrite", storage_options=opts)
    assert lance.dataset(s3_uri, storage_options=opts).to_table().equals(T.slice(0, 1))
    assert lance.dataset(s3_uri, storage_options=opts).version == 7


def test_s3_concurrent_appends_all_land(s3_server: S3Server, s3_uri: str) -> None:
    _e, _b, opts = s3_server
    lf.write_dataset(T.slice(0, 1), s3_uri, storage_options=opts)
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def append(k: int) -> None:
        barrier.wait()
        try:
            lf.write_dataset(pa.table({"a": pa.array([100 + k], pa.int64()), "s": [f"w{k}"]}), s3_uri,
                             mode="append", storage_options=opts)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    theirs = lance.dataset(s3_uri, storage_options=opts)
    assert theirs.version == 5
    assert sorted(theirs.to_table().column("a").to_pylist()) == [0, 100, 101, 102, 103]
    assert [v["version"] for v in lf.dataset(s3_uri, storage_options=opts).versions()] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("dsv", ["2.0", "2.2"])
def test_s3_take_count_and_scan_merge_nearby_ranges_into_few_requests(
    s3_server: S3Server, s3_uri: str, dsv: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from lance_format.storage.s3 import S3Store

    _e, _b, opts = s3_server
    rng = np.random.default_rng(5)
    n = 60_000
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "x": pa.array(rng.standard_normal(n)),
        "s": pa.array([f"value_{i}" for i in rng.integers(0, 1000, n)]),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 4, dtype=np.float32)), 4),
    })
    lance.write_dataset(table, s3_uri, max_rows_per_file=10_000, data_storage_version=dsv, storage_options=opts)
    theirs = lance.dataset(s3_uri, storage_options=opts)
    calls: list[tuple[str, int]] = []
    real = S3Store.read_range

    def counting(self: S3Store, key: str, start: int, length: int) -> bytes:
        calls.append((key, length))
        return real(self, key, start, length)

    monkeypatch.setattr(S3Store, "read_range", counting)
    idx = sorted(rng.choice(n, 300, replace=False).tolist())
    ours = lf.dataset(s3_uri, storage_options=opts)
    assert ours.take(idx).equals(theirs.take(idx))
    data_reads = [c for c in calls if c[0].endswith(".lance")]
    # 6 fragments x 4 columns x 50 scattered rows: at most a footer, one request a column and one
    # for the chunk metadata per fragment (merging ranges 4 KiB apart, as on disk: 167 on 2.0, 42 on 2.2)
    assert 0 < len(data_reads) <= 6 * (1 + 4 + 1), len(data_reads)
    assert ours.count_rows("x > 0.5") == theirs.count_rows("x > 0.5")
    assert ours.to_table().equals(theirs.to_table())
