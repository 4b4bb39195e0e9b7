"""Immutable table models: ``DataFile``, ``DeletionFile``, ``FragmentMetadata``, ``BasePath``.

Plain frozen dataclasses with no protobuf inside; ``lance_format.table.codec`` converts
them to and from ``lance.table`` messages (``protos/table.proto``). Each model carries
``unknown_fields``: the wire bytes of fields it does not interpret (written by a newer
Lance), so a read-modify-write by this library keeps them.

The codec may attach the exact wire bytes a fragment was decoded from (or last encoded
to) as the private attribute ``_wire``. Models are immutable, so those bytes stay
valid for the object; ``dataclasses.replace`` builds a new object without them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from json import loads as _json_loads  # DeletionFile.from_json's parameter is named json
from typing import Any, Literal

from lance_format.errors import InvalidInputError, PathEscapeError
from lance_format.storage import normalize_key
from lance_format.table.naming import DATA_DIR, data_file_key, deletion_file_key

#: Kinds of deletion file, named as pylance's ``DeletionFile.file_type``: ``"array"`` is an
#: Arrow IPC file (``.arrow``, protobuf ``ARROW_ARRAY``), ``"bitmap"`` a Roaring bitmap (``.bin``).
DeletionFileType = Literal["array", "bitmap"]


def _without_private(obj: object) -> dict[str, Any]:
    # Private attributes are per-process caches of the codec (``_wire``), not state.
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


@dataclass(frozen=True)
class DataFile:
    """One Lance data file of a fragment.

    Attributes:
        path: Path relative to the dataset's ``data/`` directory.
        fields: Dataset field ids stored in the file (those that own a column).
        column_indices: Column index of each entry of ``fields``.
        file_major_version: Lance file major version (2 for 2.x files).
        file_minor_version: Lance file minor version.
        file_size_bytes: Exact file size in bytes, or ``None`` when unknown.
        base_id: Base path id for files outside the dataset root.
        unknown_fields: Wire bytes of fields this library does not interpret.
    """

    path: str
    fields: tuple[int, ...]
    column_indices: tuple[int, ...] = ()
    file_major_version: int = 2
    file_minor_version: int = 0
    file_size_bytes: int | None = None
    base_id: int | None = None
    unknown_fields: bytes = dataclasses.field(default=b"", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(int(f) for f in self.fields))
        object.__setattr__(self, "column_indices", tuple(int(c) for c in self.column_indices))

    @property
    def file_version(self) -> tuple[int, int]:
        """``(major, minor)`` as recorded in the manifest."""
        return self.file_major_version, self.file_minor_version


@dataclass(frozen=True)
class DeletionFile:
    """A fragment's deletion vector file (see ``lance_format.table.deletion``).

    Attributes:
        read_version: Dataset version the deleter read.
        id: Random u64 that makes the file name unique.
        file_type: ``"array"`` (``.arrow``) or ``"bitmap"`` (``.bin`` roaring).
        num_deleted_rows: Exact number of deleted rows (0 would mean "unknown").
        base_id: Base path id, ``None`` for the dataset root.
        unknown_fields: Wire bytes of fields this library does not interpret.
    """

    read_version: int
    id: int
    file_type: DeletionFileType
    num_deleted_rows: int
    base_id: int | None = None
    unknown_fields: bytes = dataclasses.field(default=b"", repr=False)

    def path(self, fragment_id: int, base_uri: str | None = None) -> str:
        """Return the store key relative to the dataset root (or to its base path).

        With ``base_uri`` (a dataset's local path), the key below it as an object-store path
        (no leading ``/``), as pylance's ``DeletionFile.path(fragment_id, base_uri=)``.

        Raises:
            InvalidInputError: ``base_uri`` has an empty path segment (a ``scheme://`` URI, as
                pylance refuses it).
        """
        key = deletion_file_key(fragment_id, self.read_version, self.id, self.file_type)
        if base_uri is None:
            return key
        parts = str(base_uri).strip("/").split("/")
        if "" in parts:
            raise InvalidInputError(f"Invalid base URI: {base_uri}: the path contains an empty segment")
        return "/".join([*parts, key])

    def asdict(self) -> dict[str, Any]:
        """The fields as pylance's ``DeletionFile.asdict()`` (same keys, same order)."""
        return {"read_version": self.read_version, "id": self.id, "file_type": self.file_type,
                "num_deleted_rows": self.num_deleted_rows, "base_id": self.base_id}

    def json(self) -> str:
        """:meth:`asdict` as compact JSON text, as pylance's ``DeletionFile.json()``."""
        return json.dumps(self.asdict(), separators=(",", ":"))

    @staticmethod
    def from_json(json: str | dict[str, Any]) -> DeletionFile:  # noqa: A002 - pylance's parameter name
        """Inverse of :meth:`json` (also accepts the dict of :meth:`asdict`)."""
        d: dict[str, Any] = _json_loads(json) if isinstance(json, str) else json
        return DeletionFile(d["read_version"], d["id"], d["file_type"], d["num_deleted_rows"], d.get("base_id"))


@dataclass(frozen=True)
class ExternalFile:
    """A byte range of another file holding a fragment's row-id or version sequence."""

    path: str
    offset: int
    size: int


@dataclass(frozen=True)
class BasePath:
    """An extra root a multi-base dataset stores files under (``lance.table.BasePath``).

    Attributes:
        id: Id that ``DataFile.base_id`` / ``DeletionFile.base_id`` refer to.
        path: URI of the base.
        is_dataset_root: Whether the base is a dataset root (data lives under ``data/``).
        name: Optional display name.
        unknown_fields: Wire bytes of fields this library does not interpret.
    """

    id: int
    path: str
    is_dataset_root: bool = False
    name: str | None = None
    unknown_fields: bytes = dataclasses.field(default=b"", repr=False)


@dataclass(frozen=True)
class FragmentMetadata:
    """A horizontal slice of the table: data files over the same rows plus deletions.

    Attributes:
        id: Fragment id (unique in a version; 0 = "unassigned" in a transaction).
        files: Data files, each holding a subset of the columns for the same rows.
        physical_rows: Rows in the data files before deletions.
        deletion_file: Deletion vector, if any rows were deleted.
        row_id_meta: Inline ``RowIdSequence`` bytes (stable row ids), if any.
        created_at_version_meta: Inline ``RowDatasetVersionSequence`` bytes, if any.
        last_updated_at_version_meta: Inline ``RowDatasetVersionSequence`` bytes, if any.
        external_row_ids: Where the row-id sequence lives when not inline.
        external_created_at_versions: Where the created-at sequence lives when not inline.
        external_last_updated_at_versions: Where the last-updated sequence lives when not inline.
        unknown_fields: Wire bytes of fields this library does not interpret.
    """

    id: int
    files: tuple[DataFile, ...]
    physical_rows: int
    deletion_file: DeletionFile | None = None
    row_id_meta: bytes | None = None
    created_at_version_meta: bytes | None = None
    last_updated_at_version_meta: bytes | None = None
    external_row_ids: ExternalFile | None = None
    external_created_at_versions: ExternalFile | None = None
    external_last_updated_at_versions: ExternalFile | None = None
    unknown_fields: bytes = dataclasses.field(default=b"", repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", tuple(self.files))

    def __getstate__(self) -> dict[str, Any]:
        return _without_private(self)

    @property
    def num_deletions(self) -> int:
        """Rows deleted from this fragment."""
        return 0 if self.deletion_file is None else self.deletion_file.num_deleted_rows

    @property
    def num_rows(self) -> int:
        """Live rows (physical rows minus deletions)."""
        return self.physical_rows - self.num_deletions

    @property
    def has_row_ids(self) -> bool:
        """Whether the fragment records a stable row-id sequence (inline or external)."""
        return self.row_id_meta is not None or self.external_row_ids is not None

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


def check_data_path(path: str, where: str) -> str:
    """Validate a data-file path from a manifest (must stay below ``data/``).

    Raises:
        PathEscapeError: if the path is absolute or climbs out of the dataset root.
    """
    if path and "/" not in path and "\\" not in path and "\x00" not in path and path not in (".", ".."):
        return path  # a plain file name (the common case) cannot escape
    try:
        norm = normalize_key(data_file_key(path))
    except PathEscapeError as exc:
        raise PathEscapeError(f"{where}: data file path {path!r} escapes the dataset root") from exc
    if not norm.startswith(f"{DATA_DIR}/"):
        raise PathEscapeError(f"{where}: data file path {path!r} escapes the data directory")
    return path


__all__ = [
    "BasePath",
    "DataFile",
    "DeletionFile",
    "DeletionFileType",
    "ExternalFile",
    "FragmentMetadata",
    "check_data_path",
]
