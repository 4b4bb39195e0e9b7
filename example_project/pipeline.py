"""The feature pipeline: features with an embedding column, a daily-partitioned table, an upserted
user table and a Spark-written aggregate.

``clean_events`` -> ``event_features`` (embedding) -> ``daily_events`` (one partition per day)
                                                 \\-> ``user_profiles`` (merge / upsert on ``user_id``)
                                                 \\-> ``category_daily_stats`` (read, computed and written by Spark)
"""


import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    AssetExecutionContext,
    AssetIn,
    DailyPartitionsDefinition,
    asset,
)
from pyspark.sql import DataFrame

from .assets import CATEGORIES, EMBEDDING_DIM, EMBEDDING_TYPE

#: The daily partitions cover the days the synthetic events fall on (the last three days).
DAILY = DailyPartitionsDefinition(start_date=(dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).strftime("%Y-%m-%d"),
                                  end_offset=1)

_PROJECTION = np.random.default_rng(1234).normal(size=(len(CATEGORIES) + 2, EMBEDDING_DIM)).astype(np.float32)


def embed(category: pa.ChunkedArray, value: pa.ChunkedArray, hour: pa.ChunkedArray) -> pa.Array:
    """A deterministic 8-d embedding of (category, value, hour of day): a fixed random projection."""
    cats = np.asarray(pc.fill_null(category, "").to_pylist(), dtype=object)
    onehot = (cats[:, None] == CATEGORIES[None, :]).astype(np.float32)
    extra = np.stack([np.log1p(np.asarray(value.to_numpy(zero_copy_only=False), np.float32)),
                      np.asarray(hour.to_numpy(zero_copy_only=False), np.float32) / 23.0], axis=1)
    vectors = np.concatenate([onehot, extra], axis=1) @ _PROJECTION
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), EMBEDDING_DIM)


@asset(group_name="features", code_version="1", kinds={"lance"})
def event_features(clean_events: pa.Table) -> pa.Table:
    """Cleaned events with model features: hour of day and an ``embedding`` of the event."""
    hour = pc.hour(clean_events["ts"])
    features = clean_events.drop_columns(["embedding"]).append_column("hour", pc.cast(hour, pa.int8()))
    return features.append_column(pa.field("embedding", EMBEDDING_TYPE),
                                  embed(features["category"], features["value"], hour))


@asset(
    group_name="features",
    code_version="1",
    kinds={"lance"},
    partitions_def=DAILY,
    metadata={"partition_expr": "day"},
)
def daily_events(context: AssetExecutionContext, event_features: pa.Table) -> pa.Table:
    """One day of feature rows; materializing a day replaces exactly that day's rows (one commit)."""
    day = dt.date.fromisoformat(context.partition_key)
    return event_features.filter(pc.equal(event_features["day"], pa.scalar(day, pa.date32())))


@asset(
    group_name="features",
    code_version="1",
    kinds={"lance"},
    metadata={"mode": "merge", "merge_on": "user_id"},
)
def user_profiles(event_features: pa.Table) -> pa.Table:
    """Per-user profile upserted on ``user_id``: users in this batch are updated, new users inserted."""
    grouped = event_features.group_by("user_id").aggregate(
        [("event_id", "count"), ("value", "sum"), ("ts", "max")])
    return pa.table({
        "user_id": grouped["user_id"],
        "events_in_batch": pc.cast(grouped["event_id_count"], pa.int64()),
        "value_in_batch": grouped["value_sum"],
        "last_seen": grouped["ts_max"],
    })


@asset(
    group_name="analytics",
    code_version="1",
    kinds={"lance", "spark"},
    ins={"event_features": AssetIn(metadata={"columns": ["day", "category", "value"]})},
    required_resource_keys={"pyspark"},
)
def category_daily_stats(event_features: DataFrame) -> DataFrame:
    """Events and value per day and category: read, aggregated and written by Spark executors.

    The input is a Spark DataFrame over the Lance dataset (three columns, pinned to the version
    read); the output's rows are written as Lance fragments by the executors and committed once
    by the IO manager with the run's lineage.
    """
    from pyspark.sql import functions as F

    return (event_features.groupBy("day", "category")
            .agg(F.count("*").alias("events"), F.sum("value").alias("total_value"))
            .orderBy("day", "category"))
