"""Options of the ``lance`` Spark data source, parsed once into frozen dataclasses.

An option the source does not know is an error that lists the valid ones (a misspelt
``verison`` must not silently read the latest version). Keys are case-insensitive.

Reading (``spark.read.format("lance").option(...).load(uri)``):

* ``version`` (int), ``tag`` (str) or ``timestamp`` (ISO 8601; the newest version committed
  before it, as pylance's ``asof``; naive times are local time): the version to read, the
  latest when none is given. The version is pinned when the DataFrame is created, so every
  query of it reads the same one.
* ``columns``: comma-separated column names to read (the Python data source API has no
  column-pruning hook, so this — or a user schema — is how a scan reads fewer columns).
  The metadata columns ``_rowid``, ``_rowaddr`` (``bigint``) and ``_fragid`` (``int``) may
  be listed too; ``metadata_columns`` appends them to every column.
* ``fragment_ids``: comma-separated fragment ids to read (the others are skipped).
* ``batch_size``: rows per Arrow batch handed to Spark. By default it is chosen per fragment
  so that a batch holds about 16 MiB of stored data (between 1,024 and 65,536 rows);
  memory per task is bounded by one batch plus the fragment's deletion vector.
* ``max_rows_per_partition``: fragments with more physical rows are split into row ranges,
  one Spark input partition each. Without it a batch read uses one partition per fragment and
  cuts only a fragment far larger than the rest, or a lone one (``reader.auto_partition_rows``);
  streaming reads default to 262,144 rows.
* ``filter``: a Lance SQL predicate applied inside the scan (``"id > 5 AND cat = 'a'"``); it
  may name any column of the table. Spark's own ``df.filter`` is always evaluated by Spark
  (see :mod:`lance_format.spark.reader` for why filters are not taken from Spark).
* ``limit``: read only the first ``limit`` rows in dataset order (matching the ``filter``),
  as pylance's ``limit``.
* ``nearest``: a vector search, as a JSON object with pylance's ``nearest=`` keys
  (``{"column": "vec", "q": [0.1, ...], "k": 10, "nprobes": 20, "refine_factor": 2,
  "metric": "cosine", "prefilter": true}``; ``prefilter`` is pylance's scanner argument). The
  DataFrame holds the ``k`` nearest rows (after ``filter``) and a ``_distance`` float column,
  like ``ds.to_table(nearest=...)``. The JSON object is what lance-spark users pass too: one
  option a SQL ``OPTIONS (...)`` clause can carry, rather than several.

Streaming reads take ``columns``, ``filter``, ``batch_size``, ``max_rows_per_partition``,
``starting_version``, ``skip_change_commits`` and ``max_rows_per_trigger``
(:mod:`lance_format.spark.stream_reader`).

Writing (``df.write.format("lance").mode(...).option(...).save(uri)``):

* ``mode`` option ``create`` (or ``error`` / ``errorifexists``) fails if a dataset exists, and
  ``ignore`` writes nothing when one exists (Spark refuses those save modes for Python data
  sources before the source sees them, see :mod:`lance_format.spark.writer`).
* ``<column>.arrow.fixed-size-list.size`` (lance-spark's table property): store that array
  column of a new dataset as ``fixed_size_list<T, N>`` (a vector).
* ``<column>.lance.encoding`` = ``blob`` (lance-spark's table property): store that binary column
  of a new dataset as a blob column (or give the Spark field ``lance-encoding:blob`` metadata).
* ``data_storage_version`` (``2.0``/``2.1``/``2.2``/``stable``), ``max_rows_per_file``,
  ``enable_stable_row_ids`` (``true``/``false``, new datasets only).
* ``transaction_properties``: a JSON object of string keys/values stored with the commit;
  ``commit_message``: stored under the usual commit-message key.
* ``stream_id`` (streaming only): identifies the query for exactly-once commits; defaults
  to the query's ``checkpointLocation``.

Locations: a local path, ``file:/path`` / ``file:///path`` (the Hadoop forms Spark's catalog
passes; percent-escapes decoded), ``s3://`` (``s3a://`` is read as ``s3://``), ``memory://``.
Storage (both): ``storage_options`` as a JSON object, and/or the individual keys
``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``, ``aws_region``,
``aws_endpoint``, ``allow_http`` … (the spellings :mod:`lance_format.storage.s3` accepts),
and any key prefixed with ``storage.`` (the prefix is removed).
"""

from __future__ import annotations

