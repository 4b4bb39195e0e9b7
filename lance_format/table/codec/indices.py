"""Codec of :class:`~lance_format.table.index_metadata.IndexMetadata` (``lance.table.IndexMetadata``).

An index decoded from a manifest keeps its exact wire bytes (``_wire``) and is written
back with them while unchanged, so the fragment bitmap and timestamps of indices this
library did not touch stay byte-for-byte what their writer produced.
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from collections.abc import Iterable
from typing import Any

from pyroaring import BitMap

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError
from lance_format.table.codec.wire import merge_unknown, parse, unknown_bytes
from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def uuid_from_pb(raw: bytes) -> str:
    """A ``lance.table.UUID`` payload as text (hex when it is not 16 bytes)."""
    return str(_uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex()


def uuid_to_pb(text: str) -> bytes:
    """Inverse of :func:`uuid_from_pb`."""
    try:
        return _uuid.UUID(text).bytes
    except ValueError:
        return bytes.fromhex(text)


def details_from_pb(pb: Any) -> IndexDetails:
    """Decode a ``google.protobuf.Any`` of index details."""
    return IndexDetails(pb.type_url, bytes(pb.value))


def index_files_from_pb(files: Iterable[Any]) -> tuple[IndexFile, ...]:
    """Decode ``lance.table.IndexFile`` messages."""
    return tuple(IndexFile(f.path, f.size_bytes) for f in files)


def index_from_pb(pb: Any, where: str = "index section") -> IndexMetadata:
    """Decode an ``IndexMetadata`` message.

    Raises:
        CorruptFileError: if the fragment bitmap is not a valid Roaring bitmap.
    """
    frag_ids = None
    if pb.fragment_bitmap:
        try:
            frag_ids = frozenset(BitMap.deserialize(pb.fragment_bitmap))
        except (ValueError, OverflowError) as exc:
            raise CorruptFileError(f"{where}: index {pb.name!r} has a malformed fragment bitmap: {exc}") from exc
    created = None
    if pb.HasField("created_at"):
        created = _EPOCH + dt.timedelta(milliseconds=pb.created_at)
    index = IndexMetadata(
        uuid=uuid_from_pb(pb.uuid.uuid),
        name=pb.name,
        fields=tuple(pb.fields),
        dataset_version=pb.dataset_version,
        fragment_bitmap=frag_ids,
        index_details=details_from_pb(pb.index_details) if pb.HasField("index_details") else None,
        index_version=pb.index_version if pb.HasField("index_version") else 0,
        created_at=created,
        base_id=pb.base_id if pb.HasField("base_id") else None,
        files=index_files_from_pb(pb.files) if len(pb.files) else None,
        unknown_fields=unknown_bytes(pb),
    )
    index.__dict__["_wire"] = bytes(pb.SerializeToString())
    return index


def index_to_pb(index: IndexMetadata) -> Any:
    """Encode an :class:`IndexMetadata` (its ``unknown_fields`` included)."""
    wire = index.__dict__.get("_wire")
    if wire is not None:
        return table_pb2.IndexMetadata.FromString(wire)
    pb = table_pb2.IndexMetadata(
        name=index.name,
        fields=index.fields,
        dataset_version=index.dataset_version,
        index_version=index.index_version,
    )
    pb.uuid.uuid = uuid_to_pb(index.uuid)
    if index.fragment_bitmap is not None:
        pb.fragment_bitmap = BitMap(sorted(index.fragment_bitmap)).serialize()
    if index.index_details is not None:
        pb.index_details.type_url = index.index_details.type_url
        pb.index_details.value = index.index_details.value
    if index.created_at is not None:
        pb.created_at = (index.created_at - _EPOCH) // dt.timedelta(milliseconds=1)
    if index.base_id is not None:
        pb.base_id = index.base_id
    if index.files is not None:
        pb.files.extend(table_pb2.IndexFile(path=f.path, size_bytes=f.size_bytes) for f in index.files)
    merge_unknown(pb, index.unknown_fields)
    return pb


def decode_index_section(data: bytes, where: str) -> tuple[IndexMetadata, ...]:
    """Decode the bytes of a manifest's ``IndexSection``.

    Raises:
        CorruptFileError: if they are malformed.
    """
    section = parse(table_pb2.IndexSection, data, where, "index section")
    return tuple(index_from_pb(i, where) for i in section.indices)


def encode_index_section(indices: Iterable[IndexMetadata]) -> bytes:
    """Serialize an ``IndexSection`` holding ``indices``."""
    section = table_pb2.IndexSection()
    section.indices.extend(index_to_pb(i) for i in indices)
    return bytes(section.SerializeToString())


__all__ = [
    "decode_index_section",
    "details_from_pb",
    "encode_index_section",
    "index_files_from_pb",
    "index_from_pb",
    "index_to_pb",
    "uuid_from_pb",
    "uuid_to_pb",
]
