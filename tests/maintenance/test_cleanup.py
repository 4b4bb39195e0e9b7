"""Version cleanup: same versions, files and figures as pylance; dry runs, tags, unverified files, races."""

from __future__ import annotations

import datetime as dt
import os
import pickle
import shutil
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import lance_format
from lance_format.cleanup import (
    COMMIT_GRACE,
    COMMIT_GRACE_ENV,
    CleanupStats,
    cleanup_old_versions,
    delete_old_manifests,
    execute_cleanup_batch,
    finish_cleanup,
    plan_cleanup,
    refresh_plan,
)
from lance_format.errors import CleanupError, InvalidInputError
from lance_format.maintenance import LocalRunner

from .helpers import assert_same_at_every_version, table

ZERO = dt.timedelta(0)


@pytest.fixture(autouse=True)
def _no_commit_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """pylance has no commit grace, and these tests compare with it: cleanups here run with a grace of 0.

    The tests of the grace itself (``test_*grace*``) remove the variable again.
    """
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")


def _history(path: Path, dsv: str, stable: bool, *, writer: str = "ours") -> str:
    """Appends, an overwrite, deletes and a compaction: every kind of file cleanup handles."""
    uri = str(path)
    w = lance_format.write_dataset if writer == "ours" else lance.write_dataset
    w(table(0, 50), uri, mode="create", data_storage_version=dsv, enable_stable_row_ids=stable)  # type: ignore[operator]
    w(table(50, 50), uri, mode="append")  # type: ignore[operator]
    (lance_format.dataset(uri) if writer == "ours" else lance.dataset(uri)).delete("id < 5")
    w(table(100, 50), uri, mode="overwrite")  # type: ignore[operator]
    w(table(150, 50), uri, mode="append")  # type: ignore[operator]
    (lance_format.dataset(uri) if writer == "ours" else lance.dataset(uri)).delete("id % 10 = 0")
    (lance_format.dataset(uri) if writer == "ours" else lance.dataset(uri)).delete("id % 10 = 1")
    lance.dataset(uri).optimize.compact_files()
    return uri


def _files(uri: str) -> set[str]:
    return {str(p.relative_to(uri)) for p in Path(uri).rglob("*") if p.is_file()}


def _twins(tmp_path: Path, dsv: str, stable: bool, writer: str = "ours") -> tuple[str, str]:
    a = _history(tmp_path / "a", dsv, stable, writer=writer)
    b = str(tmp_path / "b")
    shutil.copytree(a, b)  # copy2 keeps the modification times
    return a, b


def _figures(s: object) -> tuple[int, ...]:
    return tuple(getattr(s, k) for k in ("bytes_removed", "old_versions", "data_files_removed",
                                         "deletion_files_removed", "transaction_files_removed",
                                         "index_files_removed"))


@pytest.mark.parametrize(("older_than", "retain"), [(ZERO, None), (None, 3), (ZERO, 3), (None, None)])
@pytest.mark.parametrize("writer", ["ours", "pylance"])
def test_cleanup_matches_pylance(tmp_path: Path, dsv: str, stable: bool, older_than: dt.timedelta | None,
                                 retain: int | None, writer: str) -> None:
    ours, theirs = _twins(tmp_path, dsv, stable, writer)
    mine = lance_format.dataset(ours).cleanup_old_versions(older_than, retain)
    pyl = lance.dataset(theirs).cleanup_old_versions(older_than, retain)
    assert _figures(mine) == _figures(pyl)
    assert _files(ours) == _files(theirs)
    assert_same_at_every_version(ours)
    assert len(mine.keys) == sum(_figures(mine)[1:])


def test_dry_run_reports_the_exact_keys_and_deletes_nothing(tmp_path: Path) -> None:
    uri, twin = _twins(tmp_path, "2.2", False)
    before = _files(uri)
    dry = lance_format.dataset(uri).cleanup_old_versions(ZERO, dry_run=True)
    assert dry.dry_run and dry.old_versions == 8 and dry.data_files_removed > 0
    assert _files(uri) == before
    real = lance_format.dataset(twin).cleanup_old_versions(ZERO)
    assert set(dry.keys) == set(real.keys) == before - _files(twin)
    assert _figures(dry) == _figures(real)


def test_tagged_old_version_is_an_error_before_anything_goes(tmp_path: Path) -> None:
    uri, twin = _twins(tmp_path, "2.2", False)
    lance_format.dataset(uri).tags.create("keep", 2)
    lance.dataset(twin).tags.create("keep", 2)
    before = _files(uri)
    with pytest.raises(CleanupError, match="keep"):
        lance_format.dataset(uri).cleanup_old_versions(ZERO)
    assert _files(uri) == before
    mine = lance_format.dataset(uri).cleanup_old_versions(ZERO, error_if_tagged_old_versions=False)
    pyl = lance.dataset(twin).cleanup_old_versions(ZERO, error_if_tagged_old_versions=False)
    assert _figures(mine) == _figures(pyl)
    assert [v["version"] for v in lance.dataset(uri).versions()] == [2, 9]
    assert lance.dataset(uri, version="keep").to_table().equals(lance_format.dataset(uri, version=2).to_table())


