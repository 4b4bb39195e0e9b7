"""The one index model: metadata of an index segment as the manifest's index section holds it.

Plain values only (no protobuf): the codec layer converts to and from
``lance.table.IndexMetadata`` (see ``protos/table.proto``). Used by the manifest, by
``CreateIndex``/``Rewrite`` transactions and by ``lance_format.index``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class IndexDetails:
    """The ``google.protobuf.Any`` that says which kind of index this is.

    Attributes:
        type_url: e.g. ``"/lance.table.BTreeIndexDetails"``.
        value: The serialized details message (often empty).
    """

    type_url: str
    value: bytes = b""

    @property
    def type_name(self) -> str:
        """The message name after the last ``/`` and ``.``, e.g. ``"BTreeIndexDetails"``."""
        return self.type_url.rsplit("/", 1)[-1].rsplit(".", 1)[-1]


@dataclass(frozen=True)
class IndexFile:
    """One file of an index segment with its size (``lance.table.IndexFile``)."""

    path: str
    size_bytes: int


@dataclass(frozen=True)
class IndexMetadata:
    """One index segment.

    Attributes:
        uuid: Segment id; its files live under ``_indices/{uuid}/``.
        name: Index name (several segments may share one name).
        fields: Field ids the index covers.
        dataset_version: Version the index was built against.
        fragment_bitmap: Fragment ids the segment covers (``None`` when not recorded).
        index_details: Kind of index, if recorded.
        index_version: Index format version.
        created_at: Creation time (millisecond precision), if recorded.
        base_id: Base path id for multi-base datasets, if any.
        files: Files of the segment with sizes, if recorded.
        unknown_fields: Wire bytes of fields this implementation does not know, kept so a
            read-modify-write by us preserves what a newer writer added.
    """

    uuid: str
    name: str
    fields: tuple[int, ...]
    dataset_version: int
    fragment_bitmap: frozenset[int] | None = None
    index_details: IndexDetails | None = None
    index_version: int = 0
    created_at: dt.datetime | None = None
    base_id: int | None = None
    files: tuple[IndexFile, ...] | None = None
    unknown_fields: bytes = b""
