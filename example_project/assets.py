"""Example assets: synthetic product events, cleaned, appended to a log, and aggregated.

``raw_events`` -> ``clean_events`` -> ``event_log`` (append) -> ``category_stats`` (pandas, column subset)
                               \\-> ``embedding_centroids`` (written through ``LanceResource``)
``event_log`` + ``embedding_centroids`` -> ``nearest_events`` (vector and full-text indices, ``nearest=``)
"""


import datetime as dt
import zlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetExecutionContext, AssetIn, MaterializeResult, asset

from lance_dagster import LanceResource, materialize_result
from lance_dagster.metadata import input_versions_metadata

EMBEDDING_DIM = 8
CATEGORIES = np.array(["view", "click", "search", "add_to_cart", "purchase"])
RAW_ROWS = 2_000

EMBEDDING_TYPE = pa.list_(pa.float32(), EMBEDDING_DIM)


def _dirty_categories(rng: np.random.Generator, n: int) -> pa.Array:
    """Categories as a tracking pipeline delivers them: mixed case, stray spaces, some missing."""
    base = CATEGORIES[rng.choice(len(CATEGORIES), size=n, p=[0.45, 0.25, 0.15, 0.1, 0.05])]
    variant = rng.integers(0, 10, size=n)
    upper = np.char.upper(base.astype(str))
    spaced = np.char.add(base.astype(str), " ")
    messy = np.where(variant == 0, upper, np.where(variant == 1, spaced, base))
    return pa.array(messy, type=pa.string(), mask=rng.random(n) < 0.02)


def make_raw_events(seed: int, n: int = RAW_ROWS, *, now: dt.datetime | None = None) -> pa.Table:
    """Build one batch of synthetic events (deterministic for a seed and ``now``)."""
    rng = np.random.default_rng(seed)
    now = now or dt.datetime.now(dt.UTC)
    # Spread over the last three days, so the daily-partitioned asset has several partitions.
    offsets_us = np.sort(rng.integers(0, 3 * 86_400 * 1_000_000, size=n))[::-1]
    ts = np.datetime64(now.replace(tzinfo=None), "us") - offsets_us.astype("timedelta64[us]")
    event_ids = np.char.add(f"{seed:08x}-", np.arange(n).astype(str))
    value = rng.gamma(2.0, 12.5, size=n).round(2)
    value[rng.random(n) < 0.01] = -1.0  # refunds mis-tracked as events; cleaning drops them
    vectors = rng.normal(size=(n, EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), EMBEDDING_DIM)
    embedding = pc.if_else(pa.array(rng.random(n) < 0.01), pa.nulls(n, EMBEDDING_TYPE), embedding)
    return pa.table(
        {
            "event_id": pa.array(event_ids, pa.string()),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "user_id": pa.array(rng.zipf(1.6, size=n) % 5_000, pa.int32()),
            "category": _dirty_categories(rng, n),
            "value": pa.array(value, pa.float64(), mask=rng.random(n) < 0.02),
            "embedding": embedding,
        }
    )


@asset(group_name="ingest", code_version="1", kinds={"lance"})
def raw_events(context: AssetExecutionContext) -> pa.Table:
    """Three days of raw product events from the (synthetic) tracking pipeline; replaced each run."""
    seed = zlib.crc32(context.run_id.encode())
    return make_raw_events(seed)


@asset(group_name="curated", code_version="1", kinds={"lance"})
def clean_events(raw_events: pa.Table) -> pa.Table:
    """Events with normalized categories, valid amounts and embeddings, and a ``day`` column."""
    category = pc.utf8_lower(pc.utf8_trim_whitespace(raw_events["category"]))
    table = raw_events.set_column(raw_events.schema.get_field_index("category"), "category", category)
    valid = pc.and_(
        pc.and_(pc.is_valid(table["category"]), pc.is_valid(table["embedding"])),
        pc.fill_null(pc.greater_equal(table["value"], 0.0), False),
    )
    table = table.filter(valid)
    return table.append_column("day", pc.cast(table["ts"], pa.date32()))


@asset(group_name="curated", code_version="1", kinds={"lance"}, metadata={"mode": "append"})
def event_log(context: AssetExecutionContext, clean_events: pa.Table) -> pa.Table:
    """Every cleaned batch ever ingested: each run appends one Lance version."""
    loaded_at = pa.scalar(dt.datetime.now(dt.UTC), pa.timestamp("us", tz="UTC"))
    return clean_events.append_column("loaded_at", pa.repeat(loaded_at, clean_events.num_rows))


