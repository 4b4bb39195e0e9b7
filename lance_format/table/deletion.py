"""Deletion files: which rows of a fragment are deleted.

Two on-disk kinds (``rust/lance-table/src/io/deletion.rs`` in lance):

* ``.arrow`` (``DeletionFile.file_type`` ``"array"``, protobuf ARROW_ARRAY): an Arrow IPC
  *file* with exactly one record batch of one non-null ``row_id: uint32`` column, no
  schema metadata, ZSTD body compression;
* ``.bin`` (``"bitmap"``, BITMAP): a 32-bit Roaring bitmap in the portable serialization.

Values are row offsets inside the fragment. The file lives at
``_deletions/{fragment_id}-{read_version}-{id}.{arrow|bin}`` (built by
``lance_format.table.naming.deletion_file_key``) where ``id`` is a random u64 printed in
decimal. Files are described by the one :class:`~lance_format.table.models.DeletionFile`
model that fragments hold.
"""

from __future__ import annotations

import secrets
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyroaring

from lance_format.arrays import arrow_array
from lance_format.errors import CorruptFileError, InvalidInputError, StorageError
from lance_format.session import CacheKind, default_session
from lance_format.storage.base import ObjectStore
from lance_format.table.models import DeletionFile, DeletionFileType

#: A fragment's deletions are written as a roaring bitmap (``.bin``) from this
#: many deleted rows on, counted over all deletes of the fragment; fewer stay an
#: Arrow set (``.arrow``). pylance 14.0.2 wrote ``.bin`` for exactly 5000 rows.
BITMAP_THRESHOLD = 5000

ROW_ID_SCHEMA = pa.schema([pa.field("row_id", pa.uint32(), nullable=False)])

#: Decoded deletion vectors in the store's session, keyed by file URI and kind: the one cache of
#: them (dataset handles read through :func:`deletion_vector` too). A deletion file is never
#: rewritten in a dataset (its name carries a random id and writes are create-only), so a hit is
#: answered without reading the file again, as lance's cache does. Entries are read-only arrays.
DELETION_VECTOR: CacheKind[npt.NDArray[np.uint32]] = CacheKind("deletion_vector")


def _cache_put(store: ObjectStore, path: str, kind: str, offsets: npt.NDArray[np.uint32]) -> None:
    """Keep ``offsets`` (made read-only: every later reader shares the array)."""
    offsets.flags.writeable = False
    cache = store.session.metadata_cache
    cost = offsets.nbytes + len(path)
    if cost > cache.capacity_bytes // 8:  # one huge vector must not flush everything else
        return
    cache.put(DELETION_VECTOR, (path, kind), offsets, cost)


def _cache_get(store: ObjectStore, path: str, kind: str, rows: int) -> npt.NDArray[np.uint32] | None:
    hit = store.session.metadata_cache.get(DELETION_VECTOR, (path, kind))
    if hit is None or (rows and hit.size != rows):
        return None  # a description with another row count is checked against the file itself
    return hit


def clear_deletion_cache() -> None:
    """Empty the default session's metadata cache (decoded deletion vectors included)."""
    default_session().metadata_cache.clear()


_U32_MAX = np.iinfo(np.uint32).max


def kind_after_delete(previous: DeletionFileType | None, total: int) -> DeletionFileType:
    """File kind pylance 14.0.2 writes for a fragment that now has ``total`` deleted rows.

    Its deletion vector starts as a bitmap when built fresh with at least
    :data:`BITMAP_THRESHOLD` rows; a set (``.arrow``) that grows is promoted only once it holds
    *more* than the threshold; a bitmap stays a bitmap.

    Args:
        previous: Kind of the fragment's current deletion file, or ``None`` if it has none.
        total: Deleted rows after this change (old and new).
    """
    if previous is None:
        return "array" if total < BITMAP_THRESHOLD else "bitmap"
    if previous == "bitmap":
        return "bitmap"
    return "array" if total <= BITMAP_THRESHOLD else "bitmap"


