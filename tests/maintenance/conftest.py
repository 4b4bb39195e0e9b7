"""Fixtures of the maintenance tests: both storage versions, stable row ids off and on."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["2.0", "2.2"])
def dsv(request: pytest.FixtureRequest) -> str:
    """Both storage versions."""
    return str(request.param)


@pytest.fixture(params=[False, True], ids=["addr", "stable"])
def stable(request: pytest.FixtureRequest) -> bool:
    """Stable row ids off and on."""
    return bool(request.param)
