"""Immutable fragment models (``DataFile``, ``DeletionFile``, ``FragmentMetadata``) and their codec.

Each model keeps the protobuf message it was decoded from (``raw``, excluded from
equality and repr). Encoding starts from a copy of that message and overwrites the
known fields, so fields written by a newer Lance (unknown to our protos) survive a
read-modify-write.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from lance_format._pb import table_pb2
from lance_format.errors import CorruptFileError, PathEscapeError
from lance_format.storage import normalize_key

DeletionFileType = Literal["array", "bitmap"]
_M = TypeVar("_M")


class _PbMarker(tuple[str, bytes]):
    """A pickled protobuf message: (full message name, serialized bytes)."""


def _freeze_pb(value: Any) -> Any:
    if isinstance(value, Message):
        return _PbMarker((value.DESCRIPTOR.full_name, value.SerializeToString()))
    if isinstance(value, tuple) and value and isinstance(value[0], Message):
        return tuple(_freeze_pb(v) for v in value)
    return value


def _thaw_pb(value: Any) -> Any:
    if isinstance(value, _PbMarker):
        cls = GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(value[0]))
        msg = cls()
        msg.ParseFromString(value[1])
        return msg
    if isinstance(value, tuple) and value and isinstance(value[0], _PbMarker):
        return tuple(_thaw_pb(v) for v in value)
    return value


class PicklableModel:
    """Mixin for frozen dataclasses holding protobuf messages.

    The generated modules are imported under their bare names (``table_pb2``), which
    pickle cannot locate, so messages travel as (type name, bytes) instead. This lets
    fragment metadata cross process boundaries (Spark executors to the driver).
    """

    def __getstate__(self) -> dict[str, Any]:
        # Private attributes are per-process caches (see ``encoded_fragment``), not state.
        return {k: _freeze_pb(v) for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            object.__setattr__(self, k, _thaw_pb(v))


@dataclass(frozen=True)
class DataFile(PicklableModel):
    """One Lance data file of a fragment.

    Attributes:
        path: Path relative to the dataset's ``data/`` directory.
        fields: Dataset field ids stored in the file (those that own a column).
        column_indices: Column index of each entry of ``fields``.
        file_major_version: Lance file major version (2 for 2.x files).
        file_minor_version: Lance file minor version.
        file_size_bytes: Exact file size in bytes, or ``None`` when unknown.
        base_id: Base path id for files outside the dataset root.
    """

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...] = ()
    file_major_version: int = 2
    file_minor_version: int = 0
    file_size_bytes: int | None = None
    base_id: int | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(int(f) for f in self.fields))
        object.__setattr__(self, "column_indices", tuple(int(c) for c in self.column_indices))

    @property
    def file_version(self) -> tuple[int, int]:
        """``(major, minor)`` as recorded in the manifest."""
        return self.file_major_version, self.file_minor_version


@dataclass(frozen=True)
class DeletionFile(PicklableModel):
    """A fragment's deletion vector file (FACTS d).

    Attributes:
        read_version: Dataset version the deleter read.
        id: Random id that makes the file name unique.
        file_type: ``"array"`` (``.arrow``) or ``"bitmap"`` (``.bin`` roaring).
        num_deleted_rows: Exact number of deleted rows (0 would mean "unknown").
        base_id: Base path id, ``None`` for the dataset root.
    """

    read_version: int
    id: int
    file_type: DeletionFileType
    num_deleted_rows: int
    base_id: int | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    def path(self, fragment_id: int) -> str:
        """Return the store key relative to the dataset root."""
        ext = "bin" if self.file_type == "bitmap" else "arrow"
        return f"_deletions/{fragment_id}-{self.read_version}-{self.id}.{ext}"


@dataclass(frozen=True)
class FragmentMetadata(PicklableModel):
    """A horizontal slice of the table: data files over the same rows plus deletions.

    Attributes:
        id: Fragment id (unique in a version; 0 = "unassigned" in a transaction).
        files: Data files, each holding a subset of the columns for the same rows.
        physical_rows: Rows in the data files before deletions.
        deletion_file: Deletion vector, if any rows were deleted.
        row_id_meta: Raw ``RowIdSequence`` bytes (stable row ids), if any.
        created_at_version_meta: Raw ``RowDatasetVersionSequence`` bytes, if any.
        last_updated_at_version_meta: Raw ``RowDatasetVersionSequence`` bytes, if any.
    """

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_id_meta: bytes | None = None
    created_at_version_meta: bytes | None = None
    last_updated_at_version_meta: bytes | None = None
    raw: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))

    @property
    def num_deletions(self) -> int:
        """Rows deleted from this fragment."""
        return 0 if self.deletion_file is None else self.deletion_file.num_deleted_rows

    @property
    def num_rows(self) -> int:
        """Live rows (physical rows minus deletions)."""
        return self.physical_rows - self.num_deletions

    def with_id(self, new_id: int) -> FragmentMetadata:
        """Return a copy carrying ``new_id``."""
        return dataclasses.replace(self, id=new_id)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serializable dict (pylance-compatible keys)."""
        df = self.deletion_file
        return {
            "id": self.id,
            "files": [
                {
                    "path": f.path,
                    "fields": list(f.fields),
                    "column_indices": list(f.column_indices),
                    "file_major_version": f.file_major_version,
                    "file_minor_version": f.file_minor_version,
                    "file_size_bytes": f.file_size_bytes,
                    "base_id": f.base_id,
                }
                for f in self.files
            ],
            "physical_rows": self.physical_rows,
            "deletion_file": None
            if df is None
            else {
                "read_version": df.read_version,
                "id": df.id,
                "file_type": df.file_type,
                "num_deleted_rows": df.num_deleted_rows,
                "base_id": df.base_id,
            },
        }

    @staticmethod
    def from_json(data: str | dict[str, Any]) -> FragmentMetadata:
        """Inverse of :meth:`to_json` (also accepts the JSON text)."""
        import json

        obj: dict[str, Any] = json.loads(data) if isinstance(data, str) else data
        files = tuple(
            DataFile(
                path=f["path"],
                fields=f["fields"],
                column_indices=f.get("column_indices") or (),
                file_major_version=f.get("file_major_version", 2),
                file_minor_version=f.get("file_minor_version", 0),
                file_size_bytes=f.get("file_size_bytes"),
                base_id=f.get("base_id"),
            )
            for f in obj["files"]
        )
        d = obj.get("deletion_file")
        deletion = None
        if d is not None:
            deletion = DeletionFile(
                d["read_version"], d["id"], d["file_type"], d["num_deleted_rows"], d.get("base_id")
            )
        return FragmentMetadata(obj["id"], files, obj["physical_rows"], deletion)


