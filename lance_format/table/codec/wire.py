"""Protobuf helpers shared by the table codecs: unknown fields and parsing with named errors."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format.errors import CorruptFileError

_M = TypeVar("_M", bound=Message)


_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "start-group", 4: "end-group", 5: "32-bit"}


def _check_wire_types(msg: Message, unknown: UnknownFieldSet, where: str) -> None:
    # The Python parser files a *known* field sent with the wrong wire type under unknown
    # fields and carries on; prost (pylance) refuses the message ("invalid wire type").
    by_number = msg.DESCRIPTOR.fields_by_number
    for i in range(len(unknown)):
        field = unknown[i]
        fd = by_number.get(field.field_number)
        if fd is not None:
            at = f"{where}: " if where else ""
            raise CorruptFileError(
                f"{at}malformed {msg.DESCRIPTOR.name}: field {fd.name!r} (#{field.field_number}) has wire "
                f"type {_WIRE_NAMES.get(field.wire_type, field.wire_type)}, which does not match its type")


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
    return msg


def merge_unknown(msg: Any, data: bytes) -> None:
    """Merge preserved field bytes (see :func:`unknown_bytes`) back into ``msg``."""
    if data:
        msg.MergeFromString(data)
