"""Settings shared by the IO manager and the resource, and how asset keys map to dataset URIs."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

WriteMode = Literal["overwrite", "append"]
WRITE_MODES: tuple[str, ...] = ("overwrite", "append")

#: Suffix of every dataset directory, as pylance names its datasets.
DATASET_SUFFIX = ".lance"

#: Folder (under ``$DAGSTER_HOME``, else the working directory) used when no root URI is configured.
DEFAULT_ROOT_FOLDER = "lance_storage"


def default_root_uri() -> str:
    """Return the local folder used when no ``root_uri`` is configured.

    ``$DAGSTER_HOME/storage/lance_storage`` when ``DAGSTER_HOME`` is set (next to Dagster's own
    storage), else ``./lance_storage`` in the working directory.
    """
    home = os.environ.get("DAGSTER_HOME")
    if home:
        return os.path.join(os.path.abspath(home), "storage", DEFAULT_ROOT_FOLDER)
    return os.path.abspath(DEFAULT_ROOT_FOLDER)


def parse_mode(value: Any, *, where: str) -> WriteMode:
    """Validate a write mode taken from config or metadata.

    Args:
        value: the raw value (a str, or a Dagster ``TextMetadataValue``).
        where: what the value came from, for the error message.

    Raises:
        ValueError: if the value is not ``"overwrite"`` or ``"append"``.
    """
    raw = getattr(value, "value", value)
    if not isinstance(raw, str) or raw not in WRITE_MODES:
        raise ValueError(f"{where}: write mode must be one of {WRITE_MODES}, got {raw!r}")
    return cast(WriteMode, raw)


def dataset_uri(root_uri: str, path: Sequence[str] | str) -> str:
    """Return the URI of the dataset for an asset key path (or a plain dataset name).

    ``["sales", "orders"]`` under root ``s3://bucket/lake`` becomes
    ``s3://bucket/lake/sales/orders.lance``. A name that already ends in ``.lance`` keeps it.

    Raises:
        ValueError: if a path component is empty or tries to leave the root.
    """
    parts = ([p for p in path.split("/") if p] or [path]) if isinstance(path, str) else list(path)
    for part in parts:
        if not part or part in (".", "..") or "\\" in part:
            raise ValueError(f"invalid dataset path component {part!r} in {path!r}")
    rel = "/".join(parts)
    if not rel.endswith(DATASET_SUFFIX):
        rel += DATASET_SUFFIX
    return f"{root_uri.rstrip('/')}/{rel}"


@dataclass(frozen=True)
class LanceSettings:
    """Resolved storage settings used by the write and read plumbing.

    Attributes:
        root_uri: folder or object-store prefix that holds one dataset per asset.
        storage_options: passed unchanged to ``lance_format`` (credentials, endpoints).
        default_mode: write mode used when neither definition nor output metadata names one.
        data_storage_version: Lance file version for new datasets (``None``: the library default).
    """

    root_uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)
    default_mode: WriteMode = "overwrite"
    data_storage_version: str | None = None

    def uri_for(self, path: Sequence[str] | str) -> str:
        """Return the dataset URI for an asset key path or dataset name."""
        return dataset_uri(self.root_uri, path)

    @property
    def options(self) -> dict[str, str] | None:
        """Storage options as ``lance_format`` takes them (``None`` when empty)."""
        return dict(self.storage_options) or None


def make_settings(
    root_uri: str | None,
    storage_options: Mapping[str, str] | None,
    default_mode: str,
    data_storage_version: str | None,
) -> LanceSettings:
    """Build :class:`LanceSettings` from raw config values, validating the mode."""
    return LanceSettings(
        root_uri=root_uri or default_root_uri(),
        storage_options=dict(storage_options or {}),
        default_mode=parse_mode(default_mode, where="config write_mode"),
        data_storage_version=data_storage_version or None,
    )
