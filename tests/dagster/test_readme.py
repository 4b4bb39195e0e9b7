"""The README's Dagster snippets run as written, in order, as a new user would paste them (issue 26 item 9)."""

import re
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, materialize

import lance_format

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippets() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Using the Dagster plugin"):text.index("## Layout")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_dagster_snippets_define_and_materialize(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 instance: DagsterInstance) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # LanceIOManager()'s default root goes under it
    monkeypatch.setenv("LANCE_FORMAT_COMMIT_GRACE", "0s")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
    basics, maintenance, spark, credentials = _snippets()
    ns: dict[str, Any] = {}
    exec(compile(basics, "README basics", "exec"), ns)
    exec(compile(maintenance, "README maintenance", "exec"), ns)
    defs = ns["defs"]
    resources = {"io_manager": defs.resources["io_manager"]}
    assert materialize([ns["events"]], resources=resources, instance=instance).success
    assert materialize([ns["events"], ns["kinds"]], selection=[ns["kinds"]], resources=resources,
                       instance=instance).success
    assert materialize([ns["daily"]], partition_key="2026-01-02", resources=resources, instance=instance).success
    root = tmp_path / "storage" / "lance_storage"
    assert lance_format.dataset(str(root / "kinds.lance")).to_table().column_names == ["kind"]
    assert lance_format.dataset(str(root / "daily.lance")).count_rows() == 1
    run = defs.resolve_job_def("lance_maintenance").execute_in_process(instance=instance,
                                                                       run_config={"runner": "local"})
    assert run.success
    pytest.importorskip("pyspark")
    exec(compile(spark, "README spark", "exec"), ns)  # defines the Spark asset and its resources
    assert set(ns["resources"]) == {"io_manager", "pyspark"} and "pyspark" in ns["totals"].required_resource_keys
    exec(compile(credentials, "README credentials", "exec"), ns)
    options = ns["lance"].settings().options
    assert options["aws_access_key_id"] == "AKIDEXAMPLE" and options["aws_region"] == "eu-west-1"
