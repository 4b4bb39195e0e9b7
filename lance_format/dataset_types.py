"""pylance's typed dicts for versions, tags and branches (``lance.dataset.Version`` ...).

They describe the dicts pylance returns; ``LanceDataset.versions()`` returns :class:`Version`
shaped dicts (plus our extra keys), ``checkout_version`` takes a version number, tag or
:class:`VersionRef`-like reference. Our ``Tags.list()`` returns tag objects with these keys as
attributes.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

__all__ = ["Branch", "Tag", "Version", "VersionRef"]


class Tag(TypedDict):
    """A tag: the branch and version it points at."""

    branch: str | None
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    manifest_size: int
    metadata: dict[str, str]


class Branch(TypedDict):
    """A branch: where it was created from."""

    parent_branch: str | None
    branch_identifier: list[tuple[int, str]]
    parent_version: int
    create_at: int
    manifest_size: int
    metadata: dict[str, str]


class Version(TypedDict):
    """One entry of ``versions()``."""

    version: int
    timestamp: int | datetime
    metadata: dict[str, str]


class VersionRef(TypedDict):
    """A reference to a version by number."""

    version: int
