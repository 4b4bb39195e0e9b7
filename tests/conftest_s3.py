"""A real moto S3 server on loopback for tests.

Import the fixtures into a test module (or a conftest) with::

    from conftest_s3 import s3_server, s3_uri  # noqa: F401

``s3_server`` (session scope) starts ``moto.server.ThreadedMotoServer`` on
127.0.0.1 with a free port, creates a bucket and yields
``(endpoint_url, bucket, storage_options)``; ``s3_uri`` yields a fresh
``s3://bucket/<random>`` root per test so tests never see each other's keys.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator

import pytest

S3Server = tuple[str, str, dict[str, str]]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """Start moto on loopback; yield (endpoint_url, bucket, storage_options)."""
    pytest.importorskip("moto.server")
    import boto3
    from moto.server import ThreadedMotoServer

    # Keep boto3 away from real credentials / config files of the machine.
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        os.environ.pop(name, None)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    bucket = f"lance-test-{uuid.uuid4().hex[:12]}"
    options = {
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "aws_region": "us-east-1",
        "aws_endpoint": endpoint,
        "allow_http": "true",
    }
    try:
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket=bucket)
        yield endpoint, bucket, options
    finally:
        server.stop()


@pytest.fixture
def s3_uri(s3_server: S3Server) -> str:
    """A fresh, empty ``s3://bucket/prefix`` root on the shared moto server."""
    _endpoint, bucket, _options = s3_server
    return f"s3://{bucket}/t-{uuid.uuid4().hex}"
