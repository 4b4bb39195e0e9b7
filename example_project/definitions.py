"""The example code location: assets, asset checks, the Lance IO manager and resources, jobs, the
nightly maintenance schedule, the health sensor, and the datasets declared in ``defs/`` (YAML).

Datasets live under ``$LANCE_EXAMPLE_ROOT`` (default ``example_project/.data/lance``); on S3 the
credentials come from the ``AWS_*`` environment variables as ``dg.EnvVar`` (see ``settings.py``).
"""

from __future__ import annotations

import dagster as dg
from dagster import AssetSelection, Definitions, define_asset_job

from lance_dagster import LanceIOManager, LanceResource
from lance_dagster.maintenance import lance_pyspark_resource

from . import defs as component_defs
from .assets import category_stats, clean_events, embedding_centroids, event_log, nearest_events, raw_events
from .checks import CHECKS
from .maintenance import maintenance_definitions
from .pipeline import category_daily_stats, daily_events, event_features, user_profiles
from .settings import LANCE_ROOT, PROJECT_DIR, STORAGE_OPTIONS

ASSETS = [raw_events, clean_events, event_log, category_stats, embedding_centroids, nearest_events,
          event_features, daily_events, user_profiles, category_daily_stats]

refresh_all = define_asset_job(
    "refresh_all", selection=AssetSelection.all() - AssetSelection.assets(daily_events),
    description="Ingest, clean, featurize, upsert profiles and aggregate on Spark.")
daily_partitions = define_asset_job(
    "daily_partitions", selection=AssetSelection.assets(daily_events), partitions_def=daily_events.partitions_def,
    description="Rebuild one day of the daily-partitioned feature table.")

lance = LanceResource(root_uri=LANCE_ROOT, storage_options=STORAGE_OPTIONS)
# One local Spark session per run process, shared by the Spark-written asset and maintenance; it
# starts with the run because the IO manager loads the Spark asset's input before the body runs.
pyspark = lance_pyspark_resource("local[*]", start_on_setup=True)
maintenance_job, nightly_maintenance, health_sensor = maintenance_definitions(
    ASSETS, lance, lance_pyspark_resource("local[*]"))

python_defs = Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[refresh_all, daily_partitions, maintenance_job],
    schedules=[nightly_maintenance],
    sensors=[health_sensor],
    resources={
        "io_manager": LanceIOManager(root_uri=LANCE_ROOT, storage_options=STORAGE_OPTIONS),
        "lance": lance,
        "pyspark": pyspark,
    },
)

defs = Definitions.merge(python_defs, dg.load_defs(component_defs, project_root=PROJECT_DIR.parent))
