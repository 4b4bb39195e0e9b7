"""Lance file format 2.0: the ``lance.encodings.ArrayEncoding`` page encodings.

Decoding lives in :mod:`.page_decode` (one page tree) and :mod:`.decoder` (fields over columns);
encoding in :mod:`.page_encode` and :mod:`.encoder`; :mod:`.columns` maps fields to columns.
"""

from lance_format.file.v2_0.decoder import FileDecoder20
from lance_format.file.v2_0.encoder import FileEncoder20

__all__ = ["FileDecoder20", "FileEncoder20"]
