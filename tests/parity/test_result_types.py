"""What pylance 14.0.2 returns, ours returns: ``delete`` / ``update`` dicts (``DeleteResult`` /
``UpdateResult``), ``CleanupStats`` and ``CompactionMetrics`` attributes, ``DeletionFile.path``
with ``base_uri=``, and ``LanceFileReader.num_rows()`` as a method."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import lance
import lance.file
import pyarrow as pa
import pytest

import lance_format
import lance_format.file
from lance_format.dataset import CleanupStats, CompactionMetrics, DeleteResult, UpdateResult

LIBS = {"pylance": lance, "ours": lance_format}
T = pa.table({"x": pa.array(range(30), pa.int64())})


@pytest.fixture(autouse=True)
def _no_commit_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_FORMAT_COMMIT_GRACE", "0s")  # pylance's cleanup has no grace


def _story(lib: Any, uri: str) -> dict[str, Any]:
    ds = lib.write_dataset(T, uri, max_rows_per_file=10)
    deleted = ds.delete("x < 3")
    updated = ds.update({"x": "x + 100"}, where="x > 25")
    deletion = ds.get_fragments()[0].metadata.deletion_file
    compacted = ds.optimize.compact_files()
    cleaned = ds.cleanup_old_versions(older_than=dt.timedelta(0))
    stat_names = ("bytes_removed", "old_versions", "data_files_removed", "transaction_files_removed",
                  "index_files_removed", "deletion_files_removed", "failed_deletes")
    metric_names = ("fragments_removed", "fragments_added", "files_removed", "files_added")
    return {
        "delete": (type(deleted) is dict or isinstance(deleted, dict), deleted, json.dumps(deleted)),
        "update": (isinstance(updated, dict), updated, json.dumps(updated)),
        "deletion_path": (deletion.path(0).split("/")[0], deletion.path(0, base_uri=uri) ==
                          f"{uri.strip('/')}/{deletion.path(0)}"),
        "compaction": {n: getattr(compacted, n) for n in metric_names},
        "cleanup": {n: getattr(cleaned, n) for n in stat_names if n != "bytes_removed"},
    }


def test_results_have_pylances_types_keys_and_attributes(tmp_path: Path) -> None:
    got = {name: _story(lib, str(tmp_path / name)) for name, lib in LIBS.items()}
    assert got["ours"] == got["pylance"]
    assert got["ours"]["delete"][1] == {"num_deleted_rows": 3}
    assert got["ours"]["update"][1] == {"num_rows_updated": 4}


def test_our_results_are_typed_too(tmp_path: Path) -> None:
    ds = lance_format.write_dataset(T, str(tmp_path / "t"))
    deleted, updated = ds.delete("x < 3"), ds.update({"x": "x + 1"}, where="x > 25")
    assert isinstance(deleted, DeleteResult) and deleted.num_deleted_rows == 3
    assert isinstance(updated, UpdateResult) and updated.num_rows_updated == 4
    assert repr(deleted) == "{'num_deleted_rows': 3}"
    assert isinstance(ds.optimize.compact_files(), CompactionMetrics)
    assert isinstance(ds.cleanup_old_versions(older_than=dt.timedelta(0)), CleanupStats)


@pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])
def test_deletion_file_path_refuses_a_url_base(tmp_path: Path, lib: Any) -> None:
    ds = lib.write_dataset(T, str(tmp_path / "t"))
    ds.delete("x < 3")
    deletion = ds.get_fragments()[0].metadata.deletion_file
    with pytest.raises(ValueError, match="Invalid base URI"):
        deletion.path(0, base_uri="s3://bucket/t")


@pytest.mark.parametrize("lib", [lance, lance_format], ids=["pylance", "ours"])
def test_file_reader_num_rows_is_a_method(tmp_path: Path, lib: Any) -> None:
    path = str(tmp_path / "f.lance")
    with lib.file.LanceFileWriter(path, T.schema) as writer:
        writer.write_batch(T)
    reader = lib.file.LanceFileReader(path)
    assert reader.num_rows() == 30 and type(reader.num_rows()) is int
