"""Code location served by ``test_secrets_in_ui.py``: Lance resources holding credentials.

The secret access key (and a password in the endpoint URL) are plain strings read from the
environment, the way credentials end up in code when ``dg.EnvVar`` is not used; the session
token is a ``dg.EnvVar`` reference. Datasets live under ``checked://$LANCE_SECRETS_ROOT``: a storage
scheme registered here that opens the local folder only when all three real values arrive, so a
run that succeeds proves the masked values shown in the UI were replaced by the real ones.
"""

# No ``from __future__ import annotations``: Dagster reads the asset's context annotation as a type.
import os
from collections.abc import Mapping

import dagster as dg
import pyarrow as pa

from lance_dagster import LanceIOManager, LanceResource, materialize_result
from lance_dagster.maintenance import build_lance_maintenance_job
from lance_format.errors import StorageError
from lance_format.storage import register_scheme
from lance_format.storage.base import ObjectStore
from lance_format.storage.local import LocalStore

SECRET = os.environ["LANCE_SECRETS_KEY"]
TOKEN_VAR = "LANCE_SECRETS_TOKEN"
ROOT = f"checked://{os.environ['LANCE_SECRETS_ROOT']}"
ENDPOINT = f"http://lance:{SECRET}@127.0.0.1:9"
OPTIONS = {"aws_secret_access_key": SECRET, "aws_session_token": dg.EnvVar(TOKEN_VAR),
           "aws_region": "eu-west-1", "aws_endpoint": ENDPOINT}


def _checked_store(uri: str, options: Mapping[str, str]) -> ObjectStore:
    expected = {"aws_secret_access_key": SECRET, "aws_session_token": os.environ[TOKEN_VAR], "aws_endpoint": ENDPOINT}
    wrong = sorted(k for k, v in expected.items() if options.get(k) != v)
    if wrong:
        raise StorageError(f"{uri}: storage options {wrong} are not the real credentials")
    return LocalStore(uri.split("://", 1)[1])


register_scheme("checked", _checked_store)


@dg.asset(metadata={"mode": "append"})
def clicks() -> pa.Table:
    """Written by the IO manager."""
    return pa.table({"id": pa.array([1, 2, 3], pa.int64())})


@dg.asset(deps=[clicks])
def scores(context: dg.AssetExecutionContext, lance: LanceResource) -> dg.MaterializeResult:
    """Written through the resource."""
    return materialize_result(lance.write("scores", pa.table({"score": [0.5, 0.25]}), context=context))


lance = LanceResource(root_uri=ROOT, storage_options=OPTIONS)
maintenance = build_lance_maintenance_job("lance_maintenance", assets=[clicks, scores],
                                          selection=["clicks", "scores"], lance=lance)

defs = dg.Definitions(
    assets=[clicks, scores],
    jobs=[maintenance],
    resources={"io_manager": LanceIOManager(root_uri=ROOT, storage_options=OPTIONS), "lance": lance},
)
