"""Removing files no manifest references (a failed or abandoned write): one best-effort delete."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from lance_format.errors import LanceError, VersionNotFoundError
from lance_format.storage import ObjectStore
from lance_format.table.models import FragmentMetadata
from lance_format.table.naming import data_file_key
from lance_format.table.versions import find_latest, load_manifest


def discard_keys(store: ObjectStore, keys: Iterable[str]) -> list[str]:
    """Delete ``keys`` (files this process wrote that nothing references), best effort.

    Every path that abandons files it wrote ends here (uncommitted data files, deletion
    vectors of a refused commit, vectors a rebase superseded). A failed delete leaves an
    orphan for cleanup's unverified-file rule, never an error: the caller is usually
    already raising the error that led here.

    Returns:
        The keys that were deleted.
    """
    deleted = []
    for key in keys:
        try:
            store.delete(key)
        except (LanceError, OSError):
            continue
        deleted.append(key)
    return deleted


def discard_fragment_files(store: ObjectStore, fragments: Iterable[FragmentMetadata], *,
                           in_data_dir: bool = True, unless_committed_after: int | None = None) -> None:
    """Delete the data files of ``fragments``, best effort and each file once.

    Used on the error paths of writers, compaction and Spark jobs: the commit did not happen,
    so nothing references the files. A file that cannot be deleted is left to cleanup's
    unverified-file rule rather than hiding the error that led here.

    Args:
        store: The dataset's store (or, with ``in_data_dir=False``, the directory holding the files).
        fragments: Fragments that were written but never committed.
        in_data_dir: Whether file paths are relative to the store's ``data/`` directory.
        unless_committed_after: When the caller cannot tell whether its commit landed (an
            exception other than the commit's own refusal, e.g. an interrupt), the version it
            read: a version after it that references one of the files means they were committed,
            and then nothing is deleted. So is nothing when that cannot be checked; cleanup's
            unverified-file rule removes true orphans later.
    """
    frags = list(fragments)
    keys = dict.fromkeys(data_file_key(df.path) if in_data_dir else df.path for frag in frags for df in frag.files)
    if not keys:
        return
    if unless_committed_after is not None and in_data_dir and _maybe_committed(store, frags, unless_committed_after):
        return
    discard_keys(store, keys)


def _maybe_committed(store: ObjectStore, fragments: list[FragmentMetadata], read_version: int) -> bool:
    """Whether a version after ``read_version`` references a data file of ``fragments`` (or it is unknown)."""
    # Data file names are random, so only the commit that wrote them can reference them.
    paths = {df.path for frag in fragments for df in frag.files}
    try:
        found = find_latest(store)
        for version in range(read_version + 1, (found[0] if found else 0) + 1):
            with contextlib.suppress(VersionNotFoundError):  # a gap: cleaned up or never there
                manifest = load_manifest(store, version)
                if any(df.path in paths for frag in manifest.fragments for df in frag.files):
                    return True
    except (LanceError, OSError):
        return True
    return False


__all__ = ["discard_fragment_files", "discard_keys"]