import difflib
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from lance_format.errors import InvalidInputError
from lance_format.lazy import OnFirstUse
from lance_format.table.write_defaults import DEFAULT_MAX_ROWS_PER_FILE

if TYPE_CHECKING:
    from lance_format.table import transaction as _transaction
else:
    # Every Spark task imports this module (the reader's and the writer's options); only parsing
    # write options needs the commit-message key, and its module loads the commit models.
    _transaction = OnFirstUse("lance_format.table.transaction")

DEFAULT_MAX_ROWS_PER_PARTITION = 1 << 18

#: Storage option keys accepted as plain data source options (object_store / pylance spellings).
STORAGE_KEYS = frozenset({
    "aws_access_key_id", "access_key_id", "aws_secret_access_key", "secret_access_key",
    "aws_session_token", "session_token", "token", "region", "aws_region", "aws_default_region",
    "endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url", "allow_http", "aws_allow_http",
    "virtual_hosted_style_request", "aws_virtual_hosted_style_request", "skip_signature",
    "aws_skip_signature",
})

WriteMode = Literal["append", "overwrite", "create", "ignore"]

#: Suffix of the write option (lance-spark's table property) giving a vector column's size.
FIXED_SIZE_SUFFIX = ".arrow.fixed-size-list.size"

#: Suffix of the write option (lance-spark's table property) whose value ``blob`` stores a binary
#: column with the blob encoding (``lance-encoding:blob``).
BLOB_ENCODING_SUFFIX = ".lance.encoding"

#: The metadata columns a read may ask for, and their Spark-side Arrow types.
METADATA_COLUMNS = {"_rowid": "int64", "_rowaddr": "int64", "_fragid": "int32"}

_COMMON_READ = ("path", "columns", "filter", "batch_size", "max_rows_per_partition", "metadata_columns",
                "storage_options")
#: Options of a batch read, of a streaming read, of a write and of a streaming write.
READ_KEYS = frozenset(_COMMON_READ + ("version", "tag", "timestamp", "limit", "fragment_ids", "nearest"))
STREAM_READ_KEYS = frozenset(_COMMON_READ + ("starting_version", "skip_change_commits", "max_rows_per_trigger"))
WRITE_KEYS = frozenset({"path", "mode", "data_storage_version", "max_rows_per_file", "enable_stable_row_ids",
                        "transaction_properties", "commit_message", "storage_options"})
STREAM_WRITE_KEYS = WRITE_KEYS | {"stream_id", "checkpointlocation"}
#: Keys Spark's catalog adds when a table is created (CREATE TABLE ... USING lance).
CATALOG_KEYS = frozenset({"owner", "location", "provider", "comment", "external", "is_managed_location"})


def check_keys(options: Mapping[str, str], allowed: Iterable[str], what: str,
               extra: Iterable[str] = ()) -> None:
    """Refuse option keys that are neither in ``allowed`` nor storage options.

    Raises:
        InvalidInputError: naming the unknown keys, the closest valid spelling and every valid key.
    """
    valid = {k.lower() for k in allowed} | {k.lower() for k in extra}
    unknown = [k for k in options if k.lower() not in valid and k.lower() not in STORAGE_KEYS
               and not k.lower().startswith("storage.")
               and not (what == "write" and k.lower().endswith((FIXED_SIZE_SUFFIX, BLOB_ENCODING_SUFFIX)))]
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key.lower(), sorted(valid | STORAGE_KEYS), n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise InvalidInputError(f"lance data source: unknown {what} option(s) {', '.join(hints)}; valid {what} "
                            f"options: {', '.join(sorted(valid))}, storage options ({', '.join(sorted(STORAGE_KEYS))}"
                            ", or any key prefixed 'storage.')")


def dataset_uri(raw: str) -> str:
    """A dataset location as ``lance_format`` opens it.

    Spark's catalog hands Hadoop paths (``file:/tmp/x``, percent-escaped) and Spark users
    write ``s3a://``; both name what ``/tmp/x`` and ``s3://`` name.
    """
    text = raw.strip()
    low = text.lower()
    if low.startswith("file:"):
        rest = text[len("file:"):]
        if rest.startswith("//"):
            host, _, path = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise InvalidInputError(f"lance data source: {raw!r} names a remote host; file URIs must be local")
            rest = "/" + path
        return urllib.parse.unquote(rest)
    if low.startswith("s3a://") or low.startswith("s3n://"):
        return "s3://" + text[len("s3a://"):]
    return text


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


