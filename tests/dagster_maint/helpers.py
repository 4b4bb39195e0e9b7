"""Helpers shared by the maintenance tests."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from dagster import AssetIn, AssetsDefinition, DagsterEventType, asset

from .conftest import batch


def observations(result: Any, asset: str | None = None) -> list[Any]:
    """The AssetObservations a run recorded (optionally only those of one asset)."""
    out = []
    for event in result.all_events:
        if event.event_type == DagsterEventType.ASSET_OBSERVATION:
            obs = event.event_specific_data.asset_observation
            if asset is None or obs.asset_key.to_user_string() == asset:
                out.append(obs)
    return out


def values(obs: Any) -> dict[str, Any]:
    """Metadata of an event as plain values."""
    return {k: v.value for k, v in obs.metadata.items()}


def by_step(result: Any, asset: str) -> dict[str, Any]:
    """The observation of each maintenance step on ``asset`` (compaction / index / cleanup)."""
    return {values(o)["lance/maintenance_step"]: o for o in observations(result, asset)}


def appending_asset(name: str = "events") -> AssetsDefinition:
    """An append-mode asset that adds three rows per materialization (ids from the run count)."""
    counter = {"n": 0}

    @asset(name=name, metadata={"mode": "append"})
    def _asset() -> pa.Table:
        counter["n"] += 1
        return batch(counter["n"] * 100)

    return _asset


def pinning_asset(version: int) -> AssetsDefinition:
    """An asset that reads ``events`` at a pinned version."""

    @asset(name="pinned_reader", ins={"events": AssetIn(metadata={"version": version})})
    def _asset(events: pa.Table) -> pa.Table:
        return events

    return _asset
