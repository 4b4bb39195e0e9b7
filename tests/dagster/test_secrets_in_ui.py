"""Credentials in ``storage_options`` never reach the Dagster UI, while runs still use them.

A real ``dagster-webserver`` (127.0.0.1, its own ``DAGSTER_HOME``) serves ``secrets_ui_defs.py``;
everything is asked through its GraphQL API, as the UI asks it: the Resources tab (configured
values), the Launchpad's default run config and config schema, runs launched with exactly that
default config (in their own processes, as the webserver launches them), their stored run config,
events and asset metadata. Finally no file of the Dagster home (run/event/schedule storage, compute
logs) holds the secret.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SECRET = f"sk-{uuid.uuid4().hex}"
TOKEN = f"tok-{uuid.uuid4().hex}"
MASK = "***"

WORKSPACE = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name loadStatus
        locationOrLoadError {
          __typename ... on RepositoryLocation { repositories { name } } ... on PythonError { message }
        }
      }
    }
  }
}"""

RESOURCES = """
query($repo: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $repo) {
    __typename
    ... on ResourceDetailsList { results { name configuredValues { key value type } } }
  }
}"""

CONFIG_SCHEMA = """
query($selector: PipelineSelector!) {
  runConfigSchemaOrError(selector: $selector) {
    __typename
    ... on RunConfigSchema {
      rootDefaultYaml
      allConfigTypes { key ... on CompositeConfigType { fields { name defaultValueAsJson } } }
    }
  }
}"""

