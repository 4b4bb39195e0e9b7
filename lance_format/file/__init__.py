"""Lance data files (format 2.0 / 2.1 / 2.2): :class:`LanceFileWriter` and :class:`LanceFileReader`.

The writer (and the 2.0 / 2.1 encoders behind it) loads on first use (PEP 562): a process that
only reads (a scan, a filtered or indexed query) never imports the encoders.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lance_format.file.metadata import (
    LanceBufferDescriptor,
    LanceColumnMetadata,
    LanceColumnStatistics,
    LanceFileMetadata,
    LanceFileStatistics,
    LancePageMetadata,
)
from lance_format.file.reader import LanceFileReader, ReaderResults

if TYPE_CHECKING:
    from lance_format.file.writer import LanceFileWriter

__all__ = [
    "LanceBufferDescriptor",
    "LanceColumnMetadata",
    "LanceColumnStatistics",
    "LanceFileMetadata",
    "LanceFileReader",
    "LanceFileStatistics",
    "LanceFileWriter",
    "LancePageMetadata",
    "ReaderResults",
]


def __getattr__(name: str) -> Any:
    if name == "LanceFileWriter":
        value = importlib.import_module("lance_format.file.writer").LanceFileWriter
        globals()[name] = value  # later reads are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
