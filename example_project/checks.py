"""Asset checks of the example: data expectations, and each dataset's maintenance health."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetCheckResult, asset_check

from lance_dagster.checks import HealthLimits, build_lance_asset_checks

from .assets import clean_events, event_log, raw_events
from .pipeline import daily_events, event_features, user_profiles
from .settings import LANCE_ROOT, STORAGE_OPTIONS

#: The maintenance-health limits of the checks (the health sensor in ``maintenance`` uses the same numbers).
LIMITS = HealthLimits(max_fragments=16, small_fragment_rows=10_000, max_deleted_ratio=0.2, max_versions=50)


@asset_check(asset=event_features, description="Every embedding is present and unit length.")
def embeddings_are_unit_vectors(event_features: pa.Table) -> AssetCheckResult:
    emb = event_features["embedding"]
    nulls = emb.null_count
    vectors = pc.drop_null(emb).combine_chunks().flatten().to_numpy().reshape(-1, 8)
    worst = float(np.abs(np.linalg.norm(vectors, axis=1) - 1.0).max()) if len(vectors) else 0.0
    return AssetCheckResult(passed=nulls == 0 and worst < 1e-3,
                            metadata={"null_embeddings": nulls, "max_norm_error": worst})


@asset_check(asset=user_profiles, description="The upsert keeps one row per user.")
def one_row_per_user(user_profiles: pa.Table) -> AssetCheckResult:
    users = user_profiles["user_id"]
    dupes = len(users) - len(pc.unique(users))
    return AssetCheckResult(passed=dupes == 0, metadata={"rows": len(users), "duplicate_users": dupes})


CHECKS = [
    embeddings_are_unit_vectors,
    one_row_per_user,
    # Schema (columns may only be added), row count and maintenance health, read by the health sensor.
    *build_lance_asset_checks([raw_events, clean_events, event_log, event_features, daily_events, user_profiles],
                              root_uri=LANCE_ROOT, storage_options=STORAGE_OPTIONS, min_rows=1, health=LIMITS),
]
