"""Evolution on S3 (moto on loopback): merge_insert, update, add_columns, branches, read by pylance."""

from __future__ import annotations

import lance
import pyarrow as pa
from conftest_s3 import S3Server  # the s3_server / s3_uri fixtures come from tests/conftest.py

import lance_format


def test_evolution_on_s3_reads_the_same_in_pylance(s3_server: S3Server, s3_uri: str) -> None:
    _endpoint, _bucket, opts = s3_server
    base = pa.table({"id": list(range(10)), "v": [f"x{i}" for i in range(10)]})
    lance_format.write_dataset(base, s3_uri, max_rows_per_file=4, storage_options=opts)
    ds = lance_format.dataset(s3_uri, storage_options=opts)
    ds.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
        pa.table({"id": [1, 20], "v": ["u", "n"]}))
    ds.update({"v": "upper(v)"}, where="id > 7")
    ds.add_columns({"w": "id * 2"})
    ds.alter_columns({"path": "w", "name": "ww"})
    theirs = lance.dataset(s3_uri, storage_options=opts)
    assert theirs.version == ds.version == 5
    assert theirs.to_table(with_row_id=True).equals(ds.to_table(with_row_id=True))
    branch = ds.create_branch("dev")
    lance_format.write_dataset(pa.table({"id": [99], "v": ["b"], "ww": [198]}), branch.uri, mode="append",
                               storage_options=opts)
    on_branch = lance.dataset(s3_uri, storage_options=opts).checkout_version(("dev", None))
    assert on_branch.count_rows() == 12 and lance.dataset(s3_uri, storage_options=opts).count_rows() == 11
