"""Codec of the fragment models (``lance.table.DataFragment`` and what it holds).

Encoding builds a fresh message from the model and merges the model's
``unknown_fields`` back in, so fields written by a newer Lance survive a
read-modify-write. A fragment's wire bytes are kept on the model object: ``_wire``
holds the bytes it was decoded from (decoding them gives this very model back), and
``_encoded`` its first encoding otherwise. A manifest rewrite reuses them instead of
encoding every fragment again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError
from lance_format.session import CacheKind, Session, default_session
from lance_format.table.codec.wire import merge_unknown, parse, unknown_bytes
from lance_format.table.models import (
    BasePath,
    DataFile,
    DeletionFile,
    DeletionFileType,
    ExternalFile,
    FragmentMetadata,
    check_data_path,
)

_T = TypeVar("_T")


def _build(cls: type[_T], values: dict[str, Any]) -> _T:
    # Decoding builds thousands of models per manifest; filling ``__dict__`` directly
    # skips the frozen dataclass's per-field ``object.__setattr__`` calls. ``values``
    # must hold every field, already normalized as ``__post_init__`` would leave it.
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def data_file_from_pb(pb: Any, where: str = "manifest") -> DataFile:
    """Decode a ``lance.table.DataFile``."""
    path = pb.path
    check_data_path(path, where)
    fields = tuple(pb.fields[:])  # slicing copies in C; iterating the container is ~2x slower
    columns = tuple(pb.column_indices[:])
    major, minor = pb.file_major_version, pb.file_minor_version
    if len(fields) != len(columns) and (major, minor) >= (0, 3) and len(columns) != 0:
        raise CorruptFileError(f"{where}: data file {path!r} has {len(fields)} fields but "
                               f"{len(columns)} column indices")
    live = [f for f in fields if f >= 0]  # -2 marks dropped columns and may repeat
    if len(set(live)) != len(live):
        # Two columns of one file cannot hold the same field; reading either would be a guess.
        raise CorruptFileError(f"{where}: data file {path!r} lists a field id twice ({list(fields)})")
    return _build(DataFile, {
        "path": path,
        "fields": fields,
        "column_indices": columns,
        "file_major_version": major,
        "file_minor_version": minor,
        "file_size_bytes": pb.file_size_bytes or None,
        "base_id": pb.base_id if pb.HasField("base_id") else None,
        "unknown_fields": unknown_bytes(pb, None, where),
    })


def data_file_to_pb(df: DataFile) -> Any:
    """Encode a :class:`DataFile`."""
    pb = table_pb2.DataFile(
        path=df.path,
        fields=df.fields,
        column_indices=df.column_indices,
        file_major_version=df.file_major_version,
        file_minor_version=df.file_minor_version,
        file_size_bytes=df.file_size_bytes or 0,
    )
    if df.base_id is not None:
        pb.base_id = df.base_id
    merge_unknown(pb, df.unknown_fields)
    return pb


def deletion_file_from_pb(pb: Any, where: str = "manifest") -> DeletionFile:
    """Decode a ``lance.table.DeletionFile``."""
    kind: DeletionFileType = "bitmap" if pb.file_type == table_pb2.DeletionFile.BITMAP else "array"
    return _build(DeletionFile, {
        "read_version": pb.read_version,
        "id": pb.id,
        "file_type": kind,
        "num_deleted_rows": pb.num_deleted_rows,
        "base_id": pb.base_id if pb.HasField("base_id") else None,
        "unknown_fields": unknown_bytes(pb, None, where),
    })


def deletion_file_to_pb(d: DeletionFile) -> Any:
    """Encode a :class:`DeletionFile`."""
    pb = table_pb2.DeletionFile(
        file_type=table_pb2.DeletionFile.BITMAP if d.file_type == "bitmap" else table_pb2.DeletionFile.ARROW_ARRAY,
        read_version=d.read_version,
        id=d.id,
        num_deleted_rows=d.num_deleted_rows,
    )
    if d.base_id is not None:
        pb.base_id = d.base_id
    merge_unknown(pb, d.unknown_fields)
    return pb


def _external(pb: Any) -> ExternalFile:
    return ExternalFile(pb.path, pb.offset, pb.size)


def fragment_from_pb(pb: Any, where: str = "manifest") -> FragmentMetadata:
    """Decode a ``lance.table.DataFragment``."""
    has = pb.HasField
    return _build(FragmentMetadata, {
        "id": pb.id,
        "files": tuple([data_file_from_pb(f, where) for f in pb.files[:]]),
        "physical_rows": pb.physical_rows,
        "deletion_file": deletion_file_from_pb(pb.deletion_file, where) if has("deletion_file") else None,
        "row_id_meta": pb.inline_row_ids if has("inline_row_ids") else None,
        "created_at_version_meta": pb.inline_created_at_versions if has("inline_created_at_versions") else None,
        "last_updated_at_version_meta": pb.inline_last_updated_at_versions
        if has("inline_last_updated_at_versions")
        else None,
        "external_row_ids": _external(pb.external_row_ids) if has("external_row_ids") else None,
        "external_created_at_versions": _external(pb.external_created_at_versions)
        if has("external_created_at_versions")
        else None,
        "external_last_updated_at_versions": _external(pb.external_last_updated_at_versions)
        if has("external_last_updated_at_versions")
        else None,
        "unknown_fields": unknown_bytes(pb, None, where),
    })


def fragment_to_pb(frag: FragmentMetadata) -> Any:
    """Encode a :class:`FragmentMetadata` (its ``unknown_fields`` included)."""
    pb = table_pb2.DataFragment(id=frag.id, physical_rows=frag.physical_rows)
    pb.files.extend([data_file_to_pb(f) for f in frag.files])
    if frag.deletion_file is not None:
        pb.deletion_file.CopyFrom(deletion_file_to_pb(frag.deletion_file))
    # Each pair is a oneof in the proto: the inline form wins when a model holds both.
    if frag.row_id_meta is not None:
        pb.inline_row_ids = frag.row_id_meta
    elif frag.external_row_ids is not None:
        _set_external(pb.external_row_ids, frag.external_row_ids)
    if frag.created_at_version_meta is not None:
        pb.inline_created_at_versions = frag.created_at_version_meta
    elif frag.external_created_at_versions is not None:
        _set_external(pb.external_created_at_versions, frag.external_created_at_versions)
    if frag.last_updated_at_version_meta is not None:
        pb.inline_last_updated_at_versions = frag.last_updated_at_version_meta
    elif frag.external_last_updated_at_versions is not None:
        _set_external(pb.external_last_updated_at_versions, frag.external_last_updated_at_versions)
    merge_unknown(pb, frag.unknown_fields)
    return pb


def _set_external(pb: Any, ext: ExternalFile) -> None:
    pb.path, pb.offset, pb.size = ext.path, ext.offset, ext.size


def fragment_bytes(frag: FragmentMetadata) -> bytes:
    """Serialized ``DataFragment`` of ``frag``, computed once per model object."""
    state = frag.__dict__
    wire: bytes | None = state.get("_wire") or state.get("_encoded")
    if wire is None:
        wire = bytes(fragment_to_pb(frag).SerializeToString())
        object.__setattr__(frag, "_encoded", wire)
    return wire


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fragment_field_bytes(frag: FragmentMetadata, field_tag: bytes = b"\x12") -> bytes:
    """``frag`` as a length-delimited field of its parent message (``Manifest.fragments`` by
    default: field 2), computed once per model object."""
    if field_tag != b"\x12":
        wire = fragment_bytes(frag)
        return field_tag + _varint(len(wire)) + wire
    framed: bytes | None = frag.__dict__.get("_framed")
    if framed is None:
        wire = fragment_bytes(frag)
        framed = field_tag + _varint(len(wire)) + wire
        object.__setattr__(frag, "_framed", framed)
    return framed


def decoded_from(frag: FragmentMetadata) -> bool:
    """Whether ``frag`` is the model decoding its :func:`fragment_bytes` gives (no decode needed)."""
    return "_wire" in frag.__dict__


def base_path_from_pb(pb: Any) -> BasePath:
    """Decode a ``lance.table.BasePath``."""
    return BasePath(pb.id, pb.path, pb.is_dataset_root, pb.name if pb.HasField("name") else None,
                    unknown_bytes(pb))


def base_path_to_pb(bp: BasePath) -> Any:
    """Encode a :class:`BasePath`."""
    pb = table_pb2.BasePath(id=bp.id, path=bp.path, is_dataset_root=bp.is_dataset_root)
    if bp.name is not None:
        pb.name = bp.name
    merge_unknown(pb, bp.unknown_fields)
    return pb


#: Decoded fragments by their serialized bytes, in a session's metadata cache. Consecutive
#: versions share almost all fragments, so decoding version N+1 after N only builds models for
#: new ones. A model holds about 1 KiB plus 8x its encoded size (measured with tracemalloc).
FRAGMENT_MODEL: CacheKind[FragmentMetadata] = CacheKind("fragment_model")


def _fragment_cost(encoded: bytes) -> int:
    return 1024 + 8 * len(encoded)


def fragments_from_wire(wires: Sequence[bytes], where: str = "manifest",
                        messages: Sequence[Any] | None = None, *,
                        session: Session | None = None) -> tuple[FragmentMetadata, ...]:
    """Decode serialized ``DataFragment`` messages, reusing models of identical bytes.

    A model decoded from the same bytes is equal in every field, so sharing it is
    invisible to callers.

    Args:
        wires: The serialized fragments.
        where: Names the source in errors.
        messages: The same fragments already parsed, if the caller has them.
        session: Holds the reused models (default: the process-wide session).

    Raises:
        CorruptFileError: for malformed bytes or invalid fragments.
    """
    cache = (default_session() if session is None else session).metadata_cache
    out = cache.get_many(FRAGMENT_MODEL, wires)
    # ``is None`` tests: ``None in out`` would call each model's dataclass ``__eq__``.
    missing = [i for i, frag in enumerate(out) if frag is None]
    if not missing:
        return tuple(out)  # type: ignore[arg-type]  # no None here
    new = []
    for i in missing:
        wire = wires[i]
        msg = messages[i] if messages is not None else parse(table_pb2.DataFragment, wire, where, "DataFragment")
        frag = fragment_from_pb(msg, where)
        frag.__dict__["_wire"] = wire
        out[i] = frag
        new.append((wire, frag, _fragment_cost(wire)))
    # more than half the cache at once would only thrash it: leave such a manifest uncached
    if sum(cost for _, _, cost in new) <= cache.capacity_bytes // 2:
        cache.put_many(FRAGMENT_MODEL, new)
    return tuple(out)  # type: ignore[arg-type]  # no None left


def fragment_from_wire(data: bytes, where: str) -> FragmentMetadata:
    """Decode one serialized ``DataFragment`` (e.g. a fragment shipped between processes).

    Raises:
        CorruptFileError: for malformed bytes or an invalid fragment.
    """
    return fragments_from_wire([bytes(data)], where)[0]


def fragments_from_pb(pbs: Sequence[Any], where: str = "manifest", *,
                      session: Session | None = None) -> tuple[FragmentMetadata, ...]:
    """Decode parsed ``DataFragment`` messages (see :func:`fragments_from_wire`)."""
    messages = list(pbs)
    return fragments_from_wire([m.SerializeToString() for m in messages], where, messages, session=session)


__all__ = [
    "base_path_from_pb",
    "base_path_to_pb",
    "FRAGMENT_MODEL",
    "data_file_from_pb",
    "data_file_to_pb",
    "deletion_file_from_pb",
    "deletion_file_to_pb",
    "decoded_from",
    "fragment_bytes",
    "fragment_field_bytes",
    "fragment_from_pb",
    "fragment_from_wire",
    "fragment_to_pb",
    "fragments_from_pb",
    "fragments_from_wire",
]
