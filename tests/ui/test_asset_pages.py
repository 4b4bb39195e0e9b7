"""The Dagster UI shows a Lance asset's version lineage, maintenance and checks (real browser)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import SCREENSHOTS

pytestmark = pytest.mark.slow

PARTITIONS = ["2026-01-01", "2026-01-02", "2026-01-03"]


@pytest.fixture(scope="module")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A Dagster home with appends, partitions, a health check and one maintenance run."""
    home = tmp_path_factory.mktemp("dagster_home")
    root = home / "lake"
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n")
    old = {k: os.environ.get(k) for k in ("DAGSTER_HOME", "LANCE_UI_ROOT", "LANCE_FORMAT_COMMIT_GRACE")}
    # commit grace 0: the maintenance run removes versions superseded seconds before it
    os.environ.update(DAGSTER_HOME=str(home), LANCE_UI_ROOT=str(root), LANCE_FORMAT_COMMIT_GRACE="0s")
    try:
        from dagster import AssetSelection, DagsterInstance, materialize

        from .ui_defs import clicks, daily_visits, defs

        resources = {"io_manager": defs.resources["io_manager"], "lance": defs.resources["lance"]}
        checks = list(defs.asset_checks)
        runs: dict[str, Any] = {"appends": []}
        with DagsterInstance.get() as instance:
            for _ in range(4):
                runs["appends"].append(materialize([clicks], instance=instance, resources=resources).run_id)
            for day in PARTITIONS:
                materialize([daily_visits], partition_key=day, instance=instance, resources=resources)
            materialize([clicks, daily_visits, *checks], selection=AssetSelection.checks(*checks),
                        instance=instance, resources=resources)
            result = defs.resolve_job_def("lance_maintenance").execute_in_process(
                instance=instance, run_config={"runner": "local", "cleanup": {"older_than": "0s", "retain_versions": 2}})
            assert result.success
            runs["maintenance"] = result.run_id
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


def _run_links(browser: Any) -> set[str]:
    from selenium.webdriver.common.by import By

    return {str(a.get_attribute("href")) for a in browser.find_elements(By.CSS_SELECTOR, "a[href*='/runs/']")}


def test_overview_shows_labelled_version_and_linked_history(browser: Any, webserver: str, ui_home: Any) -> None:
    text = _open(browser, f"{webserver}/assets/clicks", "Lance v4 · Append · +629 rows", "clicks-overview")
    assert "lance/version_history" in text and "lance/tags" not in text
    last = ui_home["runs"]["appends"][-1]
    assert any(href.endswith(f"/runs/{last}") for href in _run_links(browser))


def test_events_show_maintenance_with_metrics(browser: Any, webserver: str, ui_home: Any) -> None:
    text = _open(browser, f"{webserver}/assets/clicks?view=events", "Cleanup · removed 4 versions", "clicks-events")
    assert "lance/bytes_reclaimed" in text and "lance/removed_versions" in text
    assert "Compaction" in text  # the history table of the observation lists the compaction commit
    assert any(href.endswith(f"/runs/{ui_home['runs']['maintenance']}") for href in _run_links(browser))


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
        "automation.png", "clicks-checks.png", "clicks-events.png", "clicks-overview.png", "daily-events.png"]
