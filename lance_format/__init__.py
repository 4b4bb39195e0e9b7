"""A pure-Python implementation of the Lance table format.

Public names mirror pylance (``import lance_format as lance``):
``dataset``, ``write_dataset``, ``LanceDataset``, ``LanceOperation``, ``FragmentMetadata``,
``LanceFragment``, ``write_fragments``.
"""

from __future__ import annotations

from lance_format.dataset import LanceDataset, LanceOperation, Tags, Transaction, dataset
from lance_format.fragment import DataFile, DeletionFile, FragmentMetadata, LanceFragment, write_fragments
from lance_format.scanner import LanceScanner
from lance_format.table.transaction import Index
from lance_format.write import write_dataset

__version__ = "0.1.0"

__all__ = [
    "DataFile",
    "DeletionFile",
    "FragmentMetadata",
    "Index",
    "LanceDataset",
    "LanceFragment",
    "LanceOperation",
    "LanceScanner",
    "Tags",
    "Transaction",
    "__version__",
    "dataset",
    "write_dataset",
    "write_fragments",
]
