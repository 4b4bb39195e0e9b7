"""Failed writes commit nothing: bad input, unknown flags, corrupt manifests, races."""

from __future__ import annotations

import threading
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format as lf
from lance_format.errors import (
    CommitConflictError,
    DatasetAlreadyExistsError,
    IncompatibleFeatureError,
    LanceError,
    PathEscapeError,
    SchemaError,
)

from .helpers import T, latest_manifest, split_manifest, state, write_manifest


def readers_see(uri: str) -> tuple[int, pa.Table, int, pa.Table]:
    ours, theirs = lf.dataset(uri), lance.dataset(uri)
    return ours.version, ours.to_table(), theirs.version, theirs.to_table()


def _bad_stream():  # type: ignore[no-untyped-def]
    yield T.to_batches()[0].slice(0, 3)
    yield T.to_batches()[0].slice(3, 3)
    raise RuntimeError("source failed mid-stream")


def _bad_reader() -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(T.schema, _bad_stream())


def _escape_commit(uri: str) -> None:
    frag = lf.FragmentMetadata(5, [lf.DataFile("../../x.lance", [0, 1], [0, 1])], 3)
    lf.LanceDataset.commit(uri, lf.LanceOperation.Append([frag]), read_version=1)


BAD = {
    "create_existing": (lambda uri: lf.write_dataset(T, uri), DatasetAlreadyExistsError),
    "append_wrong_type": (lambda uri: lf.write_dataset(
        pa.table({"a": ["x"], "s": ["y"]}), uri, mode="append"), SchemaError),
    "append_extra_column": (lambda uri: lf.write_dataset(
        pa.table({"a": pa.array([1], pa.int64()), "s": ["y"], "z": [1.0]}), uri, mode="append"), SchemaError),
    "append_failing_iterable": (lambda uri: lf.write_dataset(
        _bad_stream(), uri, mode="append", schema=T.schema, max_rows_per_file=2), RuntimeError),
    "append_failing_reader": (lambda uri: lf.write_dataset(
        _bad_reader(), uri, mode="append", max_rows_per_file=2), RuntimeError),
    "overwrite_failing_reader": (lambda uri: lf.write_dataset(
        _bad_reader(), uri, mode="overwrite", max_rows_per_file=2), RuntimeError),
    "path_escape_commit": (_escape_commit, PathEscapeError),
    "missing_version_commit": (lambda uri: lf.LanceDataset.commit(
        uri, lf.LanceOperation.Delete([], [0], "a > 0"), read_version=42), LanceError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_commits_nothing(tmp_path: Path, case: str) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri, max_rows_per_file=4)
    before, seen = state(uri), readers_see(uri)
    fn, exc = BAD[case]
    with pytest.raises(exc):
        fn(uri)
    assert state(uri) == before
    after = readers_see(uri)
    assert after[0] == after[2] == 1 and after[1].equals(seen[1]) and after[3].equals(seen[3])


def test_unknown_feature_flag_append_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    path = latest_manifest(uri)
    head, msg, _f = split_manifest(path.read_bytes())
    msg.writer_feature_flags |= 1 << 20
    body = msg.SerializeToString()
    write_manifest(path, head, body)
    before = state(uri)
    with pytest.raises(IncompatibleFeatureError, match=str(1 << 20)):
        lf.write_dataset(T, uri, mode="append")
    with pytest.raises(IncompatibleFeatureError):
        lf.dataset(uri).delete("a = 1")
    assert state(uri) == before


def test_corrupt_manifest_append_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri)
    path = latest_manifest(uri)
    path.write_bytes(path.read_bytes()[:-30])
    before = state(uri)
    with pytest.raises(LanceError, match=path.name):
        lf.write_dataset(T, uri, mode="append")
    assert state(uri) == before


def test_conflicting_concurrent_writer_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    lf.write_dataset(T, uri, max_rows_per_file=4)
    stale = lf.dataset(uri)
    lf.write_dataset(T.slice(0, 2), uri, mode="overwrite")  # v2 replaces every fragment
    before, seen = state(uri), readers_see(uri)
    with pytest.raises(CommitConflictError, match="(?i)overwrite"):
        stale.delete("a = 1")
    after = state(uri)
    assert after["versions"] == before["versions"] and after["hint"] == before["hint"]
    assert after["txns"] == before["txns"] and after["data"] == before["data"]
    # the loser's deletion file (if any was written) is not referenced by any reader
    now = readers_see(uri)
    assert now[0] == now[2] == 2 and now[1].equals(seen[1]) and now[3].equals(seen[3])
    assert after["deletions"] == before["deletions"], "orphan deletion file left by the losing delete"


def test_racing_creates_one_wins_clearly(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def create(k: int) -> None:
        barrier.wait()
        try:
            lf.write_dataset(T.slice(k, 1), uri)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=create, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(errors) == 3 and all(isinstance(e, LanceError) for e in errors)
    assert lance.dataset(uri).version == 1 and lance.dataset(uri).count_rows() == 1
    assert len(state(uri)["versions"]) == 1