# --- codec -------------------------------------------------------------------


def check_data_path(path: str, where: str) -> str:
    """Validate a data-file path from a manifest (must stay below ``data/``).

    Raises:
        PathEscapeError: if the path is absolute or climbs out of the dataset root.
    """
    if path and "/" not in path and "\\" not in path and "\x00" not in path and path not in (".", ".."):
        return path  # a plain file name (the common case) cannot escape
    try:
        norm = normalize_key(f"data/{path}")
    except PathEscapeError as exc:
        raise PathEscapeError(f"{where}: data file path {path!r} escapes the dataset root") from exc
    if not norm.startswith("data/"):
        raise PathEscapeError(f"{where}: data file path {path!r} escapes the data directory")
    return path


def _build(cls: type[_M], values: dict[str, Any]) -> _M:
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
    return _build(DataFile, {
        "path": path,
        "fields": fields,
        "column_indices": columns,
        "file_major_version": major,
        "file_minor_version": minor,
        "file_size_bytes": pb.file_size_bytes or None,
        "base_id": pb.base_id if pb.HasField("base_id") else None,
        "raw": pb,
    })


def data_file_to_pb(df: DataFile) -> Any:
    """Encode a :class:`DataFile`."""
    pb = table_pb2.DataFile()
    if df.raw is not None:
        pb.CopyFrom(df.raw)
    pb.path = df.path
    del pb.fields[:]
    pb.fields.extend(df.fields)
    del pb.column_indices[:]
    pb.column_indices.extend(df.column_indices)
    pb.file_major_version = df.file_major_version
    pb.file_minor_version = df.file_minor_version
    pb.file_size_bytes = df.file_size_bytes or 0
    if df.base_id is None:
        pb.ClearField("base_id")
    else:
        pb.base_id = df.base_id
    return pb


def deletion_file_from_pb(pb: Any) -> DeletionFile:
    """Decode a ``lance.table.DeletionFile``."""
    kind: DeletionFileType = "bitmap" if pb.file_type == 1 else "array"
    return _build(DeletionFile, {
        "read_version": pb.read_version,
        "id": pb.id,
        "file_type": kind,
        "num_deleted_rows": pb.num_deleted_rows,
        "base_id": pb.base_id if pb.HasField("base_id") else None,
        "raw": pb,
    })


def deletion_file_to_pb(d: DeletionFile) -> Any:
    """Encode a :class:`DeletionFile`."""
    pb = table_pb2.DeletionFile()
    if d.raw is not None:
        pb.CopyFrom(d.raw)
    pb.file_type = table_pb2.DeletionFile.BITMAP if d.file_type == "bitmap" else table_pb2.DeletionFile.ARROW_ARRAY
    pb.read_version = d.read_version
    pb.id = d.id
    pb.num_deleted_rows = d.num_deleted_rows
    if d.base_id is None:
        pb.ClearField("base_id")
    else:
        pb.base_id = d.base_id
    return pb


