"""Cleanup reads only what it needs of each manifest, and still removes exactly what pylance removes.

Datasets hold every kind of file a version references (data files, deletion files, transaction
files, index segments); the same bytes are cleaned by pylance 14.0.2 and by us, locally and on the
loopback S3 server, and the files left and the statistics must agree.
"""

from __future__ import annotations

import datetime as dt
import shutil
import uuid
from pathlib import Path
from typing import Any

import boto3
import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.table.codec import fragments as fragment_codec

_STATS = ("old_versions", "bytes_removed", "data_files_removed", "deletion_files_removed",
          "transaction_files_removed", "index_files_removed")


def _build(uri: str, options: dict[str, str] | None = None) -> None:
    """Appends, deletes (one drops a whole fragment), a scalar index rebuilt: every kind of referenced file."""
    opts: dict[str, Any] = {"storage_options": options} if options else {}
    lance.write_dataset(pa.table({"id": list(range(50)), "s": [f"v{i}" for i in range(50)]}), uri, **opts)
    for v in range(1, 9):
        rows = range(v * 50, v * 50 + 50)
        lance.write_dataset(pa.table({"id": list(rows), "s": [f"v{i}" for i in rows]}), uri, mode="append", **opts)
        if v % 3 == 0:
            lance.dataset(uri, **opts).delete(f"id % 7 = {v}")
        if v in (4, 7):
            lance.dataset(uri, **opts).create_scalar_index("id", "BTREE", replace=True)
    lance.dataset(uri, **opts).delete("id < 50")  # drops the first fragment: its data file goes
    lance.write_dataset(pa.table({"id": [1], "s": ["x"]}), uri, mode="append", **opts)


def _stats(stats: Any) -> dict[str, int]:
    return {name: int(getattr(stats, name)) for name in _STATS}


def test_local_cleanup_leaves_the_files_pylance_leaves(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _build(str(src))
    shutil.copytree(src, tmp_path / "ours")
    shutil.copytree(src, tmp_path / "theirs")
    theirs = lance.dataset(str(tmp_path / "theirs")).cleanup_old_versions(older_than=dt.timedelta(0))
    ours = lance_format.dataset(str(tmp_path / "ours")).cleanup_old_versions(
        older_than=dt.timedelta(0), commit_grace=dt.timedelta(0))
    assert _stats(ours) == _stats(theirs)
    assert theirs.deletion_files_removed > 0 and theirs.index_files_removed > 0 and theirs.data_files_removed > 0

    def left(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    assert left(tmp_path / "ours") == left(tmp_path / "theirs")
    mine = lance_format.dataset(str(tmp_path / "ours"))
    assert mine.to_table().equals(lance.dataset(str(tmp_path / "theirs")).to_table())
    assert [i["name"] for i in mine.list_indices()] == ["id_idx"]


def test_cleanup_builds_no_fragment_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A manifest's fragments cost most of a cleanup when modelled; cleanup walks them raw.
    uri = str(tmp_path / "ds")
    _build(uri)
    ds = lance_format.dataset(uri)

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("cleanup decoded fragment models")

    monkeypatch.setattr(fragment_codec, "fragment_from_pb", refuse)
    stats = ds.cleanup_old_versions(older_than=dt.timedelta(0), commit_grace=dt.timedelta(0))
    assert stats.old_versions >= 10 and stats.deletion_files_removed > 0
    assert [v["version"] for v in lance.dataset(uri).versions()] == [stats.old_versions + 1]


def _s3_keys(endpoint: str, bucket: str, prefix: str) -> list[str]:
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    out: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        out += [str(o["Key"])[len(prefix) + 1:] for o in page.get("Contents", [])]
    return sorted(out)


def test_s3_cleanup_leaves_the_files_pylance_leaves(s3_server: Any) -> None:
    endpoint, bucket, options = s3_server
    run = uuid.uuid4().hex[:8]
    roots = {engine: f"{engine}-{run}" for engine in ("ours", "theirs")}
    for root in roots.values():  # the same builder twice: same files and versions on both sides
        _build(f"s3://{bucket}/{root}", options)
    before = {e: _s3_keys(endpoint, bucket, r) for e, r in roots.items()}
    assert len(before["ours"]) == len(before["theirs"])
    theirs = lance.dataset(f"s3://{bucket}/{roots['theirs']}", storage_options=options).cleanup_old_versions(
        older_than=dt.timedelta(0))
    ours = lance_format.dataset(f"s3://{bucket}/{roots['ours']}", storage_options=options).cleanup_old_versions(
        older_than=dt.timedelta(0), commit_grace=dt.timedelta(0))
    # data and index file names are random per build: compare the statistics and the kinds of files left
    assert {k: v for k, v in _stats(ours).items() if k != "bytes_removed"} == \
        {k: v for k, v in _stats(theirs).items() if k != "bytes_removed"}
    assert abs(ours.bytes_removed - theirs.bytes_removed) <= 0.02 * theirs.bytes_removed

    def shape(keys: list[str]) -> list[str]:
        return sorted(k.split("/", 1)[0] + ("/*" if "/" in k else "") for k in keys)

    after = {e: _s3_keys(endpoint, bucket, r) for e, r in roots.items()}
    assert shape(after["ours"]) == shape(after["theirs"])
    mine = lance_format.dataset(f"s3://{bucket}/{roots['ours']}", storage_options=options)
    other = lance.dataset(f"s3://{bucket}/{roots['theirs']}", storage_options=options)
    assert mine.to_table().sort_by("id").equals(other.to_table().sort_by("id"))
    assert [v["version"] for v in lance.dataset(f"s3://{bucket}/{roots['ours']}",
                                                storage_options=options).versions()] == \
        [v["version"] for v in other.versions()]
