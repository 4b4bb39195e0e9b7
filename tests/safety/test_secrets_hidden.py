"""Storage options (credentials) never show in reprs of the Dagster plugin's objects."""

from __future__ import annotations

from lance_dagster import LanceIOManager
from lance_dagster.config import make_settings
from lance_dagster.resource import LanceResource

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
