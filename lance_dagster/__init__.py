"""Dagster integration for Lance datasets, built on the pure-Python ``lance_format`` core.

* :class:`LanceIOManager` stores assets as Lance datasets (pyarrow, pandas, polars), one commit per
  materialization (per partition for partitioned assets), with Dagster lineage in the commit's
  transaction properties.
* :class:`LanceResource` opens and writes datasets directly from ops and assets.
* :func:`build_lance_observation_sensor` records commits made outside Dagster; :func:`build_lance_asset_checks`
  checks schema, row counts and maintenance health.
"""

from .checks import HealthLimits, build_lance_asset_checks
from .config import (
    LanceSettings,
    MergeOptions,
    SchemaMode,
    WriteMode,
    WriteOptions,
    dataset_uri,
    default_root_uri,
)
from .handlers import ArrowHandler, FrameHandler, LanceDatasetHandler, PandasHandler, PolarsHandler
from .io_manager import LanceIOManager, LanceStorageIOManager
from .lineage import CommitInfo, VersionRecord, read_commit, version_history
from .metadata import materialize_result, write_metadata
from .observe import build_lance_observation_sensor, lance_observable_source_asset
from .partitions import PartitionSlice
from .reader import ArrowSource, ReadSpec
from .resource import LanceResource
from .writer import WriteResult, commit_arrow

__all__ = [
    "ArrowHandler",
    "ArrowSource",
    "CommitInfo",
    "FrameHandler",
    "HealthLimits",
    "LanceDatasetHandler",
    "LanceIOManager",
    "LanceResource",
    "LanceSettings",
    "LanceStorageIOManager",
    "MergeOptions",
    "PandasHandler",
    "PartitionSlice",
    "PolarsHandler",
    "ReadSpec",
    "SchemaMode",
    "VersionRecord",
    "WriteMode",
    "WriteOptions",
    "WriteResult",
    "build_lance_asset_checks",
    "build_lance_observation_sensor",
    "commit_arrow",
    "dataset_uri",
    "default_root_uri",
    "lance_observable_source_asset",
    "materialize_result",
    "read_commit",
    "version_history",
    "write_metadata",
]
