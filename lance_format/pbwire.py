"""Wire-level protobuf checks shared by every codec: what prost (pylance) refuses and upb accepts.

The Python protobuf parser is lenient where prost is strict: it files a known field sent with
the wrong wire type under unknown fields, and it reads a varint wider than 64 bits by dropping
the extra bits. Reading such bytes as data would return other rows than pylance, which refuses
them, so the codecs (``lance_format.file``, ``schema_codec``, ``table.codec``) check with these.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format.errors import CorruptFileError

_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "start-group", 4: "end-group", 5: "32-bit"}


def refuse_misfiled(msg: Any, unknown: UnknownFieldSet, where: str) -> None:
    """Raise if one of ``msg``'s unknown fields is a known field filed there for its wrong wire type.

    Raises:
        CorruptFileError: naming ``where``, the message and the field.
    """
    by_number = msg.DESCRIPTOR.fields_by_number
    for i in range(len(unknown)):
        field = unknown[i]
        fd = by_number.get(field.field_number)
        if fd is not None:
            at = f"{where}: " if where else ""
            raise CorruptFileError(
                f"{at}malformed {msg.DESCRIPTOR.name}: field {fd.name!r} (#{field.field_number}) has wire "
                f"type {_WIRE_NAMES.get(field.wire_type, field.wire_type)}, which does not match its type")


def check_wire_types(msg: Any, where: str, skip: frozenset[str] = frozenset()) -> None:
    """Refuse a known field sent with the wrong wire type anywhere in ``msg`` (its sub-messages too).

    The Python parser files such a field under unknown fields and carries on; prost (pylance)
    refuses the message ("invalid wire type"). Used for the schema here and for the small
    parts of a manifest; the table codecs check fragments one by one as they decode them.

    Args:
        msg: A parsed message.
        where: Names the file in errors.
        skip: Names of ``msg``'s own fields checked elsewhere.

    Raises:
        CorruptFileError: naming ``where``, the message and the field.
    """
    # the usual case: nothing filed as unknown anywhere, so nothing misfiled. With ``skip`` the
    # skipped fields are usually the bulk of the message (a manifest's fragments): copying them
    # to look for unknown fields would cost more than walking the rest
    if skip or has_unknown_fields(msg):
        _check_tree(msg, where, skip)


def has_unknown_fields(msg: Any) -> bool:
    """Whether ``msg`` or any message inside it holds unknown fields (``msg`` is left as it is).

    Dropping unknown fields is one recursive call in the protobuf runtime, and any field it drops
    shrinks the serialized size (every field has a tag), so a copy that keeps its size had none.
    Walking the message tree in Python with ``UnknownFieldSet`` costs several times more; it is
    left for messages that do hold unknown fields.
    """
    copy = type(msg)()
    copy.CopyFrom(msg)
    size = copy.ByteSize()
    copy.DiscardUnknownFields()
    return bool(copy.ByteSize() != size)


def discard_if_known(msg: Any) -> bool:
    """Drop ``msg``'s unknown fields (its sub-messages' too); return whether there were none.

    The cheaper form of :func:`has_unknown_fields` for a message the caller parsed itself and
    will not serialize again: when this returns False, parse the bytes again and run
    :func:`check_wire_types` on that copy, which still holds the unknown fields.
    """
    size = msg.ByteSize()
    msg.DiscardUnknownFields()
    return bool(msg.ByteSize() == size)


def _check_tree(msg: Any, where: str, skip: frozenset[str] = frozenset()) -> None:
    """:func:`check_wire_types` without its shortcut: visit every message of the tree."""
    refuse_misfiled(msg, UnknownFieldSet(msg), where)
    for fd, value in msg.ListFields():
        if fd.type != FieldDescriptor.TYPE_MESSAGE or fd.name in skip:
            continue
        # A map field's value is a Mapping; asking the descriptor (``GetOptions().map_entry``)
        # would import ``descriptor_pb2`` on the first manifest a process opens (~1 ms).
        if isinstance(value, Mapping):
            if fd.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for item in value.values():
                    _check_tree(item, where)
        elif fd.label == FieldDescriptor.LABEL_REPEATED:
            for item in value:
                _check_tree(item, where)
        else:
            _check_tree(value, where)


def well_formed(data: bytes) -> bool:
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


def check_varints(cls: type[Message], data: bytes | bytearray | memoryview, where: str) -> None:
    """Refuse varints wider than 64 bits anywhere in a ``cls`` message, as prost does.

    Raises:
        CorruptFileError: naming ``where`` and the byte offset.
    """
    data = data if isinstance(data, bytes) else bytes(data)
    spots = _suspects(data)
    if spots:
        _walk(cls.DESCRIPTOR, memoryview(data), 0, len(data), where, spots)



__all__ = ["check_varints", "check_wire_types", "discard_if_known", "has_unknown_fields", "refuse_misfiled",
           "well_formed"]
