"""The directory of one index segment, ``_indices/{uuid}/``.

Index files are Lance files of the dataset's storage version: pylance 14.0.2 writes
BTree / Bitmap files of a 2.0 dataset with footer ``(0,3)``, of a 2.2 dataset ``(2,2)``
(``LanceIndexStore::new_index_file``, ``rust/lance-index/src/scalar/lance_format.rs``).
A legacy (0.1) dataset gets 2.0 index files (observed on 14.0.2): the v1 format has no
global buffers (LABEL_LIST keeps its null lists in one) and pylance's readers try v2 first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

import pyarrow as pa

from lance_format import file as _file  # the writer loads on first write (queries only read)
from lance_format.errors import CorruptFileError, LanceError, ObjectNotFoundError
from lance_format.file import LanceFileReader
from lance_format.storage import ObjectStore
from lance_format.table.index_metadata import IndexFile
from lance_format.table.naming import index_dir

#: Storage versions whose datasets get 2.0 index files (the legacy v1 format).
_LEGACY = frozenset({"0.1", "0.2", "legacy"})


def index_file_version(data_storage_version: str) -> str:
    """Lance file version of new index files on a dataset of ``data_storage_version``."""
    return "2.0" if str(data_storage_version).strip().lower() in _LEGACY else data_storage_version


class IndexDir:
    """Reads and writes the files of one index segment.

    Args:
        store: Store rooted at the dataset (or at the index's base path).
        uuid: Segment id.
        version: The dataset's storage version (``"2.0"``, ``"2.1"``, ``"2.2"``; legacy datasets
            get 2.0 files, see :func:`index_file_version`).
        sizes: Known file sizes (from the manifest), saving a request per file.
    """

    def __init__(self, store: ObjectStore, uuid: str, version: str = "2.0",
                 sizes: Mapping[str, int] | None = None):
        self.store = store
        self.uuid = uuid
        self.prefix = index_dir(uuid)
        self.version = index_file_version(version)
        self._sizes = dict(sizes or {})
        self.written: list[str] = []

    def key(self, name: str) -> str:
        """Store key of file ``name`` of this segment."""
        return f"{self.prefix}/{name}"

    def write(self, name: str, table: pa.Table, metadata: Mapping[str, str] | None = None,
              global_buffers: Sequence[bytes] = ()) -> IndexFile:
        """Write ``table`` as file ``name`` (``global_buffers`` become buffers 1, 2, …); returns its entry."""
        key = self.key(name)
        self.written.append(key)
        writer = _file.LanceFileWriter(schema=table.schema, version=self.version, store=self.store, key=key)
        try:
            for data in global_buffers:
                writer.add_global_buffer(data)
            for k, v in (metadata or {}).items():
                writer.add_schema_metadata(k, v)
            writer.write_batch(table)
            writer.close()
        except BaseException:
            writer.abort()
            raise
        return IndexFile(name, writer.file_size)

    def reader(self, name: str, columns: list[str] | None = None) -> LanceFileReader:
        """Open file ``name`` (only ``columns`` when given).

        Raises:
            CorruptFileError: the file is missing or not a readable Lance file.
        """
        key = self.key(name)
        try:
            return LanceFileReader(None, columns=columns, store=self.store, key=key,
                                   file_size=self._sizes.get(name))
        except ObjectNotFoundError as exc:
            raise CorruptFileError(f"{self.store.uri(key)}: index file is missing") from exc
        except CorruptFileError as exc:
            raise CorruptFileError(f"index {self.uuid}: {exc}") from exc
        except LanceError as exc:
            raise CorruptFileError(f"{self.store.uri(key)}: unreadable index file: {exc}") from exc

    def discard(self, *, everything: bool = False) -> None:
        """Delete the files of this segment after a failed build or commit (best effort).

        Args:
            everything: Delete every file under the segment's directory, not only those this
                object wrote (a remapped segment written by another ``IndexDir``).
        """
        with contextlib.suppress(LanceError, OSError):
            keys = [info.key for info in self.store.list(self.prefix + "/")] if everything else list(self.written)
            self.store.delete_many(keys)
        self.written.clear()
