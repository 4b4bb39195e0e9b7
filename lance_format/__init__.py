"""A pure-Python implementation of the Lance table format.

Public names mirror pylance (``import lance_format as lance``):
``dataset``, ``write_dataset``, ``LanceDataset``, ``LanceOperation``, ``FragmentMetadata``,
``LanceFragment``, ``write_fragments``.
"""

from __future__ import annotations

# Every read needs the file decoders; they load here rather than inside a process's first scan
# or take, as pylance's native module holds all of its code once imported (measured in
# benchmarks/bench_dataset.py: ~10 ms moves from the first read to the import).
import lance_format.file.reader
import lance_format.file.v2_0.decoder
import lance_format.file.v2_1.decoder  # noqa: F401
from lance_format.dataset import CleanupStats, LanceDataset, LanceOperation, Tags, Transaction, dataset
from lance_format.evolution.bases import DatasetBasePath
from lance_format.evolution.scan_options import ColumnOrdering
from lance_format.evolution.udf import BatchUDF, BatchUDFCheckpoint, batch_udf
from lance_format.fragment import DataFile, DeletionFile, FragmentMetadata, LanceFragment, write_fragments
from lance_format.io_stats import IOStats
from lance_format.scanner import LanceScanner, ScanStatistics
from lance_format.schema_json import json_to_schema, schema_to_json
from lance_format.session import Session
from lance_format.stats import DataStatistics, FieldStatistics
from lance_format.table.blobs import BlobFile
from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata
from lance_format.table.transaction import Index
from lance_format.write import write_dataset

__version__ = "0.1.0"

__all__ = [
    "BatchUDF",
    "BatchUDFCheckpoint",
    "BlobFile",
    "CleanupStats",
    "DataStatistics",
    "FieldStatistics",
    "DataFile",
    "DeletionFile",
    "FragmentMetadata",
    "Index",
    "IndexDetails",
    "IndexFile",
    "IndexMetadata",
    "LanceDataset",
    "ColumnOrdering",
    "DatasetBasePath",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "IOStats",
    "ScanStatistics",
    "Session",
    "Tags",
    "Transaction",
    "__version__",
    "batch_udf",
    "dataset",
    "json_to_schema",
    "schema_to_json",
    "write_dataset",
    "write_fragments",
]
