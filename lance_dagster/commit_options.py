"""Custom commit properties and Lance writer options, from config and from output metadata.

dagster-deltalake takes ``custom_metadata`` (stored with the Delta commit) and ``writer_properties``
(Parquet writer settings) from its IO manager config and from definition or output metadata; these
are the Lance counterparts:

* ``commit_properties``: string properties stored in the commit's Lance transaction next to the
  Dagster lineage (``dagster/*`` and ``lance_dagster/*`` keys are reserved for it);
* ``writer_options``: how new data files are cut: ``max_rows_per_file``, ``max_rows_per_group``,
  ``max_bytes_per_file``, and for a new dataset ``enable_stable_row_ids`` and
  ``data_storage_version``.

Config gives the defaults; definition metadata, then output metadata
(``Output(df, metadata={"commit_properties": {...}})``), add to them key by key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import Config
from pydantic import Field

from lance_format.errors import InvalidInputError

COMMIT_PROPERTIES_KEY = "commit_properties"
WRITER_OPTIONS_KEY = "writer_options"
#: Property prefixes the lineage owns (lance_dagster.lineage).
RESERVED_PREFIXES = ("dagster/", "lance_dagster/", "__lance")
_INT_OPTIONS = ("max_rows_per_file", "max_rows_per_group", "max_bytes_per_file")
_BOOL_OPTIONS = ("enable_stable_row_ids",)
_STR_OPTIONS = ("data_storage_version",)
WRITER_OPTION_NAMES = _INT_OPTIONS + _BOOL_OPTIONS + _STR_OPTIONS


def raw_value(value: Any) -> Any:
    """The plain value of a metadata entry (Dagster may wrap it in a ``MetadataValue``)."""
    return getattr(value, "value", value)


class LanceWriterOptions(Config):
    """Writer options of the IO manager and the resource (``None``: the library default)."""

    max_rows_per_file: int | None = Field(default=None, gt=0, description="Rows per data file (one fragment "
                                          "each); default 1Mi.")
    max_rows_per_group: int | None = Field(default=None, gt=0, description="Rows handed to the file writer "
                                           "at a time.")
    max_bytes_per_file: int | None = Field(default=None, gt=0, description="Soft cap on a data file's size.")
    enable_stable_row_ids: bool | None = Field(default=None, description="New datasets keep row ids stable "
                                               "across compaction.")

    def as_dict(self) -> dict[str, Any]:
        """The options that are set."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


@dataclass(frozen=True)
class CommitOptions:
    """Extra transaction properties and writer options of one write.

    Attributes:
        properties: stored with the commit (besides the lineage).
        writer: keyword arguments for the data file writer (names in :data:`WRITER_OPTION_NAMES`).
    """

    properties: Mapping[str, str] = field(default_factory=dict)
    writer: Mapping[str, Any] = field(default_factory=dict)


def check_properties(value: Any, *, where: str) -> dict[str, str]:
    """Commit properties as a ``{str: str}`` dict (numbers and booleans become their text).

    Raises:
        InvalidInputError: not a dict of scalars, or a key reserved for the lineage.
    """
    raw = raw_value(value)
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: {COMMIT_PROPERTIES_KEY!r} must be a dict of strings, got {raw!r}")
    out: dict[str, str] = {}
    for key, item in raw.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"{where}: {COMMIT_PROPERTIES_KEY!r} keys must be non-empty strings, got {key!r}")
        if key.startswith(RESERVED_PREFIXES):
            raise InvalidInputError(f"{where}: commit property {key!r} is reserved for the Dagster lineage "
                                    f"(keys starting with {', '.join(RESERVED_PREFIXES)})")
        if not isinstance(item, str | int | float | bool):
            raise InvalidInputError(f"{where}: commit property {key!r} must be a string, got {item!r}")
        out[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return out


def check_writer_options(value: Any, *, where: str) -> dict[str, Any]:
    """Writer options, checked by name and type.

    Raises:
        InvalidInputError: an unknown option (the known ones are listed) or a bad value.
    """
    raw = raw_value(value)
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"{where}: {WRITER_OPTIONS_KEY!r} must be a dict, got {raw!r}")
    out: dict[str, Any] = {}
    for key, item in raw.items():
        if key not in WRITER_OPTION_NAMES:
            raise InvalidInputError(f"{where}: unknown writer option {key!r}; known: {', '.join(WRITER_OPTION_NAMES)}")
        if key in _INT_OPTIONS and (isinstance(item, bool) or not isinstance(item, int) or item <= 0):
            raise InvalidInputError(f"{where}: writer option {key!r} must be a positive integer, got {item!r}")
        if key in _BOOL_OPTIONS and not isinstance(item, bool):
            raise InvalidInputError(f"{where}: writer option {key!r} must be true or false, got {item!r}")
        if key in _STR_OPTIONS and not isinstance(item, str):
            raise InvalidInputError(f"{where}: writer option {key!r} must be a string, got {item!r}")
        out[str(key)] = item
    return out


def resolve_commit_options(default: CommitOptions, layers: Sequence[Mapping[str, Any] | None], *,
                           where: str) -> CommitOptions:
    """Add each metadata layer's ``commit_properties`` and ``writer_options`` (later layers win per key).

    Raises:
        InvalidInputError: from :func:`check_properties` / :func:`check_writer_options`.
    """
    properties = dict(default.properties)
    writer = dict(default.writer)
    for layer in layers:
        if not layer:
            continue
        if layer.get(COMMIT_PROPERTIES_KEY) is not None:
            properties.update(check_properties(layer[COMMIT_PROPERTIES_KEY], where=f"{where} metadata"))
        if layer.get(WRITER_OPTIONS_KEY) is not None:
            writer.update(check_writer_options(layer[WRITER_OPTIONS_KEY], where=f"{where} metadata"))
    return CommitOptions(properties, writer)
