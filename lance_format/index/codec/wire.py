"""A minimal protobuf wire reader and writer for the small index messages.

The vector index messages are a handful of scalar, packed and nested fields; walking the
wire directly keeps field order (pylance's ``runtime_hints`` map order is part of the
bytes) and lets malformed input fail with a :class:`CorruptFileError` naming the message.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from lance_format.errors import CorruptFileError

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


def read_varint(buf: bytes, pos: int, where: str) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptFileError(f"{where}: truncated or overlong varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7


def fields(buf: bytes, where: str) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of each field in order (LEN values as bytes)."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos, where)
        num, wt = key >> 3, key & 7
        value: int | bytes
        if wt == VARINT:
            value, pos = read_varint(buf, pos, where)
        elif wt == FIXED64:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wt == FIXED32:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        elif wt == LEN:
            size, pos = read_varint(buf, pos, where)
            value, pos = bytes(buf[pos:pos + size]), pos + size
        else:
            raise CorruptFileError(f"{where}: unsupported wire type {wt} for field {num}")
        if pos > len(buf) or num == 0:
            raise CorruptFileError(f"{where}: truncated message (field {num})")
        yield num, wt, value


def field_map(buf: bytes, where: str) -> dict[int, int | bytes] | None:
    """Each field's last value by number, or ``None`` when ``buf`` does not parse.

    For callers that only peek at a few options of a details message and treat damage as
    "not this layout" (the reader proper reports the corruption).
    """
    try:
        return {num: value for num, _, value in fields(buf, where)}
    except CorruptFileError:
        return None


def packed_varints(data: bytes, where: str) -> list[int]:
    """The values of a packed repeated varint field."""
    out, pos = [], 0
    while pos < len(data):
        v, pos = read_varint(data, pos, where)
        out.append(v)
    return out


def varint(value: int) -> bytes:
    """``value`` (unsigned, < 2**64) as a varint."""
    out = bytearray()
    value &= 0xFFFFFFFFFFFFFFFF
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num: int, wt: int) -> bytes:
    """A field key."""
    return varint(num << 3 | wt)


def varint_field(num: int, value: int) -> bytes:
    """One varint field."""
    return key(num, VARINT) + varint(value)


def len_field(num: int, data: bytes) -> bytes:
    """One length-delimited field (bytes, string, nested message, packed values)."""
    return key(num, LEN) + varint(len(data)) + data


def double_field(num: int, value: float) -> bytes:
    """One ``double`` field."""
    return key(num, FIXED64) + struct.pack("<d", value)


def packed_field(num: int, values: npt.NDArray[np.uint64] | list[int]) -> bytes:
    """A packed repeated varint field (written even when empty, as pylance's IVF does)."""
    return len_field(num, b"".join(varint(int(v)) for v in values))
