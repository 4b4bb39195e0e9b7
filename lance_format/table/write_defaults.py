"""Default sizes of written data files (pylance's ``write_dataset`` / ``write_fragments`` defaults).

Apart from :mod:`lance_format.table.writing` so the public signatures that show them
(``write_fragments``, ``LanceFragment.create``, Spark options) do not load the writer, the file
encoders and the commit models in a process that only reads.
"""

from __future__ import annotations

DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
DEFAULT_MAX_ROWS_PER_GROUP = 1024
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024 * 1024 * 1024

__all__ = ["DEFAULT_MAX_BYTES_PER_FILE", "DEFAULT_MAX_ROWS_PER_FILE", "DEFAULT_MAX_ROWS_PER_GROUP"]
