"""Protobuf helpers shared by the table codecs: unknown fields and parsing with named errors."""

from __future__ import annotations

import bisect
from collections.abc import Collection
from typing import Any, NamedTuple, TypeVar

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format.errors import CorruptFileError, NotSupportedError

_M = TypeVar("_M", bound=Message)


_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "start-group", 4: "end-group", 5: "32-bit"}


class _Newer(NamedTuple):
    name: str
    wire_type: int
    changes_rows: bool  # reading the table while ignoring the field would give other rows


#: Fields newer than our protos that pylance 14.0.2 decodes (found by sending each field number
#: with a wrong wire type to pylance and reading the field name prost puts in its error). prost
#: refuses them with a wrong wire type or a malformed payload, so we refuse those too; the ones
#: that change which rows or values a fragment holds (data overlays, alternative row-id and
#: version sequences, a fragment tree replacing the fragment list) are refused when present at
#: all, since reading without them would return other rows than pylance. The others are kept
#: as unknown bytes, like any field from a newer writer.
_NEWER: dict[str, dict[int, _Newer]] = {
    "DataFragment": {
        11: _Newer("overlays", 2, True),
        12: _Newer("row_id_sequence", 2, True),
        13: _Newer("last_updated_at_version_sequence", 2, True),
        14: _Newer("created_at_version_sequence", 2, True),
        15: _Newer("clustering_id", 0, False),
        16: _Newer("metadata", 2, False),
    },
    "Manifest": {
        22: _Newer("fragment_tree", 2, True),
        25: _Newer("clustering", 2, False),
        26: _Newer("max_clustering_id", 0, False),
    },
}


def _check_wire_types(msg: Message, unknown: UnknownFieldSet, where: str) -> None:
    # The Python parser files a *known* field sent with the wrong wire type under unknown
    # fields and carries on; prost (pylance) refuses the message ("invalid wire type").
    name = msg.DESCRIPTOR.name
    by_number = msg.DESCRIPTOR.fields_by_number
    newer = _NEWER.get(name, {})
    at = f"{where}: " if where else ""
    for i in range(len(unknown)):
        field = unknown[i]
        fd = by_number.get(field.field_number)
        if fd is not None:
            raise CorruptFileError(
                f"{at}malformed {name}: field {fd.name!r} (#{field.field_number}) has wire "
                f"type {_WIRE_NAMES.get(field.wire_type, field.wire_type)}, which does not match its type")
        known = newer.get(field.field_number)
        if known is None:
            continue
        if field.wire_type != known.wire_type or (field.wire_type == 2 and not _well_formed(field.data)):
            raise CorruptFileError(f"{at}malformed {name}: field {known.name!r} (#{field.field_number}) "
                                   "has the wrong wire type or a malformed payload")
        if known.changes_rows:
            raise NotSupportedError(f"{at}{name} uses {known.name!r} (field #{field.field_number}), a newer "
                                    "Lance feature this reader does not support; reading without it would "
                                    "give other rows")


def _well_formed(data: bytes) -> bool:
    """Whether ``data`` parses as protobuf fields at the wire level (tags, lengths, varints)."""
    try:
        _walk(None, memoryview(data), 0, len(data), "")
    except CorruptFileError:
        return False
    return True


# --- varints prost refuses -----------------------------------------------------------
# A varint holds at most 64 bits: ten bytes, the tenth carrying one bit. prost refuses a tenth
# byte above 1 ("invalid varint"); the Python parser drops the extra bits and reads a value.
# Such a varint shows as nine bytes with the high bit set followed by a byte above 1. Finding
# those spots is cheap (a byte translation and substring search, in C); they also occur inside
# strings and blobs (UTF-8 text is full of high bytes), so a hit is confirmed by walking the
# message structure, descending only into the fields that contain a spot.
_CLASSES = bytes(0x48 if b >= 0x80 else 0x78 if b >= 2 else 0x6C for b in range(256))  # "H", "x", "l"
_WIDE = (b"H" * 10, b"H" * 9 + b"x")
_PACKED_VARINT = frozenset({
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_BOOL, FieldDescriptor.TYPE_ENUM,
})


def _suspects(data: bytes) -> list[int]:
    """Offsets of every byte that would be the too-wide tenth byte of a varint."""
    classes = data.translate(_CLASSES)
    found: set[int] = set()
    for pattern in _WIDE:
        at = classes.find(pattern)
        while at >= 0:
            found.add(at + 9)
            at = classes.find(pattern, at + 1)
    return sorted(found)


