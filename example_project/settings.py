"""Where the example keeps its datasets: ``$LANCE_EXAMPLE_ROOT``, default ``example_project/.data/lance``.

On local disk no storage options are needed. Pointed at S3 (``LANCE_EXAMPLE_ROOT=s3://bucket/lake``),
the example passes its credentials as ``dg.EnvVar`` references: the Dagster UI shows the variables'
names, and runs (and sensors) read their values from the environment.
"""

import os
from pathlib import Path

import dagster as dg

PROJECT_DIR = Path(__file__).resolve().parent
DATA_DIR = PROJECT_DIR / ".data"
# The YAML components read the root from the environment too, so it is set once here.
LANCE_ROOT = os.environ.setdefault("LANCE_EXAMPLE_ROOT", str(DATA_DIR / "lance"))

#: Storage options of every Lance resource, IO manager and check of the example.
STORAGE_OPTIONS: dict[str, str] = {}
if LANCE_ROOT.startswith(("s3://", "s3+ddb://")):
    # Secrets as EnvVar (never a plain string: it would be part of the resource's config); only the
    # variables that are set, so an instance role or a credentials file can provide the rest.
    STORAGE_OPTIONS = {option: dg.EnvVar(var) for option, var in [
        ("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
        ("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
        ("aws_session_token", "AWS_SESSION_TOKEN"),
    ] if var in os.environ}
    # Not secrets: shown as they are.
    STORAGE_OPTIONS.update({option: os.environ[var] for option, var in [
        ("aws_region", "AWS_REGION"), ("aws_endpoint", "AWS_ENDPOINT_URL")] if var in os.environ})
