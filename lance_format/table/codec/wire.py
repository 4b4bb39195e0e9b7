"""Protobuf helpers shared by the table codecs: unknown fields and parsing with named errors."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple, TypeVar

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format.errors import CorruptFileError, NotSupportedError
from lance_format.pbwire import check_varints, refuse_misfiled, well_formed

_M = TypeVar("_M", bound=Message)


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
    # A known field with the wrong wire type is refused as prost refuses it; then the fields
    # newer than our protos that pylance reads (see _NEWER).
    refuse_misfiled(msg, unknown, where)
    name = msg.DESCRIPTOR.name
    newer = _NEWER.get(name, {})
    at = f"{where}: " if where else ""
    for i in range(len(unknown)):
        field = unknown[i]
        known = newer.get(field.field_number)
        if known is None:
            continue
        if field.wire_type != known.wire_type or (field.wire_type == 2 and not well_formed(field.data)):
            raise CorruptFileError(f"{at}malformed {name}: field {known.name!r} (#{field.field_number}) "
                                   "has the wrong wire type or a malformed payload")
        if known.changes_rows:
            raise NotSupportedError(f"{at}{name} uses {known.name!r} (field #{field.field_number}), a newer "
                                    "Lance feature this reader does not support; reading without it would "
                                    "give other rows")


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
