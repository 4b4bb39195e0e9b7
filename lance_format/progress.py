"""Write progress callbacks (pylance's ``lance.progress``).

``write_dataset(..., progress=tracker)`` calls ``tracker.begin(fragment)`` as each data file
starts (a fragment with no files yet, id 0, ``physical_rows`` 0 where pylance gives ``None``) and
``tracker.complete(fragment)`` as each data file but the last one ends, as pylance 14.0.2 does
(its writer finishes the last file without the callback).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from lance_format.storage import open_store
from lance_format.table.models import FragmentMetadata


class FragmentWriteProgress(ABC):
    """Progress of writing data files, one fragment each (pylance's class of the same name)."""

    @abstractmethod
    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Called when a new data file is about to be written (its fragment has no files yet)."""

    @abstractmethod
    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Called when a data file is completely written (its fragment lists the file)."""


class NoopFragmentWriteProgress(FragmentWriteProgress):
    """A tracker that does nothing (the default)."""

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Nothing."""

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Nothing."""


class FileSystemFragmentWriteProgress(FragmentWriteProgress):
    """Keeps ``fragment_{id}.in_progress`` (JSON: id and ``metadata``) and ``fragment_{id}.json``
    (the fragment) under ``base_uri`` while a file is written; the first goes when it completes.

    Args:
        base_uri: Folder or object-store prefix for the progress files.
        metadata: Extra values stored in each in-progress file (e.g. the worker's name).
    """

    PROGRESS_EXT: str = ".in_progress"

    def __init__(self, base_uri: str, metadata: Mapping[str, str] | None = None):
        self._store = open_store(base_uri)
        self._metadata = dict(metadata or {})

    def _in_progress_path(self, fragment: FragmentMetadata) -> str:
        return f"fragment_{fragment.id}{self.PROGRESS_EXT}"

    def _fragment_file(self, fragment: FragmentMetadata) -> str:
        return f"fragment_{fragment.id}.json"

    def begin(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Write the in-progress file and the fragment's JSON."""
        state = {"fragment_id": fragment.id, "metadata": self._metadata}
        self._store.write(self._in_progress_path(fragment), json.dumps(state).encode("utf-8"))
        self._store.write(self._fragment_file(fragment), json.dumps(fragment.to_json()).encode("utf-8"))

    def complete(self, fragment: FragmentMetadata, **kwargs: Any) -> None:
        """Delete the in-progress file."""
        self._store.delete(self._in_progress_path(fragment))


__all__ = ["FileSystemFragmentWriteProgress", "FragmentWriteProgress", "NoopFragmentWriteProgress"]
