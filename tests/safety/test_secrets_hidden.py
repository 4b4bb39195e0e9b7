"""Storage options (credentials) never show in reprs of the Dagster plugin's objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import lance_format as lf
from lance_dagster import LanceIOManager
from lance_dagster.config import make_settings
from lance_dagster.resource import LanceResource
from lance_format.errors import InvalidInputError, LanceError, StorageError
from lance_format.maintenance.compaction import Compaction, CompactionTask
from lance_format.storage.external import DynamoDBManifestStore, SQLiteManifestStore
from lance_format.storage.redact import MASK, redact_url

REPO = Path(__file__).resolve().parents[2]
OPTS = {"aws_secret_access_key": "SECRET-123", "aws_access_key_id": "AKIA-SECRET", "aws_region": "us-east-1"}


def test_io_manager_and_resource_reprs_hide_storage_options() -> None:
    for obj in (LanceIOManager(storage_options=OPTS), LanceResource(storage_options=OPTS)):
        for text in (repr(obj), str(obj)):
            assert "SECRET" not in text
        assert obj.storage_options == OPTS  # still passed on to lance_format


def test_settings_repr_hides_storage_options() -> None:
    settings = make_settings("/tmp/x", OPTS, "overwrite", None)
    assert "SECRET" not in repr(settings)
    assert settings.options == OPTS


def test_redact_options_masks_credentials_and_url_passwords() -> None:
    from lance_format.storage.redact import redact_options

    shown = redact_options(dict(OPTS, aws_endpoint="http://user:pw-SECRET@127.0.0.1:9000"))
    assert "SECRET" not in repr(shown)
    assert shown["aws_region"] == "us-east-1"
    assert shown["aws_endpoint"] == "http://***@127.0.0.1:9000"


def test_endpoint_errors_do_not_show_url_passwords() -> None:
    import pytest

    import lance_format as lf
    from lance_format.errors import InvalidInputError

    for endpoint in ("http://user:SECRET@127.0.0.1:99999", "http://user:SECRET@127.0.0.1:9000"):
        with pytest.raises(InvalidInputError) as info:
            lf.dataset("s3://bucket/ds", storage_options={"aws_endpoint": endpoint})
        assert "SECRET" not in str(info.value)


# -- compaction tasks shipped to executors ---------------------------------------------------------

def test_compaction_plan_and_task_reprs_hide_storage_options_they_still_carry(tmp_path: Path) -> None:
    uri = str(tmp_path / "ds")
    for i in range(3):
        lf.write_dataset(pa.table({"a": [i]}), uri, mode="append", storage_options=OPTS)
    plan = Compaction.plan(lf.dataset(uri, storage_options=OPTS), {"target_rows_per_fragment": 10})
    task = plan.tasks[0]
    for text in (repr(plan), str(plan), repr(task), repr(plan.tasks)):
        assert "SECRET" not in text
    assert "read_version=3" in repr(task)  # the rest of the repr is still there
    # Executors open the dataset with the options: the task and its JSON keep them.
    assert task.storage_options == OPTS
    assert CompactionTask.from_json(task.to_json()).storage_options == OPTS


# -- what Dagster shows: the resource's config schema defaults ---------------------------------------

PLAIN = {"aws_secret_access_key": "SECRET-KEY", "sas_token": "SECRET-SAS", "aws_region": "us-east-1",
         "aws_endpoint": "http://user:SECRET-PW@127.0.0.1:9000"}


def _shown_defaults(resource: Any) -> dict[str, Any]:
    """The values Dagster shows (Resources tab) and scaffolds (Launchpad): the config schema default."""
    definition = resource if isinstance(resource, dg.ResourceDefinition) else resource.get_resource_definition()
    schema = definition.config_schema
    shown: dict[str, Any] = json.loads(schema.default_value_as_json_str)
    return shown


@pytest.mark.parametrize("cls", [LanceResource, LanceIOManager])
def test_config_defaults_shown_by_dagster_mask_plain_credentials(cls: Any) -> None:
    options = {**PLAIN, "aws_session_token": dg.EnvVar("LANCE_TEST_TOKEN")}
    resource = cls(root_uri="s3://user:SECRET-ROOT@bucket/lake", storage_options=options)
    shown = _shown_defaults(resource)
    assert "SECRET" not in json.dumps(shown)
    assert shown["storage_options"] == {"aws_secret_access_key": MASK, "sas_token": MASK, "aws_region": "us-east-1",
                                        "aws_endpoint": f"http://{MASK}@127.0.0.1:9000",
                                        "aws_session_token": {"env": "LANCE_TEST_TOKEN"}}  # a reference, as is
    assert shown["root_uri"] == f"s3://{MASK}@bucket/lake"
    assert resource.storage_options == options  # the object itself keeps the real values


def test_runs_get_the_real_credentials_behind_the_masked_defaults(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_TEST_TOKEN", "SECRET-FROM-ENV")
    options = {**PLAIN, "aws_session_token": dg.EnvVar("LANCE_TEST_TOKEN")}
    seen: list[dict[str, str]] = []

    @dg.asset
    def probe(lance: LanceResource) -> pa.Table:
        seen.append(dict(lance.storage_options))
        return pa.table({"a": [1]})

    resources = {"lance": LanceResource(root_uri=str(tmp_path), storage_options=options),
                 "io_manager": LanceIOManager(root_uri=str(tmp_path), storage_options=options)}
    assert dg.materialize([probe], resources=resources).success
    # What the Launchpad scaffolds (the masked defaults) also gets the real values.
    scaffold = {"resources": {"lance": {"config": _shown_defaults(resources["lance"])}}}
    assert "SECRET" not in json.dumps(scaffold)
    assert dg.materialize([probe], resources=resources, run_config=scaffold).success
    # A value typed over a masked default is used as given.
    typed = {**PLAIN, "aws_secret_access_key": "typed"}
    assert dg.materialize([probe], resources=resources,
                          run_config={"resources": {"lance": {"config": {"storage_options": typed}}}}).success
    real = {**PLAIN, "aws_session_token": "SECRET-FROM-ENV"}
    assert seen == [real, real, typed]


def test_yaml_component_storage_options_are_masked_in_the_maintenance_job(tmp_path: Path) -> None:
    from lance_dagster.components import LanceDatasetsComponent

    component = LanceDatasetsComponent(root_uri=str(tmp_path), storage_options=PLAIN,
                                       datasets=[{"asset_key": "ref/table"}], maintenance={})
    defs = component.build_defs(None)  # type: ignore[arg-type]  # the context is not used
    job = defs.resolve_job_def("lance_maintenance")
    shown = _shown_defaults(job.resource_defs["lance"])
    assert "SECRET" not in json.dumps(shown) and shown["storage_options"]["aws_secret_access_key"] == MASK


# -- external manifest store URLs in errors ------------------------------------------------------------

def _error_text(exc: BaseException | None) -> str:
    """Messages of the error and every error chained to it (what a traceback shows besides code)."""
    seen: list[str] = []
    while exc is not None and len(seen) < 20:
        seen.append(f"{type(exc).__name__}: {exc!s} {exc.args!r}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(seen)


@pytest.mark.parametrize("spec", [
    "postgres://user:SECRET-PW@db.internal/manifests",   # not a kind we know
    "dynamodb://user:SECRET-PW@manifests",               # credentials in the URL, endpoint unreachable
    "sqlite://user:SECRET-PW@/no/such/dir/manifests.db",  # cannot be opened
])
def test_external_manifest_store_errors_never_show_url_passwords(tmp_path: Path, spec: str) -> None:
    options = {"external_manifest_store": spec, "aws_endpoint": "http://127.0.0.1:9", "allow_http": "true",
               "aws_access_key_id": "id", "aws_secret_access_key": "SECRET-KEY", "aws_region": "us-east-1"}
    for action in (lambda: lf.write_dataset(pa.table({"a": [1]}), str(tmp_path / "ds"), storage_options=options),
                   lambda: lf.dataset(str(tmp_path / "ds"), storage_options=options)):
        with pytest.raises(LanceError) as info:
            action()
        assert "SECRET" not in _error_text(info.value)
        assert MASK in str(info.value)


def test_s3_ddb_uri_errors_never_show_url_passwords() -> None:
    with pytest.raises(InvalidInputError) as info:
        lf.dataset("s3+ddb://user:SECRET-PW@bucket/ds.lance?ddbTableName=t&other=1")
    assert "SECRET" not in _error_text(info.value) and f"s3+ddb://{MASK}@bucket/ds.lance" in str(info.value)


def test_external_store_reprs_never_show_url_passwords() -> None:
    assert "SECRET" not in repr(DynamoDBManifestStore("user:SECRET-PW@table", {"aws_secret_access_key": "SECRET"}))
    assert repr(DynamoDBManifestStore("table")) == "DynamoDBManifestStore(table_name='table')"
    with pytest.raises(StorageError) as info:
        SQLiteManifestStore("user:SECRET-PW@/no/such/dir/m.db")
    assert "SECRET" not in _error_text(info.value)


def test_redact_url_masks_credentials_without_a_scheme() -> None:
    assert redact_url("user:pw@table") == f"{MASK}@table"
    assert redact_url("user:pw@/tmp/m.db") == f"{MASK}@/tmp/m.db"
    assert redact_url("/data/a@b/m.db") == "/data/a@b/m.db"  # an "@" inside a path is not a password
    assert redact_url("sqlite:///tmp/m.db") == "sqlite:///tmp/m.db"


@pytest.mark.parametrize("make", [
    lambda opts: LanceResource(root_uri="/tmp/lake", storage_options=opts).settings(),
    lambda opts: LanceIOManager(root_uri="/tmp/lake", storage_options=opts).settings(),
    lambda opts: make_settings("/tmp/lake", opts, "overwrite", None),  # build_lance_asset_checks, sensors
], ids=["resource", "io_manager", "checks_and_sensors"])
def test_env_var_options_are_read_from_the_environment_outside_runs(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # A sensor uses the resource object bound to a maintenance job: no run resolves its EnvVars.
    settings = make({"aws_secret_access_key": dg.EnvVar("LANCE_TEST_KEY"), "aws_region": "us-east-1"})
    monkeypatch.setenv("LANCE_TEST_KEY", "SECRET-FROM-ENV")
    assert settings.options == {"aws_secret_access_key": "SECRET-FROM-ENV", "aws_region": "us-east-1"}
    monkeypatch.delenv("LANCE_TEST_KEY")
    with pytest.raises(InvalidInputError, match="LANCE_TEST_KEY.*is not set"):
        _ = settings.options


def test_example_project_on_s3_passes_credentials_as_env_var_references() -> None:
    # A fresh interpreter: the example reads its root and credentials when first imported.
    script = """
import json
from example_project.definitions import defs
for name in ("lance", "io_manager"):
    schema = defs.resources[name].get_resource_definition().config_schema
    print(json.dumps(json.loads(schema.default_value_as_json_str)["storage_options"], sort_keys=True))
"""
    env = {**os.environ, "LANCE_EXAMPLE_ROOT": "s3://bucket/lake", "AWS_ACCESS_KEY_ID": "AKIA-SECRET",
           "AWS_SECRET_ACCESS_KEY": "SECRET-KEY", "AWS_REGION": "eu-west-1"}
    env.pop("AWS_SESSION_TOKEN", None)
    env.pop("AWS_ENDPOINT_URL", None)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = [json.loads(line) for line in proc.stdout.splitlines()[-2:]]
    expected = {"aws_access_key_id": {"env": "AWS_ACCESS_KEY_ID"},
                "aws_secret_access_key": {"env": "AWS_SECRET_ACCESS_KEY"}, "aws_region": "eu-west-1"}
    assert shown == [expected, expected]
