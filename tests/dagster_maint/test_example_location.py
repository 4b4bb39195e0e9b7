"""The example code location: YAML component, schedules and sensors load; the main job runs end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_workspace_with_yaml_component_validates() -> None:
    dagster_cli = Path(sys.executable).with_name("dagster")
    proc = subprocess.run([str(dagster_cli), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All code locations passed validation" in proc.stdout + proc.stderr


def test_example_defines_maintenance_automation_and_component_assets() -> None:
    from example_project.definitions import defs

    assert {s.name for s in defs.schedules} == {"lance_maintenance_schedule", "reference_maintenance_schedule"}
    assert {s.name for s in defs.sensors} == {"lance_maintenance_health", "reference_maintenance_health"}
    nightly = next(s for s in defs.schedules if s.name == "lance_maintenance_schedule")
    assert (nightly.cron_schedule, nightly.execution_timezone) == ("0 3 * * *", "Europe/Berlin")
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"event_features", "daily_events", "user_profiles", "category_daily_stats", "reference/categories"} <= keys
    reference = defs.resolve_job_def("reference_maintenance")
    assert sorted(n.name for n in reference.graph.nodes) == [
        "cleanup__reference__categories", "compact__reference__categories",
        "optimize_indices__reference__categories"]


@pytest.mark.slow
def test_main_runs_end_to_end_with_one_maintenance_run(tmp_path: Path) -> None:
    env = {**os.environ}
    env.pop("LANCE_EXAMPLE_ROOT", None)
    proc = subprocess.run(
        [sys.executable, "-m", "example_project.main", "--data-dir", str(tmp_path), "--runs", "1",
         "--runner", "local"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert "lance_maintenance (once)" in out and "reference_maintenance (once)" in out
    assert "event_log" in out and "Compaction" in out
    assert "reference/categories     Lance v6 · Compaction · 4 → 1 fragments" in out
    for name in ("daily_events", "user_profiles", "category_daily_stats", "event_features"):
        assert f"\n{name}  (" in out
