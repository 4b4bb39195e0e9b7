"""Shared pytest configuration.

Hypothesis runs a bounded number of examples without deadlines: the machine
is small and shared, and the tests check behaviour, not timings.
"""

from __future__ import annotations

import os

import pytest
from conftest_s3 import s3_server, s3_uri  # noqa: F401  - one moto server for the whole session
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("default")


@pytest.fixture
def fresh_caches() -> None:
    """Empty the process-wide file-metadata and deletion-vector caches (for tests that count entries)."""
    from lance_format.file import reader as reader_mod
    from lance_format.table import deletion

    reader_mod.clear_metadata_cache()
    deletion.clear_deletion_cache()