def _varint(buf: memoryview, pos: int, end: int, where: str) -> tuple[int, int]:
    value = shift = 0
    for i in range(10):
        if pos >= end:
            raise CorruptFileError(f"{where}: truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        if i == 9 and b > 1:
            raise CorruptFileError(f"{where}: malformed varint ending at byte {pos} (more than 64 bits)")
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise CorruptFileError(f"{where}: malformed varint ending at byte {pos} (more than 10 bytes)")


def _walk(desc: Any, buf: memoryview, pos: int, end: int, where: str, spots: list[int] | None = None,
          group: int = 0) -> int:
    """Walk fields from ``pos`` to ``end`` (or to the end of ``group``); returns where it stopped.

    With ``spots`` (sorted offsets), nested messages holding none of them are skipped unread.
    """
    while pos < end:
        tag, pos = _varint(buf, pos, end, where)
        number, wire_type = tag >> 3, tag & 7
        if number == 0 or wire_type > 5:
            raise CorruptFileError(f"{where}: invalid field tag {tag} before byte {pos}")
        if wire_type == 4:  # end of a group: only valid inside the group it closes
            if number != group:
                raise CorruptFileError(f"{where}: unmatched end-group tag before byte {pos}")
            return pos
        if wire_type == 3:
            pos = _walk(None, buf, pos, end, where, None, number)
        elif wire_type == 0:
            _, pos = _varint(buf, pos, end, where)
        elif wire_type in (1, 5):
            pos += 8 if wire_type == 1 else 4
        else:
            length, pos = _varint(buf, pos, end, where)
            stop = pos + length
            if stop > end:
                raise CorruptFileError(f"{where}: field of {length} bytes at byte {pos} runs past its message")
            fd = desc.fields_by_number.get(number) if desc is not None else None
            inside = spots is None or bisect.bisect_left(spots, pos) < bisect.bisect_left(spots, stop)
            if fd is not None and inside and fd.type == FieldDescriptor.TYPE_MESSAGE:
                _walk(fd.message_type, buf, pos, stop, where, spots)
            elif fd is not None and inside and fd.type in _PACKED_VARINT:
                while pos < stop:
                    _, pos = _varint(buf, pos, stop, where)
            pos = stop
    if group:
        raise CorruptFileError(f"{where}: unterminated group")
    if pos > end:
        raise CorruptFileError(f"{where}: fixed-width field runs past its message")
    return pos


def check_varints(cls: type[Message], data: bytes, where: str) -> None:
    """Refuse varints wider than 64 bits anywhere in a ``cls`` message, as prost does.

    Raises:
        CorruptFileError: naming ``where`` and the byte offset.
    """
    spots = _suspects(data)
    if spots:
        _walk(cls.DESCRIPTOR, memoryview(data), 0, len(data), where, spots)


def unknown_bytes(msg: Message, modeled: Collection[str] | None = None, where: str = "") -> bytes:
    """Wire bytes of ``msg``'s fields that a model does not hold.

    Those are the fields unknown to our protos and, when ``modeled`` is given, the known
    fields not named in it. Merging the result into a freshly built message restores them
    (protobuf keeps unknown fields when serializing).

    Args:
        msg: A decoded message.
        modeled: Names of the fields the model holds; ``None`` means all known fields.
        where: Names the file in errors.

    Raises:
        CorruptFileError: if a known field came with the wrong wire type.
    """
    extra = []
    if modeled is not None:
        extra = [fd.name for fd, _ in msg.ListFields() if fd.name not in modeled]
    unknown = UnknownFieldSet(msg)
    if len(unknown):
        _check_wire_types(msg, unknown, where)
    if not extra and not len(unknown):
        return b""  # the common case: nothing to keep, no copy made
    keep = type(msg)()
    keep.CopyFrom(msg)
    for fd in msg.DESCRIPTOR.fields:
        if fd.name not in extra:
            keep.ClearField(fd.name)
    return bytes(keep.SerializeToString())


def parse(cls: type[_M], data: bytes, where: str, what: str) -> _M:
    """Parse ``data`` as a ``cls`` message.

    Raises:
        CorruptFileError: naming ``where`` and ``what`` if the bytes are malformed.
    """
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: malformed {what}: {exc}") from exc
    check_varints(cls, data, f"{where}: malformed {what}")
    return msg


def merge_unknown(msg: Any, data: bytes) -> None:
    """Merge preserved field bytes (see :func:`unknown_bytes`) back into ``msg``."""
    if data:
        msg.MergeFromString(data)