def _uri(options: Mapping[str, str], fallback: str | None = None) -> str:
    uri = _get(options, "path") or fallback
    if not uri:
        raise InvalidInputError("lance data source: no dataset URI (use .load(uri) / .save(uri) or "
                                "option('path', uri); a catalog table must be created with CREATE TABLE ... "
                                "USING lance LOCATION '<uri>', see lance_format.spark.tables)")
    return dataset_uri(uri)


def _names(options: Mapping[str, str], key: str) -> tuple[str, ...] | None:
    raw = _get(options, key)
    if raw is None:
        return None
    names = tuple(c.strip() for c in raw.split(",") if c.strip())
    if not names:
        raise InvalidInputError(f"lance data source option {key!r} names nothing")
    return names


def _nearest(options: Mapping[str, str]) -> Mapping[str, Any] | None:
    raw = _get(options, "nearest")
    if raw is None or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise InvalidInputError(f"lance data source: option 'nearest' is not JSON ({exc}): {raw[:80]!r}") from None
    if not isinstance(value, dict) or "column" not in value or "q" not in value:
        raise InvalidInputError("lance data source: option 'nearest' must be a JSON object with at least "
                                f"'column' and 'q' (pylance's nearest= keys), got {raw[:80]!r}")
    return value


def _columns(options: Mapping[str, str]) -> tuple[str, ...] | None:
    meta = _names(options, "metadata_columns") or ()
    bad = [m for m in meta if m not in METADATA_COLUMNS]
    if bad:
        raise InvalidInputError(f"lance data source option 'metadata_columns': {bad} are not metadata columns "
                                f"(valid: {sorted(METADATA_COLUMNS)})")
    columns = _names(options, "columns")
    if columns is None:
        return None if not meta else ("*",) + meta  # "*": every column of the table
    return columns + tuple(m for m in meta if m not in columns)


