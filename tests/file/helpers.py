"""Helpers shared by the file-format tests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from lance_format.file import LanceFileWriter


def write_public_file(path: Path, table: pa.Table, version: str = "2.1") -> None:
    """Write ``table`` as one Lance file through the public ``LanceFileWriter``."""
    writer = LanceFileWriter(str(path), table.schema, version=version)
    writer.write_batch(table)
    writer.close()
