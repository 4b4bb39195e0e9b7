"""Dagster integration for Lance datasets, built on the pure-Python ``lance_format`` core.

* :class:`LanceIOManager` stores assets as Lance datasets (pyarrow and pandas), one commit per
  materialization, with Dagster lineage in the commit's transaction properties.
* :class:`LanceResource` opens and writes datasets directly from ops and assets.
"""

from .config import LanceSettings, WriteMode, dataset_uri, default_root_uri
from .handlers import ArrowHandler, FrameHandler, PandasHandler
from .io_manager import LanceIOManager, LanceStorageIOManager
from .lineage import CommitInfo, VersionRecord, read_commit, version_history
from .metadata import materialize_result, write_metadata
from .reader import ArrowSource, ReadSpec
from .resource import LanceResource
from .writer import WriteResult, commit_arrow

__all__ = [
    "ArrowHandler",
    "ArrowSource",
    "CommitInfo",
    "FrameHandler",
    "LanceIOManager",
    "LanceResource",
    "LanceSettings",
    "LanceStorageIOManager",
    "PandasHandler",
    "ReadSpec",
    "VersionRecord",
    "WriteMode",
    "WriteResult",
    "commit_arrow",
    "dataset_uri",
    "default_root_uri",
    "materialize_result",
    "read_commit",
    "version_history",
    "write_metadata",
]
