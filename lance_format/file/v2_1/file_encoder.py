"""``FileEncoder21``: the 2.1 / 2.2 encoder as plugged into ``lance_format.file.writer``.

Kept out of the package's ``__init__`` so that reading never imports the encoder modules.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lance_format.file.v2_1 import owning_field_positions
from lance_format.file.v2_1.encoder import Encoder21


class FileEncoder21(Encoder21):
    """Encoder plugged into :class:`lance_format.file.writer.LanceFileWriter` for 2.1 / 2.2.

    Args:
        writer: ``ContainerWriter`` receiving page buffers.
        schema: Arrow schema of the batches.
        max_page_bytes: Bytes buffered per top-level field before a page is written.
        version: ``(2, 1)`` or ``(2, 2)``; the page grammar differs, so the writer must pass it
            (defaults to the writer's ``file_version`` attribute if present, else 2.2).
    """

    def __init__(
        self,
        writer: Any,
        schema: pa.Schema,
        *,
        max_page_bytes: int | None = None,
        version: tuple[int, int] | None = None,
    ) -> None:
        if version is None:
            version = getattr(writer, "file_version", None) or getattr(writer, "version", None) or (2, 2)
        super().__init__(schema, (int(version[0]), int(version[1])), writer, max_page_bytes)
        self.owning_fields = owning_field_positions(schema)


__all__ = ["Encoder21", "FileEncoder21"]
