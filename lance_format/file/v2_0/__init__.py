"""Lance file format 2.0: the ``lance.encodings.ArrayEncoding`` page encodings.

Decoding lives in :mod:`.page_decode` (one page tree) and :mod:`.decoder` (fields over columns);
encoding in :mod:`.page_encode` and :mod:`.encoder`; :mod:`.columns` maps fields to columns.
The encoder loads on first use (PEP 562), so reading a 2.0 file never imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lance_format.file.v2_0.decoder import FileDecoder20

if TYPE_CHECKING:
    from lance_format.file.v2_0.encoder import FileEncoder20

__all__ = ["FileDecoder20", "FileEncoder20"]


def __getattr__(name: str) -> Any:
    if name == "FileEncoder20":
        value = importlib.import_module("lance_format.file.v2_0.encoder").FileEncoder20
        globals()[name] = value  # later reads are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