LAUNCH = """
mutation($params: ExecutionParams!) {
  launchPipelineExecution(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""

RUN = """
query($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run {
      status runConfigYaml tags { key value }
      eventConnection {
        events {
          __typename
          ... on MessageEvent { message }
          ... on ExecutionStepFailureEvent { error { message causes { message } } }
          ... on MaterializationEvent { metadataEntries { label ... on TextMetadataEntry { text } } }
        }
      }
    }
  }
}"""

ASSET = """
query($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations { metadataEntries { label __typename ... on TextMetadataEntry { text } } }
      assetObservations { metadataEntries { label __typename ... on TextMetadataEntry { text } } }
    }
  }
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Dagit:
    """GraphQL client of the webserver under test, with the code location's names."""

    def __init__(self, url: str) -> None:
        self.url = url
        deadline = time.monotonic() + 240
        while True:  # the code server loads the location after the webserver answers
            entry = self.query(WORKSPACE)["workspaceOrError"]["locationEntries"][0]
            if entry["loadStatus"] == "LOADED":
                break
            assert time.monotonic() < deadline, "the code location did not load"
            time.sleep(1)
        location = entry["locationOrLoadError"]
        assert location["__typename"] == "RepositoryLocation", location
        self.repo = {"repositoryName": location["repositories"][0]["name"], "repositoryLocationName": entry["name"]}

    def query(self, text: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": text, "variables": variables or {}}).encode()
        req = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            out = json.loads(resp.read())
        assert not out.get("errors"), out["errors"]
        data: dict[str, Any] = out["data"]
        return data

    def job(self, name: str, assets: list[str] | None = None) -> dict[str, Any]:
        selector: dict[str, Any] = {**self.repo, "pipelineName": name}
        if assets is not None:
            selector["assetSelection"] = [{"path": [a]} for a in assets]
        return selector

    def launchpad_defaults(self, selector: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The Launchpad's default run config (YAML) and the whole config schema response."""
        data = self.query(CONFIG_SCHEMA, {"selector": selector})["runConfigSchemaOrError"]
        assert data["__typename"] == "RunConfigSchema", data
        return data["rootDefaultYaml"], data

    def launch(self, selector: dict[str, Any], run_config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Launch like the Launchpad's button; wait for the run to end; return (status, run)."""
        params = {"selector": selector, "runConfigData": run_config, "mode": "default"}
        out = self.query(LAUNCH, {"params": params})["launchPipelineExecution"]
        assert out["__typename"] == "LaunchRunSuccess", out
        run_id = out["run"]["runId"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            run = self.query(RUN, {"runId": run_id})["runOrError"]
            if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
                return run["status"], run
            time.sleep(1)
        raise TimeoutError(f"run {run_id} did not finish")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("dagster_home")
    # Runs start at once (no daemon to dequeue them) in their own processes, as in `dagster dev`.
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n")
    return home


@pytest.fixture(scope="module")
def dagit(home: Path) -> Iterator[Dagit]:
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "LANCE_SECRETS_ROOT": str(home / "lake"),
           "LANCE_SECRETS_KEY": SECRET, "LANCE_SECRETS_TOKEN": TOKEN}
    log = open(home / "webserver.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-webserver")), "-h", "127.0.0.1", "-p", str(port),
         "-f", str(HERE / "secrets_ui_defs.py"), "-a", "defs"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, f"dagster-webserver exited: {(home / 'webserver.log').read_text()[-3000:]}"
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "dagster-webserver did not answer"
                time.sleep(1)
        yield Dagit(url)
    finally:
        # The webserver starts a code server (and runs) as children: end its whole process group.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()


def _assert_hidden(what: str, payload: Any) -> None:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    assert SECRET not in text, f"{what} shows the secret: {text[:2000]}"
    assert TOKEN not in text, f"{what} shows the environment variable's value: {text[:2000]}"


def test_resources_tab_masks_plain_credentials_and_names_env_vars(dagit: Dagit) -> None:
    data = dagit.query(RESOURCES, {"repo": dagit.repo})["allTopLevelResourceDetailsOrError"]
    _assert_hidden("Resources tab", data)
    shown = {r["name"]: {v["key"]: v for v in r["configuredValues"]} for r in data["results"]}
    for name in ("lance", "io_manager"):
        options = json.loads(shown[name]["storage_options"]["value"])
        assert options == {"aws_secret_access_key": MASK, "aws_session_token": {"env": "LANCE_SECRETS_TOKEN"},
                           "aws_region": "eu-west-1", "aws_endpoint": f"http://{MASK}@127.0.0.1:9"}


def test_launchpad_defaults_and_config_schema_hold_no_secret(dagit: Dagit) -> None:
    default_yaml, schema = dagit.launchpad_defaults(dagit.job("__ASSET_JOB", ["clicks", "scores"]))
    _assert_hidden("Launchpad of the assets", schema)
    resources = yaml.safe_load(default_yaml)["resources"]
    for name in ("lance", "io_manager"):
        options = resources[name]["config"]["storage_options"]
        assert options["aws_secret_access_key"] == MASK
        assert options["aws_endpoint"] == f"http://{MASK}@127.0.0.1:9"
        assert options["aws_session_token"] == {"env": "LANCE_SECRETS_TOKEN"}
    # The maintenance job's run config is its typed config (a config mapping): no resource section.
    default_yaml, schema = dagit.launchpad_defaults(dagit.job("lance_maintenance"))
    _assert_hidden("Launchpad of the maintenance job", schema)
    assert yaml.safe_load(default_yaml)["runner"] == "spark"


@pytest.mark.slow  # three runs, each in its own processes (~2 minutes)
def test_runs_launched_with_launchpad_defaults_use_the_real_secret_and_show_none(dagit: Dagit, home: Path) -> None:
    assets = dagit.job("__ASSET_JOB", ["clicks", "scores"])
    status, run = dagit.launch(assets, yaml.safe_load(dagit.launchpad_defaults(assets)[0]))
    assert status == "SUCCESS", [e.get("message") for e in run["eventConnection"]["events"]][-15:]
    _assert_hidden("run of the assets", run)
    assert MASK in run["runConfigYaml"]  # what the Launchpad submitted, masked as shown

    maintenance = dagit.job("lance_maintenance")
    config = yaml.safe_load(dagit.launchpad_defaults(maintenance)[0])
    config.update(runner="local", cleanup={**config["cleanup"], "older_than": "0s"})
    status, run = dagit.launch(maintenance, config)
    assert status == "SUCCESS", [e.get("message") for e in run["eventConnection"]["events"]][-15:]
    _assert_hidden("maintenance run", run)

    for key in ("clicks", "scores"):
        asset = dagit.query(ASSET, {"key": {"path": [key]}})["assetOrError"]
        assert asset["assetMaterializations"] and asset["assetObservations"]  # written, then maintained
        _assert_hidden(f"asset {key}", asset)

    # Control: a value typed over the masked default is used as given, so a wrong secret fails the
    # run (the checked:// store refuses it) -- the successes above did use the real credentials.
    config = yaml.safe_load(dagit.launchpad_defaults(assets)[0])
    config["resources"]["lance"]["config"]["storage_options"]["aws_secret_access_key"] = "typed-in-the-launchpad"
    status, run = dagit.launch(dagit.job("__ASSET_JOB", ["scores"]), config)
    assert status == "FAILURE"
    assert "are not the real credentials" in json.dumps(run["eventConnection"]), json.dumps(run)[-6000:]
    _assert_hidden("failed run", run)

    # Nothing stored (run and event storage, job snapshots, compute logs, server log, datasets) holds it.
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and TOKEN.encode() not in data, path
