"""A pure-Python implementation of the Lance table format.

Public names mirror pylance (``import lance_format as lance``):
``dataset``, ``write_dataset``, ``LanceDataset``, ``LanceOperation``, ``FragmentMetadata``,
``LanceFragment``, ``write_fragments``.

The public names load on first use (PEP 562): ``import lance_format`` alone costs next to
nothing, so a process that only needs a part of the package (a Spark worker reading
fragments, a Dagster code server listing assets) does not pay for the rest (index builds,
maintenance, search: about 1 s of CPU on a cold start). ``from lance_format import X`` and
``lance_format.X`` behave as if the names were imported here.
"""

from __future__ import annotations

import copyreg
import importlib
import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Public name -> the module defining it (the imports under ``TYPE_CHECKING`` above, for the type
#: checker; tests/test_lazy_import.py checks the two agree).
_HOMES = {
    "CleanupStats": "lance_format.dataset",
    "LanceDataset": "lance_format.dataset",
    "LanceOperation": "lance_format.dataset",
    "Tags": "lance_format.dataset",
    "Transaction": "lance_format.dataset",
    "dataset": "lance_format.dataset",
    "DatasetBasePath": "lance_format.evolution.bases",
    "ColumnOrdering": "lance_format.evolution.scan_options",
    "BatchUDF": "lance_format.evolution.udf",
    "BatchUDFCheckpoint": "lance_format.evolution.udf",
    "batch_udf": "lance_format.evolution.udf",
    "DataFile": "lance_format.fragment",
    "DeletionFile": "lance_format.fragment",
    "FragmentMetadata": "lance_format.fragment",
    "LanceFragment": "lance_format.fragment",
    "write_fragments": "lance_format.fragment",
    "IOStats": "lance_format.io_stats",
    "LanceScanner": "lance_format.scanner",
    "ScanStatistics": "lance_format.scanner",
    "json_to_schema": "lance_format.schema_json",
    "schema_to_json": "lance_format.schema_json",
    "Session": "lance_format.session",
    "DataStatistics": "lance_format.stats",
    "FieldStatistics": "lance_format.stats",
    "BlobFile": "lance_format.table.blobs",
    "IndexDetails": "lance_format.table.index_metadata",
    "IndexFile": "lance_format.table.index_metadata",
    "IndexMetadata": "lance_format.table.index_metadata",
    "Index": "lance_format.table.transaction",
    "write_dataset": "lance_format.write",
}

#: Every read needs the file decoders; the first public name loads them along (as the eager
#: package did at import), so a first scan or take does not pay for them (measured in
#: benchmarks/bench_dataset.py: ~10 ms).
_DECODERS = ("lance_format.file.reader", "lance_format.file.v2_0.decoder", "lance_format.file.v2_1.decoder")


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        # ``lance_format.errors`` after a bare ``import lance_format`` kept working while the
        # package imported everything: a submodule name imports that submodule.
        if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'lance_format' has no attribute {name!r}")
    for module in _DECODERS:
        importlib.import_module(module)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


class _Package(types.ModuleType):
    """This package's module type: ``lance_format.dataset`` stays the function.

    Importing the submodule ``lance_format.dataset`` binds the package attribute of that name
    to the module; the eager package then rebound it to pylance's ``dataset()`` function. Here
    the module binding is dropped, so ``__getattr__`` resolves the function as before.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "dataset" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


def _reduce_package(module: types.ModuleType) -> tuple[Any, tuple[str]]:
    # Pickled by name like any module (cloudpickle reduces plain modules so; Spark pickles
    # functions that use ``lance_format``): unpickling imports the package.
    return importlib.import_module, (module.__name__,)


sys.modules[__name__].__class__ = _Package
copyreg.pickle(_Package, _reduce_package)


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
