"""Deletion files: which rows of a fragment are deleted.

Two on-disk kinds (``rust/lance-table/src/io/deletion.rs`` in lance):

* ``.arrow`` (``DeletionFile.file_type`` ARROW_ARRAY): an Arrow IPC *file* with
  exactly one record batch of one non-null ``row_id: uint32`` column, no
  schema metadata, ZSTD body compression;
* ``.bin`` (BITMAP): a 32-bit Roaring bitmap in the portable serialization.

Values are row offsets inside the fragment. The file lives at
``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}`` where ``id`` is a
random u64 printed in decimal.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyroaring

from lance_format.errors import CorruptFileError, InvalidInputError, StorageError
from lance_format.storage.base import ObjectStore
from lance_format.table import fragment as _meta

#: A fragment's deletions are written as a roaring bitmap (``.bin``) from this
#: many deleted rows on, counted over all deletes of the fragment; fewer stay an
#: Arrow set (``.arrow``). pylance 14.0.2 wrote ``.bin`` for exactly 5000 rows.
BITMAP_THRESHOLD = 5000

DELETION_DIR = "_deletions"

ROW_ID_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])

_EXTENSIONS = {"arrow": "arrow", "bitmap": "bin"}

#: Decoded deletion vectors, keyed by file URI, kind and the file's exact bytes (so an entry can
#: never answer for different content). Bounded by the bytes held (keys plus values).
_DECODED_CACHE_BYTES = 16 * 1024 * 1024
_decoded: OrderedDict[tuple[str, str, bytes], npt.NDArray[np.uint32]] = OrderedDict()
_decoded_lock = threading.Lock()
_decoded_held = [0]


def _cache_put(path: str, kind: str, data: bytes, offsets: npt.NDArray[np.uint32]) -> None:
    cost = len(data) + offsets.nbytes
    if cost > _DECODED_CACHE_BYTES // 8:
        return
    kept = offsets.copy()
    kept.flags.writeable = False
    with _decoded_lock:
        key = (path, kind, data)
        old = _decoded.pop(key, None)
        if old is not None:
            _decoded_held[0] -= len(data) + old.nbytes
        _decoded[key] = kept
        _decoded_held[0] += cost
        while _decoded_held[0] > _DECODED_CACHE_BYTES and _decoded:
            (_, _, d), v = _decoded.popitem(last=False)
            _decoded_held[0] -= len(d) + v.nbytes


def _cache_get(path: str, kind: str, data: bytes) -> npt.NDArray[np.uint32] | None:
    with _decoded_lock:
        hit = _decoded.get((path, kind, data))
        if hit is not None:
            _decoded.move_to_end((path, kind, data))
    return None if hit is None else hit.copy()


def clear_deletion_cache() -> None:
    """Forget every cached decoded deletion vector."""
    with _decoded_lock:
        _decoded.clear()
        _decoded_held[0] = 0
_U32_MAX = np.iinfo(np.uint32).max


@dataclass(frozen=True)
class DeletionFile:
    """Reference to a deletion file, as stored in ``DataFragment.deletion_file``.

    Attributes:
        file_type: ``"arrow"`` (ARROW_ARRAY, ``.arrow``) or ``"bitmap"`` (BITMAP, ``.bin``).
        read_version: Dataset version the deleting writer read.
        id: Random u64 that makes the file name unique.
        num_deleted_rows: Number of deleted rows (0 means "unknown" to lance).
        base_id: Base path id when the file lives outside this dataset root.
    """

    file_type: Literal["arrow", "bitmap"]
    read_version: int
    id: int
    num_deleted_rows: int
    base_id: int | None = None

    def key(self, fragment_id: int) -> str:
        """Return the file's key relative to the dataset root (or its base path)."""
        return deletion_file_key(fragment_id, self.read_version, self.id, self.file_type)


def deletion_file_key(
    fragment_id: int, read_version: int, file_id: int, file_type: Literal["arrow", "bitmap"]
) -> str:
    """Return ``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}``."""
    if file_type not in _EXTENSIONS:
        raise InvalidInputError(f"unknown deletion file type {file_type!r}")
    return f"{DELETION_DIR}/{fragment_id}-{read_version}-{file_id}.{_EXTENSIONS[file_type]}"