def test_a_branch_keeps_the_version_it_was_created_from(tmp_path: Path) -> None:
    uris = []
    for name in ("ours", "theirs"):  # built apart: a branch records its parent's absolute path
        uri = _history(tmp_path / name, "2.2", False)
        lance.dataset(uri).create_branch("br", 3)
        lance.dataset(uri).tags.create("on_branch", ("br", 3))
        uris.append(uri)
    # as pylance 14.0.2: a tag on a branch is no error for main; the branch keeps its base version
    mine = lance_format.dataset(uris[0]).cleanup_old_versions(ZERO)
    pyl = lance.dataset(uris[1]).cleanup_old_versions(ZERO)
    assert _figures(mine)[1:] == _figures(pyl)[1:]
    assert [v["version"] for v in lance.dataset(uris[0]).versions()] == \
        [v["version"] for v in lance.dataset(uris[1]).versions()] == [3, 9]
    assert lance.dataset(uris[0], version="on_branch").count_rows() == 95
    branch = lance.dataset(uris[0]).checkout_version(("br", 3)).to_table()
    assert branch.equals(lance_format.dataset(uris[0], version=3).to_table())


def test_unverified_files_wait_seven_days_and_other_files_are_never_touched(tmp_path: Path) -> None:
    uri = _history(tmp_path / "d", "2.2", False)
    week_ago = time.time() - 8 * 86400
    for name in ("data/old-orphan.lance", "data/new-orphan.lance", "notes.txt", "data/readme.md",
                 "_refs/other.json", "_indices/abc/part.idx"):
        p = Path(uri) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * 10)
        # "new": younger than 7 days but older than every kept manifest (else it may be in flight)
        when = time.time() - 3 * 86400 if "new" in name else week_ago
        os.utime(p, (when, when))
    stats = lance_format.dataset(uri).cleanup_old_versions(ZERO)
    assert "data/old-orphan.lance" in stats.keys and "_indices/abc/part.idx" in stats.keys
    assert (Path(uri) / "data/new-orphan.lance").exists()
    stats = lance_format.dataset(uri).cleanup_old_versions(ZERO, delete_unverified=True)
    assert stats.keys == ("data/new-orphan.lance",)
    in_flight = Path(uri) / "data/just-written.lance"
    in_flight.write_bytes(b"x")
    assert lance_format.dataset(uri).cleanup_old_versions(ZERO).keys == ()
    assert in_flight.exists()
    # delete_unverified vouches that nothing is in flight: it goes, as with pylance 14.0.2
    twin = str(tmp_path / "twin")
    shutil.copytree(uri, twin)
    assert lance_format.dataset(uri).cleanup_old_versions(ZERO, delete_unverified=True).keys == \
        ("data/just-written.lance",)
    assert lance.dataset(twin).cleanup_old_versions(ZERO, delete_unverified=True).data_files_removed == 1
    assert _files(uri) == _files(twin)
    for name in ("notes.txt", "data/readme.md", "_refs/other.json"):
        assert (Path(uri) / name).exists()
    assert_same_at_every_version(uri)


def test_old_index_of_a_pylance_dataset_goes_with_its_versions(tmp_path: Path) -> None:
    uri = str(tmp_path / "d")
    lance.write_dataset(table(0, 300), uri)
    lance.dataset(uri).create_scalar_index("id", "BTREE")
    lance.write_dataset(table(300, 10), uri, mode="append")
    lance.dataset(uri).create_scalar_index("id", "BTREE", replace=True)
    twin = str(tmp_path / "twin")
    shutil.copytree(uri, twin)
    mine = lance_format.dataset(uri).cleanup_old_versions(ZERO)
    pyl = lance.dataset(twin).cleanup_old_versions(ZERO)
    assert mine.index_files_removed > 0
    assert _figures(mine) == _figures(pyl)
    assert _files(uri) == _files(twin)
    ds = lance.dataset(uri)
    ds.validate()
    assert ds.to_table(filter="id = 305")["id"].to_pylist() == [305]


