"""Options of the ``lance`` Spark data source, parsed once into frozen dataclasses.

Reading (``spark.read.format("lance").option(...).load(uri)``):

* ``version`` (int) or ``tag`` (str): the version to read; the latest when neither is given.
  The version is pinned when the query is planned, so every task reads the same one.
* ``columns``: comma-separated column names to read (the Python data source API has no
  column-pruning hook, so this is how a scan reads fewer columns).
* ``batch_size``: rows per Arrow batch handed to Spark. By default it is chosen per fragment
  so that a batch holds about 16 MiB of stored data (between 1,024 and 65,536 rows);
  memory per task is bounded by one batch plus the fragment's deletion vector.
* ``max_rows_per_partition``: fragments with more physical rows are split into row ranges,
  one Spark input partition each (default 262,144: a 1M-row fragment still keeps several
  cores busy; measured 2x faster read + write on local[2] than one partition per fragment).
* ``filter``: a Lance SQL predicate applied inside the scan (``"id > 5 AND cat = 'a'"``); it
  may name any column of the table. Spark's own ``df.filter`` is always evaluated by Spark
  (see :mod:`lance_format.spark.reader` for why filters are not taken from Spark).
* ``limit``: read only the first ``limit`` rows in dataset order (matching the ``filter``),
  as pylance's ``limit``.

Writing (``df.write.format("lance").mode(...).option(...).save(uri)``):

* ``mode`` option ``create`` fails if a dataset exists (Spark only passes append/overwrite to
  Python data sources, see :mod:`lance_format.spark.writer`).
* ``data_storage_version`` (``2.0``/``2.1``/``2.2``/``stable``), ``max_rows_per_file``,
  ``enable_stable_row_ids`` (``true``/``false``, new datasets only).
* ``transaction_properties``: a JSON object of string keys/values stored with the commit;
  ``commit_message``: stored under the usual commit-message key.
* ``stream_id`` (streaming only): identifies the query for exactly-once commits; defaults
  to the query's ``checkpointLocation``.

Storage (both): ``storage_options`` as a JSON object, and/or the individual keys
``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``, ``aws_region``,
``aws_endpoint``, ``allow_http`` … (the spellings :mod:`lance_format.storage.s3` accepts),
and any key prefixed with ``storage.`` (the prefix is removed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lance_format.errors import InvalidInputError
from lance_format.write import DEFAULT_MAX_ROWS_PER_FILE

DEFAULT_MAX_ROWS_PER_PARTITION = 1 << 18

#: Storage option keys accepted as plain data source options (object_store / pylance spellings).
STORAGE_KEYS = frozenset({
    "aws_access_key_id", "access_key_id", "aws_secret_access_key", "secret_access_key",
    "aws_session_token", "session_token", "token", "region", "aws_region", "aws_default_region",
    "endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url", "allow_http", "aws_allow_http",
    "virtual_hosted_style_request", "aws_virtual_hosted_style_request", "skip_signature",
    "aws_skip_signature",
})

WriteMode = Literal["append", "overwrite", "create"]


def _get(options: Mapping[str, str], key: str) -> str | None:
    # Spark hands a case-insensitive mapping; plain dicts (tests, direct use) may differ in case.
    value = options.get(key)
    if value is None:
        for k, v in options.items():
            if k.lower() == key.lower():
                return v
    return value


def _int(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = _get(options, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInputError(f"lance data source option {key!r} must be an integer, got {raw!r}") from None
    if value < 0 or (value == 0 and key not in ("version", "limit")):
        raise InvalidInputError(f"lance data source option {key!r} must be positive, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str) -> bool:
    raw = (_get(options, key) or "false").strip().lower()
    if raw not in ("true", "false", "1", "0"):
        raise InvalidInputError(f"lance data source option {key!r} must be true or false, got {raw!r}")
    return raw in ("true", "1")


def _json_object(options: Mapping[str, str], key: str) -> dict[str, str]:
    raw = _get(options, key)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"lance data source option {key!r} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidInputError(f"lance data source option {key!r} must be a JSON object, got {raw!r}")
    return {str(k): str(v) for k, v in value.items()}


def _uri(options: Mapping[str, str]) -> str:
    uri = _get(options, "path")
    if not uri:
        raise InvalidInputError("lance data source: no dataset URI (use .load(uri) / .save(uri) or "
                                "option('path', uri))")
    return uri


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """The backend options carried in data source ``options``."""
    result = _json_object(options, "storage_options")
    for key, value in options.items():
        low = key.lower()
        if low in STORAGE_KEYS:
            result[low] = value
        elif low.startswith("storage."):
            result[key[len("storage."):]] = value
    return result


@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options (see the module docstring)."""

    uri: str
    version: int | None = None
    tag: str | None = None
    columns: tuple[str, ...] | None = None
    batch_size: int | None = None
    max_rows_per_partition: int = DEFAULT_MAX_ROWS_PER_PARTITION
    storage_options: Mapping[str, str] = field(default_factory=dict)
    filter: str | None = None
    limit: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Parse Spark's option mapping.

        Raises:
            InvalidInputError: a malformed option (named in the message).
        """
        version = _int(options, "version", None)
        tag = _get(options, "tag")
        if version is not None and tag:
            raise InvalidInputError("lance data source: give either 'version' or 'tag', not both")
        cols = _get(options, "columns")
        columns = tuple(c.strip() for c in cols.split(",") if c.strip()) if cols is not None else None
        if columns is not None and not columns:
            raise InvalidInputError("lance data source option 'columns' names no column")
        if _get(options, "filter_pushdown") is not None:
            raise InvalidInputError(
                "lance data source option 'filter_pushdown' was removed: PySpark reuses a reader planned "
                "with pushed filters for later queries of the same DataFrame, which then miss rows. Spark "
                "evaluates df.filter(...) itself; use option('filter', '<Lance SQL>') to filter inside the scan")
        return cls(_uri(options), version, tag or None, columns,
                   _int(options, "batch_size", None),
                   _int(options, "max_rows_per_partition", DEFAULT_MAX_ROWS_PER_PARTITION)
                   or DEFAULT_MAX_ROWS_PER_PARTITION,
                   storage_options(options), _get(options, "filter") or None, _int(options, "limit", None))


@dataclass(frozen=True)
class StreamReadOptions:
    """Parsed ``spark.readStream.format("lance")`` options (see :mod:`lance_format.spark.stream_reader`)."""

    uri: str
    columns: tuple[str, ...] | None = None
    filter: str | None = None
    batch_size: int | None = None
    max_rows_per_partition: int = DEFAULT_MAX_ROWS_PER_PARTITION
    storage_options: Mapping[str, str] = field(default_factory=dict)
    starting_version: int | None = None
    skip_change_commits: bool = False
    max_rows_per_trigger: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamReadOptions:
        """Parse Spark's option mapping.

        Raises:
            InvalidInputError: a malformed option, or a batch-only one (``version``, ``limit``...).
        """
        batch_only = [k for k in ("version", "tag", "timestamp", "limit") if _get(options, k) is not None]
        if batch_only:
            raise InvalidInputError(f"lance streaming source: option(s) {batch_only} apply to batch reads only; "
                                    "a stream starts at 'starting_version' (or with a snapshot of the latest)")
        read = ReadOptions.parse(options)
        return cls(read.uri, read.columns, read.filter, read.batch_size, read.max_rows_per_partition,
                   read.storage_options, _int(options, "starting_version", None),
                   _bool(options, "skip_change_commits"), _int(options, "max_rows_per_trigger", None))


@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options (see the module docstring)."""

    uri: str
    mode: WriteMode = "append"
    data_storage_version: str | None = None
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    enable_stable_row_ids: bool = False
    transaction_properties: Mapping[str, str] = field(default_factory=dict)
    storage_options: Mapping[str, str] = field(default_factory=dict)
    stream_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, overwrite: bool) -> WriteOptions:
        """Parse Spark's option mapping; ``overwrite`` is Spark's save mode flag.

        Raises:
            InvalidInputError: a malformed option (named in the message).
        """
        mode_opt = (_get(options, "mode") or "").strip().lower()
        if mode_opt not in ("", "append", "overwrite", "create"):
            raise InvalidInputError(f"lance data source option 'mode' must be append, overwrite or create, "
                                    f"got {mode_opt!r}")
        if overwrite and mode_opt in ("append", "create"):
            raise InvalidInputError(f"lance data source: option mode={mode_opt!r} contradicts save mode "
                                    "'overwrite'")
        mode: WriteMode = "overwrite" if overwrite else ("create" if mode_opt == "create" else "append")
        props = _json_object(options, "transaction_properties")
        message = _get(options, "commit_message")
        if message is not None:
            from lance_format.table.transaction import COMMIT_MESSAGE_KEY

            props[COMMIT_MESSAGE_KEY] = message
        stream_id = _get(options, "stream_id") or _get(options, "checkpointLocation")
        return cls(_uri(options), mode, _get(options, "data_storage_version"),
                   _int(options, "max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE) or DEFAULT_MAX_ROWS_PER_FILE,
                   _bool(options, "enable_stable_row_ids"), props, storage_options(options), stream_id)


def as_dict(options: Any) -> dict[str, str]:
    """Spark's option mapping as a plain ``dict`` (picklable, case preserved as given)."""
    return {str(k): str(v) for k, v in dict(options).items()}


__all__ = ["DEFAULT_MAX_ROWS_PER_PARTITION", "STORAGE_KEYS", "ReadOptions", "StreamReadOptions", "WriteOptions",
           "storage_options"]