def kind_after_delete(previous: str | None, total: int) -> Literal["arrow", "bitmap"]:
    """File kind pylance 14.0.2 writes for a fragment that now has ``total`` deleted rows.

    Its deletion vector starts as a bitmap when built fresh with at least
    :data:`BITMAP_THRESHOLD` rows; a set (``.arrow``) that grows is promoted only once it holds
    *more* than the threshold; a bitmap stays a bitmap.

    Args:
        previous: Kind of the fragment's current deletion file (``"array"``/``"arrow"`` or
            ``"bitmap"``), or ``None`` if it has none.
        total: Deleted rows after this change (old and new).
    """
    if previous is None:
        return "arrow" if total < BITMAP_THRESHOLD else "bitmap"
    if previous == "bitmap":
        return "bitmap"
    return "arrow" if total <= BITMAP_THRESHOLD else "bitmap"


def _as_row_offsets(deleted: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    arr = np.asarray(deleted)
    if arr.ndim != 1:
        raise InvalidInputError(f"deleted row offsets must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise InvalidInputError(f"deleted row offsets must be integers, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > _U32_MAX):
        raise InvalidInputError("deleted row offsets must fit in uint32")
    return np.unique(arr.astype(np.uint32, copy=False))


def encode_arrow_deletions(offsets: npt.NDArray[np.uint32]) -> bytes:
    """Serialize row offsets as a one-batch Arrow IPC file (ZSTD body compression)."""
    batch = pa.record_batch([pa.array(offsets, type=pa.uint32())], schema=ROW_ID_SCHEMA)
    sink = pa.BufferOutputStream()
    # One tiny batch: a thread pool only adds overhead (output bytes are identical).
    options = pa.ipc.IpcWriteOptions(compression="zstd", use_threads=False)
    with pa.ipc.new_file(sink, ROW_ID_SCHEMA, options=options) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def encode_bitmap_deletions(offsets: npt.NDArray[np.uint32]) -> bytes:
    """Serialize row offsets as a portable 32-bit Roaring bitmap."""
    # optimize=False: no run containers, like roaring-rs (lance) writes them.
    bitmap = pyroaring.BitMap(offsets, optimize=False)
    return bytes(bitmap.serialize())


def write_deletion_file(
    store: ObjectStore,
    fragment_id: int,
    read_version: int,
    deleted: npt.ArrayLike,
    *,
    kind: Literal["auto", "arrow", "bitmap"] = "auto",
) -> DeletionFile:
    """Write the complete deletion vector of one fragment and describe it.

    Args:
        store: Store rooted at the dataset.
        fragment_id: Fragment the rows belong to.
        read_version: Version the deleting transaction read.
        deleted: Every deleted row offset of the fragment (old and new); duplicates are merged.
        kind: ``"auto"`` picks ``.arrow`` below :data:`BITMAP_THRESHOLD` rows, else ``.bin``.

    Returns:
        The :class:`DeletionFile` to record in the fragment.

    Raises:
        InvalidInputError: for an empty vector (lance reads a count of 0 as
            "unknown") or offsets that are not uint32 values.
    """
    offsets = _as_row_offsets(deleted)
    if offsets.size == 0:
        raise InvalidInputError(f"fragment {fragment_id}: refusing to write an empty deletion file")
    if kind == "auto":
        file_type: Literal["arrow", "bitmap"] = "arrow" if offsets.size < BITMAP_THRESHOLD else "bitmap"
    elif kind in ("arrow", "bitmap"):
        file_type = kind
    else:
        raise InvalidInputError(f"unknown deletion file kind {kind!r}")
    payload = encode_arrow_deletions(offsets) if file_type == "arrow" else encode_bitmap_deletions(offsets)
    # Random ids make collisions practically impossible; a create-only write
    # still guarantees we never clobber another writer's file.
    for _attempt in range(8):
        df = DeletionFile(file_type, read_version, secrets.randbits(64), int(offsets.size))
        try:
            store.put_if_absent(df.key(fragment_id), payload)
            _cache_put(store.uri(df.key(fragment_id)), file_type, payload, offsets)
            return df
        except FileExistsError:
            continue
    raise StorageError(f"fragment {fragment_id}: could not find a free deletion file name")


def decode_arrow_deletions(data: bytes, path: str) -> npt.NDArray[np.uint32]:
    """Parse and validate a ``.arrow`` deletion file; ``path`` names it in errors."""
    try:
        reader = pa.ipc.open_file(
            pa.BufferReader(data), options=pa.ipc.IpcReadOptions(use_threads=False)
        )
        schema = reader.schema
        if not schema.equals(ROW_ID_SCHEMA, check_metadata=True) or schema.metadata:
            raise CorruptFileError(
                f"{path}: deletion file schema must be exactly 'row_id: uint32 not null', got {schema}"
            )
        if reader.num_record_batches != 1:
            raise CorruptFileError(
                f"{path}: deletion file must hold exactly one record batch, has {reader.num_record_batches}"
            )
        batch = reader.get_batch(0)
        batch.validate(full=True)
    except CorruptFileError:
        raise
    except (pa.ArrowException, ValueError, OSError, MemoryError) as exc:
        raise CorruptFileError(f"{path}: unreadable Arrow IPC deletion file: {exc}") from exc
    column = batch.column(0)
    if column.null_count:
        raise CorruptFileError(f"{path}: deletion file has {column.null_count} null row ids")
    return np.sort(column.to_numpy(zero_copy_only=False).astype(np.uint32, copy=False))


def decode_bitmap_deletions(data: bytes, path: str) -> npt.NDArray[np.uint32]:
    """Parse a ``.bin`` (portable Roaring) deletion file; ``path`` names it in errors."""
    if len(data) < 8:
        raise CorruptFileError(f"{path}: Roaring bitmap deletion file is truncated ({len(data)} bytes)")
    try:
        bitmap = pyroaring.BitMap.deserialize(data)
    except (ValueError, IndexError, MemoryError, OverflowError) as exc:
        raise CorruptFileError(f"{path}: invalid Roaring bitmap deletion file: {exc}") from exc
    # to_array() yields array('I') of sorted uint32 values without a Python loop.
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32).copy()