def fragment_from_pb(pb: Any, where: str = "manifest") -> FragmentMetadata:
    """Decode a ``lance.table.DataFragment``."""
    has = pb.HasField
    return _build(FragmentMetadata, {
        "id": pb.id,
        "files": tuple([data_file_from_pb(f, where) for f in pb.files[:]]),
        "physical_rows": pb.physical_rows,
        "deletion_file": deletion_file_from_pb(pb.deletion_file) if has("deletion_file") else None,
        "row_id_meta": pb.inline_row_ids if has("inline_row_ids") else None,
        "created_at_version_meta": pb.inline_created_at_versions if has("inline_created_at_versions") else None,
        "last_updated_at_version_meta": pb.inline_last_updated_at_versions
        if has("inline_last_updated_at_versions")
        else None,
        "raw": pb,
    })


def fragment_to_pb(frag: FragmentMetadata) -> Any:
    """Encode a :class:`FragmentMetadata` (unknown fields of ``raw`` are kept)."""
    pb = table_pb2.DataFragment()
    if frag.raw is not None:
        pb.CopyFrom(frag.raw)
    pb.id = frag.id
    del pb.files[:]
    pb.files.extend(data_file_to_pb(f) for f in frag.files)
    if frag.deletion_file is None:
        pb.ClearField("deletion_file")
    else:
        pb.deletion_file.CopyFrom(deletion_file_to_pb(frag.deletion_file))
    pb.physical_rows = frag.physical_rows
    if frag.row_id_meta is not None:
        pb.inline_row_ids = frag.row_id_meta
    elif pb.HasField("inline_row_ids"):
        pb.ClearField("inline_row_ids")
    if frag.created_at_version_meta is not None:
        pb.inline_created_at_versions = frag.created_at_version_meta
    elif pb.HasField("inline_created_at_versions"):
        pb.ClearField("inline_created_at_versions")
    if frag.last_updated_at_version_meta is not None:
        pb.inline_last_updated_at_versions = frag.last_updated_at_version_meta
    elif pb.HasField("inline_last_updated_at_versions"):
        pb.ClearField("inline_last_updated_at_versions")
    return pb


def encoded_fragment(frag: FragmentMetadata) -> Any:
    """``fragment_to_pb(frag)``, computed once per model object and shared: do not mutate it.

    Models are immutable, so the encoding of one object never changes; a manifest
    rewrite then re-encodes only the fragments that are new in this process.
    """
    pb = frag.__dict__.get("_encoded")
    if pb is None:
        pb = fragment_to_pb(frag)
        object.__setattr__(frag, "_encoded", pb)
    return pb


#: Decoded fragments by their serialized bytes. Consecutive versions share almost
#: all fragments, so decoding version N+1 after N only builds models for new ones.
#: A plain dict (insertion ordered): lookups need no lock, eviction drops the oldest half.
_DECODED: dict[bytes, FragmentMetadata] = {}
_DECODED_MAX = 8192  # ~1.5 KB each
_DECODED_LOCK = threading.Lock()


def fragments_from_pb(pbs: Iterable[Any], where: str = "manifest", *, out_of: int | None = None
                      ) -> tuple[FragmentMetadata, ...]:
    """Decode ``lance.table.DataFragment`` messages, reusing models of identical bytes.

    A model decoded from the same bytes is equal in every field, so sharing it is
    invisible to callers. ``out_of`` is the number of fragments of the manifest the
    messages belong to (default: just these).
    """
    cache = _DECODED
    messages = list(pbs)
    keys = [pb.SerializeToString() for pb in messages]
    out = [cache.get(k) for k in keys]  # dict reads are atomic under the GIL
    if None not in out:
        return tuple(out)  # type: ignore[arg-type]  # no None here
    missing = [i for i, frag in enumerate(out) if frag is None]
    # A model keeps the message it came from, and a message decoded as part of a
    # manifest keeps that whole manifest in memory. When most fragments are new,
    # the manifest is mostly those fragments anyway: keep the messages as they are.
    # When few are (an append), copy them so the cache never pins old manifests.
    shared = 2 * len(missing) > (len(out) if out_of is None else out_of)
    new = {}
    for i in missing:
        src = messages[i]
        if not shared:
            src = table_pb2.DataFragment()
            src.ParseFromString(keys[i])
        out[i] = new[keys[i]] = fragment_from_pb(src, where)
    if len(new) > _DECODED_MAX // 2:
        return tuple(out)  # type: ignore[arg-type]  # too big to cache without thrashing
    with _DECODED_LOCK:
        if len(cache) + len(new) > _DECODED_MAX:
            keep = list(cache.items())[len(cache) // 2:]
            cache.clear()
            cache.update(keep)
        cache.update(new)
    return tuple(out)  # type: ignore[arg-type]  # no None left


def decode_fragment_bytes(data: bytes, where: str) -> FragmentMetadata:
    """Decode serialized ``DataFragment`` bytes (used by ``FragmentMetadata`` pickling)."""
    pb = table_pb2.DataFragment()
    try:
        pb.ParseFromString(data)
    except DecodeError as exc:
        raise CorruptFileError(f"{where}: malformed DataFragment: {exc}") from exc
    return fragment_from_pb(pb, where)
