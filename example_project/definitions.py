"""The example code location: assets, the Lance IO manager and resource, and one job.

Datasets live under ``$LANCE_EXAMPLE_ROOT`` (default ``example_project/.data/lance``).
"""

from __future__ import annotations

import os
from pathlib import Path

from dagster import AssetSelection, Definitions, define_asset_job

from lance_dagster import LanceIOManager, LanceResource

from .assets import category_stats, clean_events, embedding_centroids, event_log, raw_events

DATA_DIR = Path(__file__).resolve().parent / ".data"
LANCE_ROOT = os.environ.get("LANCE_EXAMPLE_ROOT", str(DATA_DIR / "lance"))

ASSETS = [raw_events, clean_events, event_log, category_stats, embedding_centroids]

refresh_all = define_asset_job("refresh_all", selection=AssetSelection.all(), description="Ingest and rebuild.")

defs = Definitions(
    assets=ASSETS,
    jobs=[refresh_all],
    resources={
        "io_manager": LanceIOManager(root_uri=LANCE_ROOT),
        "lance": LanceResource(root_uri=LANCE_ROOT),
    },
)