def test_a_commit_racing_the_cleanup_keeps_what_it_references(tmp_path: Path) -> None:
    uri = _history(tmp_path / "d", "2.2", False)
    ds = lance_format.dataset(uri)
    plan = plan_cleanup(ds, ZERO)
    assert 2 in plan.removed_versions
    lance_format.dataset(uri, version=2).restore()  # a new version that uses version 2's files
    plan = refresh_plan(plan)
    assert plan.protected
    gone = delete_old_manifests(plan)
    deleted = LocalRunner(2).map(execute_cleanup_batch, plan.batches(2))
    stats = finish_cleanup(plan, deleted, gone)
    assert not set(stats.keys) & plan.protected
    assert [v["version"] for v in lance.dataset(uri).versions()] == [9, 10]
    lance.dataset(uri).validate()
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == list(range(100))
    assert_same_at_every_version(uri)


def test_cleanup_through_a_runner_reports_what_it_deleted(tmp_path: Path) -> None:
    uri, twin = _twins(tmp_path, "2.0", True)
    via_runner = cleanup_old_versions(lance_format.dataset(uri), ZERO, runner=LocalRunner(2), batch_size=3)
    inline = lance_format.dataset(twin).cleanup_old_versions(ZERO)
    assert _figures(via_runner) == _figures(inline)
    assert _files(uri) == _files(twin)


def test_nothing_old_means_nothing_removed(tmp_path: Path) -> None:
    uri = _history(tmp_path / "d", "2.2", False)
    before = _files(uri)
    assert _figures(lance_format.dataset(uri).cleanup_old_versions()) == _figures(CleanupStats())
    assert _files(uri) == before


@pytest.mark.parametrize(("older_than", "retain"), [(None, 0), (dt.timedelta(days=-1), None)])
def test_bad_policy_is_refused(tmp_path: Path, older_than: dt.timedelta | None, retain: int | None) -> None:
    uri = _history(tmp_path / "d", "2.2", False)
    with pytest.raises(InvalidInputError):
        lance_format.dataset(uri).cleanup_old_versions(older_than, retain)


def test_auto_cleanup_config_is_honoured_like_pylance(tmp_path: Path) -> None:
    seen = {}
    for who in ("ours", "pylance"):
        uri = str(tmp_path / who)
        lance.write_dataset(pa.table({"x": [0]}), uri,
                            auto_cleanup_options={"interval": 3, "older_than_seconds": 0})
        for i in range(6):
            w = lance_format.write_dataset if who == "ours" else lance.write_dataset
            w(pa.table({"x": [i]}), uri, mode="append")  # type: ignore[operator]
        seen[who] = [v["version"] for v in lance.dataset(uri).versions()]
    assert seen["ours"] == seen["pylance"] == [5, 6, 7]


def test_auto_cleanup_runs_after_every_kind_of_commit(tmp_path: Path) -> None:
    # lance runs its cleanup hook in the commit path, so deletes, column changes, updates and
    # index builds count as much as appends; ours is called from the one commit loop too.
    seen = {}
    for who in ("ours", "pylance"):
        uri = str(tmp_path / who)
        lance.write_dataset(pa.table({"x": list(range(10))}), uri,
                            auto_cleanup_options={"interval": 2, "older_than_seconds": 0})
        open_ = lance_format.dataset if who == "ours" else lance.dataset
        open_(uri).delete("x = 0")  # v2
        open_(uri).add_columns({"y": "x * 2"})  # v3
        open_(uri).update({"y": "y + 1"}, where="x = 5")  # v4
        open_(uri).create_scalar_index("x", "BTREE")  # v5
        open_(uri).alter_columns({"path": "y", "name": "z"})  # v6
        seen[who] = [v["version"] for v in lance.dataset(uri).versions()]
        assert lance.dataset(uri).to_table().column("z").to_pylist() == \
            lance_format.dataset(uri).to_table().column("z").to_pylist()
    assert seen["ours"] == seen["pylance"]
    assert seen["ours"][0] > 1  # something was cleaned up


# -- commit grace (beyond pylance) ----------------------------------------------------


def _appends(path: Path, n: int) -> str:
    uri = str(path)
    for i in range(n):
        lance_format.write_dataset(table(10 * i, 10), uri, mode="append" if i else "create")
        time.sleep(0.02)  # distinct commit timestamps
    return uri


def _stamps(uri: str) -> list[dt.datetime]:
    return [lance_format.dataset(uri, version=v).manifest.timestamp for v in range(1, lance_format.dataset(uri).version + 1)]


def test_versions_superseded_within_the_grace_stay_whatever_the_policy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMMIT_GRACE_ENV)
    uri = _appends(tmp_path / "d", 4)
    before = _files(uri)
    for older_than, retain in ((ZERO, None), (None, 1), (ZERO, 1)):
        stats = lance_format.dataset(uri).cleanup_old_versions(older_than, retain, delete_unverified=True)
        assert _figures(stats) == _figures(CleanupStats())
    assert _files(uri) == before
    # pylance, on a copy, removes them all at once
    twin = str(tmp_path / "twin")
    shutil.copytree(uri, twin)
    assert lance.dataset(twin).cleanup_old_versions(ZERO).old_versions == 3


