"""The table layer on S3 (moto): our writes read by pylance and vice versa."""

from __future__ import annotations

import lance
import pyarrow as pa
from conftest_s3 import S3Server  # the s3_server / s3_uri fixtures come from tests/conftest.py

import lance_format as lf


def test_s3_roundtrip_with_pylance(s3_server: S3Server, s3_uri: str) -> None:
    _endpoint, _bucket, opts = s3_server
    t = pa.table({"a": pa.array(range(20), pa.int64()), "s": [f"v{i}" for i in range(20)]})
    lf.write_dataset(t, s3_uri, max_rows_per_file=8, storage_options=opts)
    lf.dataset(s3_uri, storage_options=opts).delete("a < 3")
    theirs = lance.dataset(s3_uri, storage_options=opts)
    assert theirs.version == 2 and theirs.to_table().equals(t.slice(3))
    lance.write_dataset(t.slice(0, 2), s3_uri, mode="append", storage_options=opts, data_storage_version="2.0")
    ours = lf.dataset(s3_uri, storage_options=opts)
    assert ours.version == 3
    assert ours.to_table().equals(lance.dataset(s3_uri, storage_options=opts).to_table())
    assert [v["version"] for v in ours.versions()] == [1, 2, 3]
