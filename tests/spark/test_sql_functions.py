"""Lance maintenance and metadata from SQL: lance_optimize, lance_vacuum, lance_create_index, lance_versions."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import lance
import pyarrow as pa
import pytest

import lance_format

pytestmark = pytest.mark.slow


def _twins(tmp_path: Path) -> tuple[str, str]:
    """Two identical pylance datasets: small fragments, deletions, several versions."""
    uris = []
    for name in ("local", "sql"):
        uri = str(tmp_path / f"{name}.lance")
        lance.write_dataset(pa.table({"id": pa.array(range(50), pa.int64()), "cat": [f"c{i % 4}" for i in range(50)]}),
                            uri, max_rows_per_file=7)
        lance.dataset(uri).delete("id % 6 = 0")
        uris.append(uri)
    return uris[0], uris[1]


def test_lance_optimize_returns_the_local_compactions_metrics(spark: Any, tmp_path: Path) -> None:
    local_uri, sql_uri = _twins(tmp_path)
    local = lance_format.dataset(local_uri).optimize.compact_files(target_rows_per_fragment=20)
    df = spark.sql(f"SELECT * FROM lance_optimize('{sql_uri}', target_rows_per_fragment => 20)")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("fragments_removed", "bigint"), ("fragments_added", "bigint"), ("files_removed", "bigint"),
        ("files_added", "bigint"), ("version", "bigint")]
    (row,) = df.collect()
    assert (row.fragments_removed, row.fragments_added, row.files_removed, row.files_added) == \
        dataclasses.astuple(local)[:4]
    assert row.version == lance.dataset(sql_uri).version == lance.dataset(local_uri).version
    assert lance.dataset(sql_uri).to_table().equals(lance.dataset(local_uri).to_table())
    with pytest.raises(Exception, match="nonsense"):
        spark.sql(f"SELECT * FROM lance_optimize('{sql_uri}', nonsense => 1)").collect()


def test_lance_vacuum_returns_the_local_cleanups_statistics(spark: Any, tmp_path: Path) -> None:
    local_uri, sql_uri = _twins(tmp_path)
    for uri in (local_uri, sql_uri):
        lance_format.dataset(uri).optimize.compact_files(target_rows_per_fragment=100)
    local = lance_format.dataset(local_uri).cleanup_old_versions(older_than=dt.timedelta(0),
                                                                commit_grace=dt.timedelta(0))
    # byte counts differ between the twins by a few manifest bytes (timestamps): a dry run of
    # the same dataset gives the exact figure
    planned = lance_format.dataset(sql_uri).cleanup_old_versions(older_than=dt.timedelta(0), dry_run=True,
                                                                  commit_grace=dt.timedelta(0))
    (row,) = spark.sql(f"SELECT * FROM lance_vacuum('{sql_uri}', older_than => INTERVAL 0 SECONDS, "
                       "commit_grace => 0)").collect()
    assert (row.bytes_removed, row.old_versions, row.data_files_removed, row.deletion_files_removed,
            row.transaction_files_removed, row.index_files_removed) == (
        planned.bytes_removed, local.old_versions, local.data_files_removed, local.deletion_files_removed,
        local.transaction_files_removed, local.index_files_removed)
    assert [v["version"] for v in lance.dataset(sql_uri).versions()] == \
        [v["version"] for v in lance.dataset(local_uri).versions()]


def test_lance_vacuum_before_version_keeps_that_version_and_later(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "v.lance")
    lance.write_dataset(pa.table({"id": [0]}), uri)
    for i in range(1, 5):
        lance.write_dataset(pa.table({"id": [i]}), uri, mode="append")
    (row,) = spark.sql(f"SELECT * FROM lance_vacuum('{uri}', before_version => 3, commit_grace => 0)").collect()
    assert row.old_versions == 2
    assert [v["version"] for v in lance.dataset(uri).versions()] == [3, 4, 5]


def test_lance_create_index_builds_the_index_pylance_uses(spark: Any, tmp_path: Path) -> None:
    _local, uri = _twins(tmp_path)
    (row,) = spark.sql(f"SELECT * FROM lance_create_index('{uri}', 'cat', index_type => 'bitmap', "
                       "name => 'cat_bm')").collect()
    ds = lance.dataset(uri)
    (info,) = ds.list_indices()
    assert (row.index_name, row.fragments_indexed, row.version) == ("cat_bm", len(info["fragment_ids"]), ds.version)
    assert info["type"] == "Bitmap" and info["fields"] == ["cat"]
    assert ds.to_table(filter="cat = 'c1'").num_rows == ds.to_table().to_pandas().query("cat == 'c1'").shape[0]


def test_lance_versions_lists_pylances_versions_and_tags(spark: Any, tmp_path: Path) -> None:
    _local, uri = _twins(tmp_path)
    lance.dataset(uri).tags.create("first", 1)
    rows = spark.sql(f"SELECT * FROM lance_versions('file:{uri}') ORDER BY version").collect()
    expected = lance.dataset(uri).versions()
    assert [r.version for r in rows] == [v["version"] for v in expected]
    assert [r.total_rows for r in rows] == [lance.dataset(uri, version=v["version"]).count_rows() for v in expected]
    assert [r.operation for r in rows] == ["overwrite", "delete"]
    assert [r.tags for r in rows] == [["first"], []]
    assert [r.timestamp for r in rows] == [v["timestamp"] for v in expected]
