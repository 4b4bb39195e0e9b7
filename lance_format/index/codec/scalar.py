"""Details messages of the scalar kinds whose details are not empty.

``ZoneMapIndexDetails`` as pylance 14.0.2 writes it (observed on its bytes; the message is
newer than ``protos/index_old.proto``, where it is still empty): field 1 the zone size
(``rows_per_zone``), field 2 set to 1 for string and binary columns (0 otherwise), field 3
always 1. All three are written even when 0, as pylance does.
"""

from __future__ import annotations

import pyarrow as pa

from lance_format.index.codec.wire import varint_field


def _byte_like(typ: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ)
                or t.is_string_view(typ) or t.is_binary_view(typ))


def encode_zonemap_details(rows_per_zone: int, typ: pa.DataType) -> bytes:
    """The serialized ``ZoneMapIndexDetails`` of a ZONEMAP on a column of type ``typ``."""
    return varint_field(1, rows_per_zone) + varint_field(2, int(_byte_like(typ))) + varint_field(3, 1)