def test_grace_keeps_a_commit_in_flight_landing_on_the_version_it_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMMIT_GRACE_ENV)
    uri = _appends(tmp_path / "d", 2)
    reader = lance_format.dataset(uri, version=1)  # a writer read version 1 ...
    lance_format.write_dataset(table(100, 10), uri, mode="append")  # ... others commit meanwhile ...
    cleanup_old_versions(lance_format.dataset(uri), ZERO)  # ... and a cleanup runs
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3]
    reader.delete("id < 5")  # its commit can still check versions 2 and 3
    assert sorted(lance.dataset(uri).to_table()["id"].to_pylist()) == [*range(5, 20), *range(100, 110)]
    assert_same_at_every_version(uri)


def test_only_versions_superseded_longer_ago_than_the_grace_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMMIT_GRACE_ENV)
    uri = _appends(tmp_path / "d", 4)
    t = _stamps(uri)
    ds = lance_format.dataset(uri)
    # Version 2 was the latest until version 3 came, within the grace: 2, 3 and 4 stay.
    now = t[2] + COMMIT_GRACE - (t[2] - t[1]) / 2
    assert plan_cleanup(ds, ZERO, now=now).removed_versions == (1,)
    assert plan_cleanup(ds, ZERO, now=t[3] + COMMIT_GRACE + dt.timedelta(seconds=1)).removed_versions == (1, 2, 3)
    assert plan_cleanup(ds, None, 1, now=t[3], commit_grace=dt.timedelta(hours=1)).removed_versions == ()
    # the grace does not override a longer older_than
    assert plan_cleanup(ds, dt.timedelta(days=1), now=t[3] + COMMIT_GRACE * 2).removed_versions == ()


def test_grace_comes_from_the_argument_then_the_environment_then_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _appends(tmp_path / "d", 3)
    ds = lance_format.dataset(uri)
    assert plan_cleanup(ds, ZERO).removed_versions == (1, 2)  # the fixture's 0s
    monkeypatch.setenv(COMMIT_GRACE_ENV, "1h")
    assert plan_cleanup(ds, ZERO).removed_versions == ()
    assert plan_cleanup(ds, ZERO, commit_grace=ZERO).removed_versions == (1, 2)
    monkeypatch.delenv(COMMIT_GRACE_ENV)
    assert plan_cleanup(ds, ZERO).removed_versions == ()
    assert cleanup_old_versions(ds, ZERO, dry_run=True).old_versions == 0


@pytest.mark.parametrize("grace", [dt.timedelta(seconds=-1), 5, "5min", True])
def test_bad_commit_grace_is_refused(tmp_path: Path, grace: object) -> None:
    uri = _appends(tmp_path / "d", 2)
    with pytest.raises(InvalidInputError, match="commit_grace"):
        plan_cleanup(lance_format.dataset(uri), ZERO, commit_grace=grace)  # type: ignore[arg-type]


def test_bad_commit_grace_variable_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = _appends(tmp_path / "d", 2)
    monkeypatch.setenv(COMMIT_GRACE_ENV, "soon")
    with pytest.raises(InvalidInputError, match=COMMIT_GRACE_ENV):
        lance_format.dataset(uri).cleanup_old_versions(ZERO)


def test_auto_cleanup_keeps_the_grace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMMIT_GRACE_ENV)
    uri = str(tmp_path / "d")
    lance.write_dataset(pa.table({"x": [0]}), uri, auto_cleanup_options={"interval": 1, "older_than_seconds": 0})
    for i in range(4):
        lance_format.write_dataset(pa.table({"x": [i]}), uri, mode="append")
    assert [v["version"] for v in lance.dataset(uri).versions()] == [1, 2, 3, 4, 5]


# -- reprs ----------------------------------------------------------------------------


def test_plan_and_batch_reprs_mask_storage_options(tmp_path: Path) -> None:
    uri = _appends(tmp_path / "d", 3)
    secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
    ds = lance_format.dataset(uri, storage_options={"aws_secret_access_key": secret, "region": "eu-west-1"})
    plan = plan_cleanup(ds, ZERO, delete_unverified=True)
    batches = plan.batches(1)
    assert batches and plan.storage_options == {"aws_secret_access_key": secret, "region": "eu-west-1"}
    for obj in (plan, batches[0], [plan, *batches]):
        shown = repr(obj) + str(obj)
        assert secret not in shown
        assert "eu-west-1" in shown and "***" in shown
    assert batches[0].keys[0] in repr(batches[0]) and "removed_versions=(1, 2)" in repr(plan)
    # what travels to executors still carries the options
    assert pickle.loads(pickle.dumps(batches[0])).storage_options == batches[0].storage_options