def _fragment_ids(options: Mapping[str, str]) -> tuple[int, ...] | None:
    names = _names(options, "fragment_ids")
    if names is None:
        return None
    try:
        ids = tuple(int(n) for n in names)
    except ValueError:
        raise InvalidInputError(f"lance data source option 'fragment_ids' must be integers, got "
                                f"{_get(options, 'fragment_ids')!r}") from None
    if any(i < 0 for i in ids):
        raise InvalidInputError(f"lance data source option 'fragment_ids' must not be negative, got {ids}")
    return ids


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
    """Parsed read options (see the module docstring).

    ``columns`` may start with ``"*"`` (every column of the table, then metadata columns).
    """

    uri: str
    version: int | None = None
    tag: str | None = None
    columns: tuple[str, ...] | None = None
    batch_size: int | None = None
    max_rows_per_partition: int = DEFAULT_MAX_ROWS_PER_PARTITION
    storage_options: Mapping[str, str] = field(default_factory=dict)
    filter: str | None = None
    limit: int | None = None
    timestamp: str | None = None
    fragment_ids: tuple[int, ...] | None = None
    #: The ``nearest`` option, decoded (JSON object of pylance's ``nearest=`` keys).
    nearest: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, keys: Iterable[str] = READ_KEYS,
              fallback_uri: str | None = None) -> ReadOptions:
        """Parse Spark's option mapping.

        Args:
            options: The options Spark passed.
            keys: The valid keys (a stream's schema accepts batch and stream keys).
            fallback_uri: The location when no ``path`` option is given (a catalog table's).

        Raises:
            InvalidInputError: an unknown or malformed option (named in the message).
        """
        if _get(options, "filter_pushdown") is not None:
            raise InvalidInputError(
                "lance data source option 'filter_pushdown' was removed: PySpark reuses a reader planned "
                "with pushed filters for later queries of the same DataFrame, which then miss rows. Spark "
                "evaluates df.filter(...) itself; use option('filter', '<Lance SQL>') to filter inside the scan")
        catalog = _get(options, "provider") is not None  # CREATE TABLE: table properties come along
        if not catalog:
            check_keys(options, keys, "read")
        version = _int(options, "version", None)
        tag = _get(options, "tag") or None
        timestamp = _get(options, "timestamp") or None
        given = [k for k, v in (("version", version), ("tag", tag), ("timestamp", timestamp)) if v is not None]
        if len(given) > 1:
            raise InvalidInputError(f"lance data source: give one of 'version', 'tag' or 'timestamp', not {given}")
        return cls(_uri(options, fallback_uri), version, tag, _columns(options),
                   _int(options, "batch_size", None),
                   _int(options, "max_rows_per_partition", DEFAULT_MAX_ROWS_PER_PARTITION)
                   or DEFAULT_MAX_ROWS_PER_PARTITION,
                   storage_options(options), _get(options, "filter") or None, _int(options, "limit", None),
                   timestamp, _fragment_ids(options), _nearest(options))


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
    def parse(cls, options: Mapping[str, str], *, fallback_uri: str | None = None) -> StreamReadOptions:
        """Parse Spark's option mapping (``fallback_uri``: a catalog table's location).

        Raises:
            InvalidInputError: a malformed option, or a batch-only one (``version``, ``limit``...).
        """
        batch_only = [k for k in ("version", "tag", "timestamp", "limit", "fragment_ids")
                      if _get(options, k) is not None]
        if batch_only:
            raise InvalidInputError(f"lance streaming source: option(s) {batch_only} apply to batch reads only; "
                                    "a stream starts at 'starting_version' (or with a snapshot of the latest)")
        read = ReadOptions.parse(options, keys=STREAM_READ_KEYS, fallback_uri=fallback_uri)
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
    #: Top-level array columns stored as fixed-size lists of this size (new datasets).
    fixed_sizes: Mapping[str, int] = field(default_factory=dict)
    #: Binary columns stored as blobs (``<column>.lance.encoding = blob``).
    blob_columns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str], *, overwrite: bool,
              fallback_uri: str | None = None) -> WriteOptions:
        """Parse Spark's option mapping; ``overwrite`` is Spark's save mode flag.

        Args:
            options: The options Spark passed.
            overwrite: Spark's save mode is overwrite.
            fallback_uri: The location when no ``path`` option is given (a catalog table's).

        Raises:
            InvalidInputError: an unknown or malformed option (named in the message).
        """
        check_keys(options, STREAM_WRITE_KEYS, "write")
        mode_opt = (_get(options, "mode") or "").strip().lower()
        mode_opt = {"error": "create", "errorifexists": "create"}.get(mode_opt, mode_opt)
        if mode_opt not in ("", "append", "overwrite", "create", "ignore"):
            raise InvalidInputError(f"lance data source option 'mode' must be append, overwrite, create (error, "
                                    f"errorifexists) or ignore, got {mode_opt!r}")
        if overwrite and mode_opt in ("append", "create", "ignore"):
            raise InvalidInputError(f"lance data source: option mode={mode_opt!r} contradicts save mode "
                                    "'overwrite'")
        mode: WriteMode = "append"
        if overwrite:
            mode = "overwrite"
        elif mode_opt == "create":
            mode = "create"
        elif mode_opt == "ignore":
            mode = "ignore"
        props = _json_object(options, "transaction_properties")
        message = _get(options, "commit_message")
        if message is not None:
            props[_transaction.COMMIT_MESSAGE_KEY] = message
        stream_id = _get(options, "stream_id") or _get(options, "checkpointLocation")
        sizes = {}
        for key in options:
            if key.lower().endswith(FIXED_SIZE_SUFFIX):
                sizes[key[:-len(FIXED_SIZE_SUFFIX)]] = _int(options, key, None) or 0
        blobs = []
        for key, value in options.items():
            if key.lower().endswith(BLOB_ENCODING_SUFFIX):
                if str(value).strip().lower() != "blob":
                    raise InvalidInputError(f"lance data source option {key!r}: the only encoding is 'blob', "
                                            f"got {value!r}")
                blobs.append(key[:-len(BLOB_ENCODING_SUFFIX)])
        return cls(_uri(options, fallback_uri), mode, _get(options, "data_storage_version"),
                   _int(options, "max_rows_per_file", DEFAULT_MAX_ROWS_PER_FILE) or DEFAULT_MAX_ROWS_PER_FILE,
                   _bool(options, "enable_stable_row_ids"), props, storage_options(options), stream_id, sizes,
                   tuple(blobs))


__all__ = ["CATALOG_KEYS", "DEFAULT_MAX_ROWS_PER_PARTITION", "METADATA_COLUMNS", "READ_KEYS", "STORAGE_KEYS",
           "STREAM_READ_KEYS", "STREAM_WRITE_KEYS", "WRITE_KEYS", "ReadOptions", "StreamReadOptions", "WriteOptions",
           "check_keys", "dataset_uri", "storage_options"]
