"""The Dagster UI shows a Lance asset's version lineage, maintenance and checks (real browser)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import SCREENSHOTS

pytestmark = pytest.mark.slow

PARTITIONS = ["2026-01-01", "2026-01-02", "2026-01-03"]


def _observe(sensor: Any, instance: Any, defs: Any, cursor: str | None) -> tuple[int, str | None]:
    """One tick of the observation sensor, its events stored as the sensor daemon stores them."""
    from dagster import build_sensor_context

    result = sensor(build_sensor_context(instance=instance, definitions=defs, cursor=cursor))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return len(result.asset_events), result.cursor


@pytest.fixture(scope="module")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Dagster home with appends, an index built outside Dagster, partitions and a partitioned reader,
    health checks, observation-sensor ticks and one maintenance run."""
    home = tmp_path_factory.mktemp("dagster_home")
    root = home / "lake"
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n")
    old = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "LANCE_UI_ROOT", "LANCE_FORMAT_COMMIT_GRACE")}
    # commit grace 0: the maintenance run removes versions superseded seconds before it
    os.environ.update(DAGSTER_HOME=str(home), LANCE_UI_ROOT=str(root), LANCE_FORMAT_COMMIT_GRACE="0s")
    try:
        from dagster import AssetSelection, DagsterInstance, materialize

        import lance_format

        from .ui_defs import clicks, daily_visits, defs, observer, visit_totals

        resources = {"io_manager": defs.resources["io_manager"], "lance": defs.resources["lance"]}
        checks = list(defs.asset_checks)
        runs: dict[str, Any] = {"appends": []}
        with DagsterInstance.get() as instance:
            for i in range(4):
                runs["appends"].append(materialize([clicks], instance=instance, resources=resources).run_id)
                if i == 0:  # v2: an index built outside Dagster; the next three appends are not in it
                    lance_format.dataset(f"{root}/clicks.lance").create_scalar_index("id", "BTREE")
            for day in PARTITIONS:
                materialize([daily_visits], partition_key=day, instance=instance, resources=resources)
            materialize([daily_visits, visit_totals], partition_key=PARTITIONS[0], selection=[visit_totals],
                        instance=instance, resources=resources)
            materialize([clicks, daily_visits, *checks], selection=AssetSelection.checks(*checks),
                        instance=instance, resources=resources)
            observed, cursor = _observe(observer, instance, defs, None)
            assert observed == 1  # the index build (v2), the one commit made outside Dagster
            result = defs.resolve_job_def("lance_maintenance").execute_in_process(
                instance=instance, run_config={"runner": "local", "cleanup": {"older_than": "0s", "retain_versions": 2}})
            assert result.success
            runs["maintenance"] = result.run_id
            # maintenance commits (ReserveFragments, Rewrite, CreateIndex) carry the run: none is observed
            assert _observe(observer, instance, defs, cursor)[0] == 0
        yield {"home": str(home), "root": str(root), "runs": runs}
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _open(browser: Any, url: str, expect: str, shot: str) -> str:
    """Load ``url``, wait until ``expect`` is on the page, save a screenshot, return the page text."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    SCREENSHOTS.mkdir(exist_ok=True)
    try:
        WebDriverWait(browser, 90).until(lambda d: expect in d.find_element(By.TAG_NAME, "body").text)
    except TimeoutException:
        browser.save_screenshot(str(SCREENSHOTS / f"{shot}-timeout.png"))
        raise
    # The first visit offers a newsletter dialog; close it so the screenshot shows the page.
    for button in browser.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
        button.click()
    browser.save_screenshot(str(SCREENSHOTS / f"{shot}.png"))
    return str(browser.find_element(By.TAG_NAME, "body").text)


def _open_event(browser: Any, url: str, expect: str, shot: str) -> str:
    """Load an asset's events page and click through its event list until an event shows ``expect``."""
    from selenium.common.exceptions import (
        ElementClickInterceptedException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    _open(browser, url, "Metadata", f"{shot}-list")
    items = "//*[(contains(text(), ' AM') or contains(text(), ' PM')) and contains(text(), ',')]"
    WebDriverWait(browser, 90).until(lambda d: len(d.find_elements(By.XPATH, items)) > 1)  # the list loaded
    for i in range(len(browser.find_elements(By.XPATH, items))):
        try:
            item = browser.find_elements(By.XPATH, items)[i]
            try:
                item.click()
            except ElementClickInterceptedException:
                # A late dialog or toast covers the list (seen on a loaded machine): close it, click anyway.
                for button in browser.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
                    button.click()
                browser.execute_script("arguments[0].click();", item)
            WebDriverWait(browser, 5).until(lambda d: expect in d.find_element(By.TAG_NAME, "body").text)
        except (TimeoutException, StaleElementReferenceException, IndexError):
            continue
        browser.save_screenshot(str(SCREENSHOTS / f"{shot}.png"))
        return str(browser.find_element(By.TAG_NAME, "body").text)
    browser.save_screenshot(str(SCREENSHOTS / f"{shot}-timeout.png"))
    raise AssertionError(f"no event on {url} shows {expect!r}")


def _run_links(browser: Any) -> set[str]:
    from selenium.webdriver.common.by import By

    return {str(a.get_attribute("href")) for a in browser.find_elements(By.CSS_SELECTOR, "a[href*='/runs/']")}


def test_overview_shows_labelled_version_and_linked_history(browser: Any, webserver: str, ui_home: Any) -> None:
    text = _open(browser, f"{webserver}/assets/clicks", "Lance v5 · Append · +629 rows", "clicks-overview")
    assert "lance/version_history" in text and "lance/tags" not in text
    last = ui_home["runs"]["appends"][-1]
    assert any(href.endswith(f"/runs/{last}") for href in _run_links(browser))


def test_events_show_maintenance_with_metrics(browser: Any, webserver: str, ui_home: Any) -> None:
    text = _open(browser, f"{webserver}/assets/clicks?view=events", "Cleanup · removed 6 versions", "clicks-events")
    assert "lance/bytes_reclaimed" in text and "lance/removed_versions" in text
    assert "Compaction" in text  # the history table of the observation lists the compaction commit
    assert any(href.endswith(f"/runs/{ui_home['runs']['maintenance']}") for href in _run_links(browser))


def test_maintenance_commits_are_attributed_to_their_run_not_outside_dagster(browser: Any, webserver: str,
                                                                            ui_home: Any) -> None:
    """Issue 26 item 2: only the index built outside Dagster is labelled so; the compaction's
    ReserveFragments and Rewrite and the index step's CreateIndex link to the maintenance run."""
    events = f"{webserver}/assets/clicks?view=events"
    text = _open_event(browser, events, "outside Dagster", "clicks-outside")
    assert "Lance v2 · CreateIndex" in text  # the index built by hand is the one outside commit
    text = _open_event(browser, events, "Compaction (reserve ids)", "clicks-attributed")
    run = ui_home["runs"]["maintenance"][:8]
    # the history table: the maintenance commits link to their run; the hand-built index is external
    rows = {line.split(" ", 1)[0]: line for line in text[text.index("version_history"):].splitlines()
            if line.startswith("v")}
    assert rows["v6"].endswith(f"Compaction (reserve ids) 2,516 {run}")
    assert rows["v7"].endswith(f"Compaction 2,516 {run}") and rows["v8"].endswith(f"Index 2,516 {run}")
    assert rows["v2"].endswith("CreateIndex 629 external")


def test_a_read_does_not_pass_for_the_partition_state(browser: Any, webserver: str) -> None:
    """Issue 26 item 5: the partition page of a partition read downstream shows its materialization."""
    url = f"{webserver}/assets/daily_visits?view=partitions&partition={PARTITIONS[0]}"
    text = _open(browser, url, "lance/summary", "daily-partition")
    assert "· Read" not in text and "Lance v1 ·" in text


def test_checks_show_index_coverage_and_small_tables_pass(browser: Any, webserver: str) -> None:
    """Issue 26 item 7: unindexed rows per index in the check; a small table gets no compaction advice."""
    text = _open(browser, f"{webserver}/assets/clicks?view=checks", "unindexed rows", "clicks-coverage")
    assert "index 'id_idx': 1887 unindexed rows > 100" in text
    text = _open(browser, f"{webserver}/assets/daily_visits?view=checks", "minimum for compaction advice",
                 "daily-checks")
    assert "150 rows: below the 262,144-row minimum" in text
    _open(browser, f"{webserver}/assets/clicks", "lance/unindexed_rows/id_idx", "clicks-coverage-metadata")


def test_partitioned_asset_events_name_their_partitions(browser: Any, webserver: str) -> None:
    text = _open(browser, f"{webserver}/assets/daily_visits?view=events", "Cleanup · removed", "daily-events")
    for day in PARTITIONS:
        assert day in text


def test_checks_tab_shows_the_health_check(browser: Any, webserver: str) -> None:
    text = _open(browser, f"{webserver}/assets/clicks?view=checks", "lance_maintenance", "clicks-checks")
    assert "4 fragments > 3" in text or "Failed" in text or "Warning" in text


def test_automation_page_lists_schedule_and_sensor(browser: Any, webserver: str) -> None:
    text = _open(browser, f"{webserver}/automation", "lance_maintenance_schedule", "automation")
    assert "lance_maintenance_health" in text


def test_screenshots_are_saved() -> None:
    assert sorted(p.name for p in Path(SCREENSHOTS).glob("*.png") if "timeout" not in p.name) == [
        "automation.png", "clicks-attributed-list.png", "clicks-attributed.png", "clicks-checks.png",
        "clicks-coverage-metadata.png", "clicks-coverage.png", "clicks-events.png", "clicks-outside-list.png",
        "clicks-outside.png", "clicks-overview.png", "daily-checks.png", "daily-events.png", "daily-partition.png"]
