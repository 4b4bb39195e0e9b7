"""Lance data files (format 2.0 / 2.1 / 2.2): :class:`LanceFileWriter` and :class:`LanceFileReader`."""

from lance_format.file.metadata import (
    LanceBufferDescriptor,
    LanceColumnMetadata,
    LanceColumnStatistics,
    LanceFileMetadata,
    LanceFileStatistics,
    LancePageMetadata,
)
from lance_format.file.reader import LanceFileReader, ReaderResults
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
