"""Lance file format 2.0: the ``lance.encodings.ArrayEncoding`` page encodings.

Decoding lives in :mod:`.page_decode` (one page tree) and :mod:`.decoder` (fields over columns);
encoding in :mod:`.page_encode` and :mod:`.encoder`; :mod:`.columns` maps fields to columns.
The decoder and the encoder load on first use (PEP 562): importing a helper module of this
package (``.buffers``, which 2.1 reads use too) loads neither, and reading a 2.0 file never
imports the encoder.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lance_format.file.v2_0.decoder import FileDecoder20
    from lance_format.file.v2_0.encoder import FileEncoder20

__all__ = ["FileDecoder20", "FileEncoder20"]


_HOMES = {"FileDecoder20": "lance_format.file.v2_0.decoder", "FileEncoder20": "lance_format.file.v2_0.encoder"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value  # later reads are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