def _as_row_offsets(deleted: npt.ArrayLike) -> npt.NDArray[np.uint32]:
    arr = np.asarray(deleted)
    if arr.ndim != 1:
        raise InvalidInputError(f"deleted row offsets must be 1-D, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise InvalidInputError(f"deleted row offsets must be integers, got dtype {arr.dtype}")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > _U32_MAX):
        raise InvalidInputError("deleted row offsets must fit in uint32")
    return sorted_unique(arr.astype(np.uint32, copy=False))


def sorted_unique(values: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """A new array of ``values`` sorted without duplicates (``np.unique``'s result, at a fraction of its cost).

    numpy 2.x's ``np.unique`` hashes first and sorts after: tens of milliseconds for 100,000
    offsets. Offsets from a scan are usually sorted and distinct already, which one comparison
    pass confirms; otherwise a sort and one pass drop the repeats.
    """
    if values.size < 2 or bool((values[1:] > values[:-1]).all()):
        return values.copy()  # a new array, as np.unique gives: callers cache the result
    out = np.sort(values)
    keep = np.empty(out.size, dtype=bool)
    keep[0] = True
    np.not_equal(out[1:], out[:-1], out=keep[1:])
    result: npt.NDArray[np.uint32] = out[keep]
    return result


def encode_arrow_deletions(offsets: npt.NDArray[np.uint32]) -> bytes:
    """Serialize row offsets as a one-batch Arrow IPC file (ZSTD body compression)."""
    batch = pa.record_batch([arrow_array(offsets, pa.uint32())], schema=ROW_ID_SCHEMA)  # pa.array imports pandas
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
    kind: Literal["auto", "array", "bitmap"] = "auto",
) -> DeletionFile:
    """Write the complete deletion vector of one fragment and describe it.

    Args:
        store: Store rooted at the dataset.
        fragment_id: Fragment the rows belong to.
        read_version: Version the deleting transaction read.
        deleted: Every deleted row offset of the fragment (old and new); duplicates are merged.
        kind: ``"auto"`` picks ``"array"`` (``.arrow``) below :data:`BITMAP_THRESHOLD` rows,
            else ``"bitmap"`` (``.bin``).

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
        file_type: DeletionFileType = "array" if offsets.size < BITMAP_THRESHOLD else "bitmap"
    elif kind in ("array", "bitmap"):
        file_type = kind
    else:
        raise InvalidInputError(f"unknown deletion file kind {kind!r}")
    payload = encode_arrow_deletions(offsets) if file_type == "array" else encode_bitmap_deletions(offsets)
    # Random ids make collisions practically impossible; a create-only write
    # still guarantees we never clobber another writer's file.
    for _attempt in range(8):
        df = DeletionFile(read_version, secrets.randbits(64), file_type, int(offsets.size))
        try:
            store.put_if_absent(df.path(fragment_id), payload)
            _cache_put(store, store.uri(df.path(fragment_id)), file_type, offsets)
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
    if len(column) == 0:
        return np.zeros(0, np.uint32)
    # straight from the buffer: pyarrow's to_numpy() imports pandas (~0.5 s in a fresh process)
    values = np.frombuffer(column.buffers()[1], np.uint32, len(column), column.offset * 4)
    return np.sort(values)


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


def check_deletions(offsets: npt.NDArray[np.uint32], df: DeletionFile, path: str,
                    physical_rows: int | None) -> None:
    """Refuse a deletion vector that is not what the manifest says it is.

    A vector whose offsets reach past the fragment (pylance fails the scan: "Invalid read of
    range") or whose size differs from the manifest's ``num_deleted_rows`` (0 = unknown, as
    old writers left it) belongs to another fragment or version: using it would bring deleted
    rows back or hide live ones.

    Raises:
        CorruptFileError: naming the file.
    """
    if physical_rows is not None and offsets.size and int(offsets[-1]) >= physical_rows:
        raise CorruptFileError(f"{path}: deletion file deletes row offset {int(offsets[-1])} but the "
                               f"fragment has {physical_rows} physical rows")
    if df.num_deleted_rows and offsets.size != df.num_deleted_rows:
        raise CorruptFileError(f"{path}: deletion file holds {offsets.size} deleted rows but the "
                               f"manifest records {df.num_deleted_rows}")


def deletion_vector(store: ObjectStore, fragment_id: int, df: DeletionFile, *,
                    physical_rows: int | None = None) -> npt.NDArray[np.uint32]:
    """The sorted deleted row offsets of a deletion file, as the shared read-only cached array.

    What dataset handles read through (scans, takes, counts, deletes): a hit costs one cache
    lookup. Arguments and errors as :func:`read_deletion_file`.
    """
    key = df.path(fragment_id)
    path = store.uri(key)
    hit = _cache_get(store, path, df.file_type, df.num_deleted_rows)
    if hit is None:
        data = bytes(store.read(key))
        if df.file_type == "array":
            hit = decode_arrow_deletions(data, path)
        else:
            hit = decode_bitmap_deletions(data, path)
        _cache_put(store, path, df.file_type, hit)
    check_deletions(hit, df, path, physical_rows if physical_rows else None)
    return hit


def read_deletion_file(store: ObjectStore, fragment_id: int, df: DeletionFile, *,
                       physical_rows: int | None = None) -> npt.NDArray[np.uint32]:
    """Read a deletion file and return the sorted deleted row offsets (an array the caller owns).

    ``store`` must be rooted where the file lives: the dataset root, or the
    base path named by ``df.base_id``.

    Args:
        store: Store rooted where the file lives.
        fragment_id: Id of the fragment the file belongs to.
        df: The manifest's description of the file.
        physical_rows: The fragment's physical row count, when known: offsets must stay below it.

    Raises:
        ObjectNotFoundError: if the file is missing.
        CorruptFileError: if it is malformed or disagrees with the manifest (naming the file).
    """
    return deletion_vector(store, fragment_id, df, physical_rows=physical_rows).copy()


def write_fragment_deletions(store: ObjectStore, fragment_id: int, read_version: int,
                             deleted: npt.NDArray[np.uint32], previous: DeletionFile | None
                             ) -> tuple[DeletionFile, str]:
    """Write a fragment's new complete deletion vector, of the kind pylance would pick after ``previous``.

    Returns:
        The fragment's new deletion file, and its key.
    """
    df = write_deletion_file(store, fragment_id, read_version, deleted,
                             kind=kind_after_delete(previous.file_type if previous is not None else None,
                                                    int(deleted.size)))
    return df, df.path(fragment_id)


__all__ = [
    "BITMAP_THRESHOLD",
    "DeletionFile",
    "ROW_ID_SCHEMA",
    "clear_deletion_cache",
    "decode_arrow_deletions",
    "decode_bitmap_deletions",
    "encode_arrow_deletions",
    "encode_bitmap_deletions",
    "check_deletions",
    "deletion_vector",
    "read_deletion_file",
    "kind_after_delete",
    "sorted_unique",
    "write_deletion_file",
    "write_fragment_deletions",
]