def read_deletion_file(store: ObjectStore, fragment_id: int, df: DeletionFile) -> npt.NDArray[np.uint32]:
    """Read a deletion file and return the sorted deleted row offsets.

    ``store`` must be rooted where the file lives: the dataset root, or the
    base path named by ``df.base_id``.

    Raises:
        ObjectNotFoundError: if the file is missing.
        CorruptFileError: if it is malformed (naming the file).
    """
    key = df.key(fragment_id)
    data = bytes(store.read(key))
    path = store.uri(key)
    hit = _cache_get(path, df.file_type, data)
    if hit is not None:
        return hit
    if df.file_type == "arrow":
        offsets = decode_arrow_deletions(data, path)
    else:
        offsets = decode_bitmap_deletions(data, path)
    _cache_put(path, df.file_type, data, offsets)
    return offsets


def read_fragment_deletions(store: ObjectStore, fragment_id: int, ref: _meta.DeletionFile) -> npt.NDArray[np.uint32]:
    """:func:`read_deletion_file` for a manifest's reference (``file_type`` ``"array"``/``"bitmap"``).

    ``store`` must be rooted where the file lives (see :func:`read_deletion_file`).
    """
    kind: Literal["arrow", "bitmap"] = "arrow" if ref.file_type == "array" else "bitmap"
    return read_deletion_file(store, fragment_id, DeletionFile(kind, ref.read_version, ref.id,
                                                               ref.num_deleted_rows, ref.base_id))


def write_fragment_deletions(store: ObjectStore, fragment_id: int, read_version: int,
                             deleted: npt.NDArray[np.uint32], previous: _meta.DeletionFile | None
                             ) -> tuple[_meta.DeletionFile, str]:
    """Write a fragment's new complete deletion vector, of the kind pylance would pick after ``previous``.

    Returns:
        The manifest's reference to the new file, and the file's key.
    """
    w = write_deletion_file(store, fragment_id, read_version, deleted,
                            kind=kind_after_delete(previous.file_type if previous is not None else None,
                                                   int(deleted.size)))
    kind: Literal["array", "bitmap"] = "array" if w.file_type == "arrow" else "bitmap"
    return _meta.DeletionFile(w.read_version, w.id, kind, w.num_deleted_rows), w.key(fragment_id)


__all__ = [
    "BITMAP_THRESHOLD",
    "DELETION_DIR",
    "DeletionFile",
    "ROW_ID_SCHEMA",
    "clear_deletion_cache",
    "decode_arrow_deletions",
    "decode_bitmap_deletions",
    "deletion_file_key",
    "encode_arrow_deletions",
    "encode_bitmap_deletions",
    "read_deletion_file",
    "read_fragment_deletions",
    "kind_after_delete",
    "write_deletion_file",
    "write_fragment_deletions",
]
