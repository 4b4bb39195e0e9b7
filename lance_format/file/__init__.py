"""Lance data files (format 2.0 / 2.1 / 2.2): :class:`LanceFileWriter` and :class:`LanceFileReader`."""

from lance_format.file.reader import LanceFileReader, ReaderResults
from lance_format.file.writer import LanceFileWriter

__all__ = ["LanceFileReader", "LanceFileWriter", "ReaderResults"]
