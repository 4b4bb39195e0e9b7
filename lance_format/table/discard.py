"""Removing the files of fragments no manifest references (a failed or abandoned write)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from lance_format.errors import LanceError
from lance_format.storage import ObjectStore
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import data_file_key


def discard_fragment_files(store: ObjectStore, fragments: Iterable[FragmentMetadata], *,
                           in_data_dir: bool = True) -> None:
    """Delete the data files of ``fragments``, best effort and each file once.

    Used on the error paths of writers, compaction and Spark jobs: the commit did not happen,
    so nothing references the files. A file that cannot be deleted is left to cleanup's
    unverified-file rule rather than hiding the error that led here.

    Args:
        store: The dataset's store (or, with ``in_data_dir=False``, the directory holding the files).
        fragments: Fragments that were written but never committed.
        in_data_dir: Whether file paths are relative to the store's ``data/`` directory.
    """
    seen: set[str] = set()
    for frag in fragments:
        for df in frag.files:
            key = data_file_key(df.path) if in_data_dir else df.path
            if key in seen:
                continue
            seen.add(key)
            with contextlib.suppress(LanceError, OSError):
                store.delete(key)


__all__ = ["discard_fragment_files"]
