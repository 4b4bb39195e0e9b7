"""Cleanup keeps the latest, tagged, pinned and retained versions; a racing write loses nothing."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from dagster import DagsterInstance, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.maintenance import PIN_TAG_PREFIX, build_lance_maintenance_job, pinned_versions
from lance_dagster.maintenance.engine import compact
from lance_dagster.writer import commit_arrow
from lance_format.cleanup import COMMIT_GRACE_ENV
from lance_format.maintenance.compaction import CompactionOptions
from lance_format.maintenance.runner import LocalRunner

from .conftest import batch
from .helpers import appending_asset, by_step, pinning_asset, values

AGGRESSIVE = {"runner": "local", "compaction": {"enabled": False},
              "cleanup": {"older_than": "0s", "retain_versions": 1}}


@pytest.fixture(autouse=True)
def _no_commit_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The versions here are superseded seconds before cleanup runs; with the default commit grace
    (5 minutes) they would all stay, so these tests of the policies run with a grace of 0."""
    monkeypatch.setenv(COMMIT_GRACE_ENV, "0s")


def _versions(root: str) -> list[int]:
    return [int(v["version"]) for v in lance_format.dataset(f"{root}/events.lance").versions()]


def test_cleanup_keeps_latest_tagged_and_pinned_versions(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    for _ in range(6):
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    lance_format.dataset(f"{root}/events.lance").tags.create("gold", 2)
    reader = pinning_asset(4)
    assert pinned_versions([events, reader]) == {events.key: frozenset({4})}
    job = build_lance_maintenance_job("maint", assets=[events, reader], selection=["events"], lance=lance)
    result = job.execute_in_process(instance=instance, run_config=AGGRESSIVE)
    assert result.success
    assert _versions(root) == [2, 4, 6]
    cleanup = values(by_step(result, "events")["cleanup"])
    assert cleanup["lance/removed_versions"] == "v1, v3, v5"
    assert cleanup["lance/protected_versions"] == "v2, v4"
    assert cleanup["lance/tags"] == f"{PIN_TAG_PREFIX}4 → v4, gold → v2"
    # The pinned reader still reads its version after cleanup.
    assert materialize([events, reader], selection=[reader.key], resources={"io_manager": io_manager},
                       instance=instance).success
    assert lance_format.dataset(f"{root}/events.lance", version=4).count_rows() == 12


def test_pin_tags_follow_the_code(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    for _ in range(4):
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    first = build_lance_maintenance_job("maint", assets=[events, pinning_asset(2)], selection=["events"],
                                        lance=lance)
    assert first.execute_in_process(instance=instance, run_config=AGGRESSIVE).success
    assert _versions(root) == [2, 4]
    # The pin moved in the code: its old tag goes, and the next cleanup may remove version 2.
    second = build_lance_maintenance_job("maint", assets=[events, pinning_asset(4)], selection=["events"],
                                         lance=lance)
    assert second.execute_in_process(instance=instance, run_config=AGGRESSIVE).success
    assert _versions(root) == [4]
    assert set(lance_format.dataset(f"{root}/events.lance").tags.list()) == {f"{PIN_TAG_PREFIX}4"}


def test_retention_floor_keeps_recent_versions(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    for _ in range(5):
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    young = {**AGGRESSIVE, "cleanup": {"older_than": "1h", "retain_versions": 1}}
    assert job.execute_in_process(instance=instance, run_config=young).success
    assert _versions(root) == [1, 2, 3, 4, 5]  # all younger than an hour
    keep3 = {**AGGRESSIVE, "cleanup": {"older_than": "0s", "retain_versions": 3}}
    assert job.execute_in_process(instance=instance, run_config=keep3).success
    assert _versions(root) == [3, 4, 5]


def test_compaction_racing_appends_loses_no_rows(root: str) -> None:
    uri = f"{root}/events.lance"
    settings = LanceResource(root_uri=root).settings()
    for i in range(6):
        commit_arrow(settings, uri, batch(i * 10), mode="append", properties={})
    expected = {i * 10 + j for i in range(6) for j in range(3)}
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(6, 12):
                commit_arrow(settings, uri, batch(i * 10), mode="append", properties={})
                expected.update(i * 10 + j for j in range(3))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    outcomes = [compact(lance_format.dataset(uri), options=CompactionOptions(), runner=LocalRunner(2),
                        dry_run=False) for _ in range(3)]
    thread.join()
    assert not errors
    assert any(o.new_version is not None for o in outcomes)
    ds = lance_format.dataset(uri)
    ids = ds.to_table()["id"].to_pylist()
    assert len(ids) == len(set(ids)) and set(ids) == expected


class _MaterializeMidway:
    """A runner that lets a Dagster materialization commit between the compaction's plan and commit."""

    def __init__(self, materialize_once: object) -> None:
        self.materialize_once = materialize_once
        self.raced = 0

    def map(self, fn, items):  # type: ignore[no-untyped-def]
        if not self.raced:
            self.raced += 1
            self.materialize_once()  # type: ignore[operator]
        return LocalRunner(1).map(fn, items)


def test_compaction_racing_a_materialization_loses_no_rows(
        io_manager: LanceIOManager, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()

    def materialize_once() -> None:
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success

    for _ in range(4):
        materialize_once()
    runner = _MaterializeMidway(materialize_once)
    outcome = compact(lance_format.dataset(f"{root}/events.lance"), options=CompactionOptions(),
                      runner=runner, dry_run=False)
    assert runner.raced == 1 and outcome.new_version is not None
    table = lance_format.dataset(f"{root}/events.lance").to_table()
    assert sorted(table["id"].to_pylist()) == sorted(i * 100 + j for i in range(1, 6) for j in range(3))
    assert table.schema.field("id").type == pa.int64()
