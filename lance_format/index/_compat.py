"""Index entries of a manifest as :class:`IndexMetadata` (the table layer's one index model)."""

from __future__ import annotations

from lance_format.errors import LanceError
from lance_format.table.index_metadata import IndexMetadata
from lance_format.table.manifest import Manifest


def to_model(entry: object) -> IndexMetadata:
    """One manifest index entry, checked to be the model."""
    if not isinstance(entry, IndexMetadata):
        raise LanceError(f"expected an IndexMetadata index entry, got {type(entry).__name__}")
    return entry


def manifest_indices(manifest: Manifest) -> tuple[IndexMetadata, ...]:
    """Every index segment of ``manifest``."""
    return tuple(manifest.indices)


def to_operation(meta: IndexMetadata) -> IndexMetadata:
    """What ``LanceOperation.CreateIndex`` accepts for ``meta``: the model itself."""
    return meta