@asset(
    group_name="analytics",
    code_version="1",
    kinds={"lance", "pandas"},
    ins={"event_log": AssetIn(metadata={"columns": ["category", "value", "ts"]})},
)
def category_stats(event_log: pd.DataFrame) -> pd.DataFrame:
    """Per-category totals over the whole event log (reads only three columns, as pandas)."""
    grouped = event_log.groupby("category", sort=True)
    stats = grouped.agg(
        events=("value", "size"),
        total_value=("value", "sum"),
        mean_value=("value", "mean"),
        first_seen=("ts", "min"),
        last_seen=("ts", "max"),
    ).reset_index()
    stats["category"] = stats["category"].astype(str)
    return stats


@asset(group_name="analytics", code_version="1", kinds={"lance"}, deps=[clean_events])
def embedding_centroids(
    context: AssetExecutionContext, lance: LanceResource
) -> MaterializeResult:  # type: ignore[type-arg]
    """Mean embedding per category, computed and committed directly through ``LanceResource``."""
    source = lance.dataset("clean_events")
    table = source.to_table(columns=["category", "embedding"])
    codes = pc.dictionary_encode(table["category"]).combine_chunks()
    idx = codes.indices.to_numpy()
    vectors = table["embedding"].combine_chunks().flatten().to_numpy().reshape(-1, EMBEDDING_DIM)
    n_cat = len(codes.dictionary)
    sums = np.zeros((n_cat, EMBEDDING_DIM), np.float64)
    np.add.at(sums, idx, vectors)
    counts = np.bincount(idx, minlength=n_cat)
    centroids = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
    out = pa.table(
        {
            "category": codes.dictionary,
            "events": pa.array(counts, pa.int64()),
            "centroid": pa.FixedSizeListArray.from_arrays(pa.array(centroids.reshape(-1)), EMBEDDING_DIM),
        }
    )
    result = materialize_result(lance.write("embedding_centroids", out, mode="overwrite", context=context))
    metadata = dict(result.metadata or {})
    metadata.update(input_versions_metadata({"clean_events": int(source.version)}))
    return MaterializeResult(metadata=metadata, data_version=result.data_version)


@asset(group_name="analytics", code_version="1", kinds={"lance"}, deps=[event_log, embedding_centroids])
def nearest_events(context: AssetExecutionContext, lance: LanceResource) -> MaterializeResult:  # type: ignore[type-arg]
    """The five events nearest each category centroid, found through the event log's vector index.

    The first run builds an ``IVF_PQ`` index on ``event_log.embedding`` and a full-text (``INVERTED``)
    index on ``event_log.category``; later appends are folded in by the maintenance job's
    ``optimize_indices`` (a delta segment) and compaction remaps both, as pylance would.
    """
    log = lance.dataset("event_log")
    names = {i.name for i in log.list_indices()}
    if "embedding_idx" not in names:
        log.create_index("embedding", "IVF_PQ", num_partitions=4, num_sub_vectors=2, metric="cosine")
    if "category_idx" not in names:
        log.create_scalar_index("category", "INVERTED")
    centroids = lance.dataset("embedding_centroids").to_table()
    parts = []
    for category, centroid in zip(centroids["category"].to_pylist(), centroids["centroid"].to_pylist(),
                                  strict=True):
        hits = log.to_table(columns=["event_id", "category"], nearest={
            "column": "embedding", "q": np.asarray(centroid, np.float32), "k": 5, "nprobes": 4})
        parts.append(hits.append_column("centroid_of", pa.repeat(pa.scalar(category), hits.num_rows)))
    out = pa.concat_tables(parts)
    purchases = log.to_table(columns=["event_id"], full_text_query="purchase").num_rows
    probe = {"column": "embedding", "q": np.zeros(EMBEDDING_DIM, np.float32), "k": 5}
    result = materialize_result(lance.write("nearest_events", out, mode="overwrite", context=context))
    metadata = dict(result.metadata or {})
    metadata.update({"purchase_events (full-text)": purchases,
                     "vector_plan": log.scanner(nearest=probe).explain_plan().splitlines()[0]})
    return MaterializeResult(metadata=metadata, data_version=result.data_version)
