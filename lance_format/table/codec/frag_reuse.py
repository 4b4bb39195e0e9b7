"""Codec of ``lance.table.FragmentReuseIndexDetails`` (the ``__lance_frag_reuse`` system index).

``lance_format.index.frag_reuse`` works on plain values; this module turns them into the message
and back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from google.protobuf.message import DecodeError

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, NotSupportedError

#: ``(id, physical_rows, num_deleted_rows)`` of a fragment.
Digest = tuple[int, int, int]
#: ``(changed_row_addrs, old fragments, new fragments)`` of a rewrite group.
Group = tuple[bytes, tuple[Digest, ...], tuple[Digest, ...]]
#: ``(dataset_version, groups)`` of one deferred compaction.
Version = tuple[int, tuple[Group, ...]]


def decode_frag_reuse(data: bytes, where: str,
                      load: Callable[[str, int, int], bytes] | None = None) -> tuple[Version, ...]:
    """Decode ``FragmentReuseIndexDetails``, inline or (with ``load``) in an external file.

    Args:
        data: The details message.
        where: Names the index in error messages.
        load: MAINT2 (issue 9): reads ``(path, offset, size)`` of the index's external
            file; pylance 14.0.2 moves details past 200 KiB into
            ``_indices/{uuid}/details.binpb`` holding an ``InlineContent`` message.

    Raises:
        CorruptFileError: malformed details.
        NotSupportedError: details stored in an external file and no ``load`` given.
    """
    pb = table_pb2.FragmentReuseIndexDetails()
    try:
        pb.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: malformed FragmentReuseIndexDetails: {exc}") from exc
    if pb.HasField("external"):
        if load is None:
            raise NotSupportedError(f"{where}: fragment reuse details in an external file "
                                    f"({pb.external.path}) are not supported here")
        ext = pb.external
        try:
            pb.inline.ParseFromString(load(ext.path, int(ext.offset), int(ext.size)))
        except DecodeError as exc:
            raise CorruptFileError(f"{where}: malformed fragment reuse details in {ext.path}: {exc}") from exc

    def digest(f: table_pb2.FragmentReuseIndexDetails.FragmentDigest) -> Digest:
        return (int(f.id), int(f.physical_rows), int(f.num_deleted_rows))

    return tuple((int(v.dataset_version), tuple(
        (bytes(g.changed_row_addrs), tuple(map(digest, g.old_fragments)), tuple(map(digest, g.new_fragments)))
        for g in v.groups)) for v in pb.inline.versions)


def encode_frag_reuse(versions: Sequence[Version]) -> bytes:
    """Serialized inline ``FragmentReuseIndexDetails``."""
    pb = table_pb2.FragmentReuseIndexDetails()
    for version, groups in versions:
        pv = pb.inline.versions.add(dataset_version=version)
        for changed, old, new in groups:
            pg = pv.groups.add(changed_row_addrs=changed)
            for fid, rows, deleted in old:
                pg.old_fragments.add(id=fid, physical_rows=rows, num_deleted_rows=deleted)
            for fid, rows, deleted in new:
                pg.new_fragments.add(id=fid, physical_rows=rows, num_deleted_rows=deleted)
    if not pb.inline.versions:
        pb.inline.SetInParent()
    return pb.SerializeToString()
