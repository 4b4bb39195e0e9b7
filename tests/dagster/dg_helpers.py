"""Shared helpers for the Dagster tests."""

from __future__ import annotations

from typing import Any

import pytest
from dagster import AssetKey, ExecuteInProcessResult

import lance_format

requires_table_layer = pytest.mark.skipif(
    not hasattr(lance_format, "write_dataset"), reason="lance_format.write_dataset is not available yet"
)


def materialization(result: ExecuteInProcessResult, key: str) -> Any:
    """The single materialization of ``key`` in a run."""
    events = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == AssetKey.from_user_string(key)
    ]
    assert len(events) == 1, f"expected one materialization of {key}, got {len(events)}"
    return events[0]


def meta(mat: Any) -> dict[str, Any]:
    """Raw values of a materialization's metadata."""
    return {k: v.value for k, v in mat.metadata.items()}
