"""Two maintenance runs never work on one dataset at once: every step waits for the dataset's pool."""

from __future__ import annotations

import threading
import time

from dagster import DagsterEventType, DagsterInstance, materialize

import lance_format
from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.maintenance import build_lance_maintenance_job

from .helpers import appending_asset, by_step


def test_a_step_waits_while_another_run_holds_the_dataset_pool(
        io_manager: LanceIOManager, lance: LanceResource, instance: DagsterInstance, root: str) -> None:
    events = appending_asset()
    for _ in range(3):
        assert materialize([events], resources={"io_manager": io_manager}, instance=instance).success
    job = build_lance_maintenance_job("maint", assets=[events], selection=["events"], lance=lance)
    pool = "lance_maintenance_events"
    storage = instance.event_log_storage
    # The instance gives every pool one slot (``pools: default_limit: 1``), and another
    # maintenance run working on the dataset holds it.
    assert storage.initialize_concurrency_limit_to_default(pool)
    assert storage.get_concurrency_info(pool).slot_count == 1
    assert storage.claim_concurrency_slot(pool, "other-run", "compact__events").is_claimed
    seen: dict[str, object] = {}

    def other_run_finishes() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "blocked" not in seen:
            for record in instance.get_run_records():
                if record.dagster_run.job_name != "maint":
                    continue
                logs = instance.all_logs(record.dagster_run.run_id, of_type=DagsterEventType.ENGINE_EVENT)
                if any(pool in (e.message or "") for e in logs):
                    seen["blocked"] = True
                    seen["version_while_blocked"] = lance_format.dataset(f"{root}/events.lance").version
            time.sleep(0.5)
        storage.free_concurrency_slot_for_step("other-run", "compact__events")

    releaser = threading.Thread(target=other_run_finishes)
    releaser.start()
    result = job.execute_in_process(instance=instance, run_config={"runner": "local"})
    releaser.join()
    assert seen.get("blocked") is True
    assert seen["version_while_blocked"] == 3  # nothing was committed while the pool was held
    assert result.success
    assert by_step(result, "events")["compaction"].description.endswith("3 → 1 fragments")
