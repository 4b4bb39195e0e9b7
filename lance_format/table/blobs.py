"""Blob columns: what scans return for them, and file-like access to their bytes (``take_blobs``).

A blob column keeps its values outside the column's pages. Two flavours exist (upstream
``rust/lance-encoding/src/encodings/logical/blob.rs`` and ``rust/lance/src/dataset/blob.rs``):

* v1 (file versions 2.0 and 2.1): a ``large_binary`` field with ``lance-encoding:blob`` metadata.
  The pages hold ``(position, size)`` pairs pointing at bytes elsewhere in the same data file.
  Dataset scans return these pairs as ``struct<position: uint64, size: uint64>``, never the bytes.
* v2 (2.2): a ``lance.blob.v2`` struct column whose stored descriptor is
  ``struct<kind, position, size, blob_id, blob_uri>``; kind 0 keeps the bytes inline in the data file.

``take_blobs`` turns the descriptors of chosen rows into :class:`BlobFile` objects that read the
bytes lazily, as pylance's ``LanceDataset.take_blobs`` does.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.file.bytesource import ByteSource
from lance_format.schema import BLOB_METADATA_KEY, BLOB_V2_EXTENSION
from lance_format.storage.base import ObjectStore

#: What dataset scans return for a v1 blob column.
BLOB_V1_DESCRIPTION = pa.struct([pa.field("position", pa.uint64()), pa.field("size", pa.uint64())])
#: Blob-v2 descriptor kinds (``rust/lance/src/dataset/blob.rs``): bytes in the data file, in a
#: shared ``.blob`` sidecar, in a ``.blob`` file of their own, behind an external URI.
_INLINE, _PACKED, _DEDICATED = 0, 1, 2


def is_blob_v1(field: pa.Field) -> bool:
    """Whether ``field`` is a v1 blob column (binary with ``lance-encoding:blob`` metadata)."""
    meta = field.metadata or {}
    flag = meta.get(BLOB_METADATA_KEY.encode(), b"").lower()
    return flag in (b"true", b"1", b"yes") and (
        pa.types.is_large_binary(field.type) or pa.types.is_binary(field.type)
    )


def is_blob_field(field: pa.Field) -> bool:
    """Whether ``field`` is a blob column of either flavour."""
    meta = field.metadata or {}
    return is_blob_v1(field) or (
        pa.types.is_struct(field.type)
        and (meta.get(BLOB_METADATA_KEY.encode()) is not None
             or meta.get(b"ARROW:extension:name") == BLOB_V2_EXTENSION.encode())
    )


def scan_field(field: pa.Field) -> pa.Field:
    """The field a dataset scan returns for ``field``: a v1 blob column becomes its descriptor struct."""
    if not is_blob_v1(field):
        return field
    return pa.field(field.name, BLOB_V1_DESCRIPTION, field.nullable, metadata=field.metadata)


def is_blob_v2(field: pa.Field) -> bool:
    """Whether ``field`` is a v2 blob column as scans see it (its descriptor struct)."""
    return pa.types.is_struct(field.type) and is_blob_field(field)


def bytes_field(field: pa.Field) -> pa.Field:
    """The field of a blob column read as its bytes (``large_binary`` marked as a blob)."""
    if not is_blob_v2(field):
        return field
    return pa.field(field.name, pa.large_binary(), field.nullable, metadata={BLOB_METADATA_KEY: "true"})


def inline_bytes(read_ranges: Any, desc: pa.StructArray, where: str,
                 store: ObjectStore | None = None) -> pa.Array:
    """The bytes of v2 blob descriptors ``desc`` of one data file.

    Args:
        read_ranges: ``(positions, sizes) -> LargeBinaryArray`` of the data file (inline blobs).
        desc: ``struct<kind, position, size, blob_id, blob_uri>`` values.
        where: The data file's key in ``store`` (sidecar files are found from it).
        store: The data file's object store (packed and dedicated blobs live in sidecar files).

    Raises:
        NotSupportedError: an external blob (a URI), or a sidecar blob without ``store``.
    """
    valid = np.asarray(desc.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    kind = desc.field("kind").fill_null(0).to_numpy(zero_copy_only=False)
    pos = desc.field("position").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    size = np.where(valid, desc.field("size").fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), 0)
    outside = valid & (kind != _INLINE)
    if not outside.any():
        data: pa.Array = read_ranges(pos, size)
        if valid.all():
            return data
        return pa.Array.from_buffers(pa.large_binary(), len(desc),
                                     [pa.array(valid).buffers()[1], *data.buffers()[1:]])
    if store is None:
        raise NotSupportedError(f"{where}: blob kind {int(kind[outside][0])} (outside the data file) is not supported")
    inline = np.where(outside, 0, size)
    values = read_ranges(pos, inline).to_pylist()
    # sidecar blobs are large (>= pylance's inline threshold): one read each
    for i, f in enumerate(blob_files(store, where, desc.filter(pa.array(outside)))):
        values[int(np.flatnonzero(outside)[i])] = None if f is None else f.read()
    return pa.array([v if ok else None for v, ok in zip(values, valid.tolist(), strict=True)], pa.large_binary())


class BlobFile(io.RawIOBase):
    """One blob's bytes as a read-only, seekable file (pylance's ``lance.BlobFile``).

    Args:
        store: Object store holding the data file.
        key: The data file's key in ``store``.
        position: Offset of the blob's first byte in the file.
        size: Length of the blob in bytes.
    """

    def __init__(self, store: ObjectStore, key: str, position: int, size: int) -> None:
        super().__init__()
        self._store, self._key = store, key
        self._source = ByteSource(store, key, None)
        self._start = int(position)
        self._size = int(size)
        self._pos = 0

    def size(self) -> int:
        """Length of the blob in bytes."""
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}.get(whence)
        if base is None:
            raise InvalidInputError(f"BlobFile.seek: unknown whence {whence}")
        new = base + int(offset)
        if new < 0:
            raise InvalidInputError(f"BlobFile.seek: negative position {new}")
        self._pos = new
        return new

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        remaining = max(self._size - self._pos, 0)
        n = remaining if size is None or size < 0 else min(int(size), remaining)
        if n == 0:
            return b""
        data = bytes(self._source.read_range(self._start + self._pos, n, "blob"))
        self._pos += n
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def __repr__(self) -> str:
        return f"<BlobFile size={self._size}>"


def blob_files(store: ObjectStore, key: str, desc: pa.StructArray) -> list[BlobFile | None]:
    """:class:`BlobFile` objects for the descriptors ``desc`` of one data file (None for nulls).

    Raises:
        NotSupportedError: a v2 blob stored outside the data file (packed, dedicated or external).
    """
    names = [desc.type.field(i).name for i in range(desc.type.num_fields)]
    valid = np.asarray(desc.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    pos = desc.field(names.index("position")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    size = desc.field(names.index("size")).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    keys = [key] * len(desc)
    if "kind" in names:
        kind = desc.field(names.index("kind")).fill_null(0).to_numpy(zero_copy_only=False)
        external = valid & ~np.isin(kind, (_INLINE, _PACKED, _DEDICATED))
        if external.any():
            raise NotSupportedError(
                f"{key}: blob kind {int(kind[external][0])} (an external URI) is not supported"
            )
        ids = desc.field(names.index("blob_id")).fill_null(0).to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(valid & (kind != _INLINE)).tolist():  # one sidecar name per large blob
            keys[i] = sidecar_key(key, int(ids[i]))
    else:
        # v1 in 2.0 files: a null is stored as (position 1, size 0), an empty value as (0, 0)
        valid = valid & ~((size == 0) & (pos != 0))
    return [BlobFile(store, k, int(p), int(s)) if v else None
            for k, p, s, v in zip(keys, pos.tolist(), size.tolist(), valid.tolist(), strict=True)]


def sidecar_key(data_key: str, blob_id: int) -> str:
    """Key of the ``.blob`` file holding packed (kind 1) or dedicated (kind 2) blobs of a data file.

    pylance 14.0.2 puts them in a directory named as the data file (without ``.lance``), named by
    the blob id's 32 bits in reversed order (``data/<file>/1000…0.blob`` for id 1).
    """
    stem = data_key[: -len(".lance")] if data_key.endswith(".lance") else data_key
    return f"{stem}/{format(blob_id, '032b')[::-1]}.blob"


def check_selector(ids: Sequence[int] | pa.Array | None, addresses: Sequence[int] | pa.Array | None,
                   indices: Sequence[int] | pa.Array | None) -> None:
    """``take_blobs`` needs exactly one of ``ids``, ``addresses`` and ``indices`` (as pylance)."""
    given = sum(x is not None for x in (ids, addresses, indices))
    if given != 1:
        raise InvalidInputError("take_blobs: pass exactly one of ids, addresses or indices")
