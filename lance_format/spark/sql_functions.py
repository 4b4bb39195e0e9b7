"""Lance maintenance and metadata as SQL table functions (PySpark Python UDTFs).

:func:`lance_format.spark.register` registers them with the data source, so after it::

    SELECT * FROM lance_optimize('/data/events.lance', target_rows_per_fragment => 1048576)
    SELECT * FROM lance_vacuum('/data/events.lance', older_than => INTERVAL 7 DAYS)
    SELECT * FROM lance_create_index('/data/events.lance', 'id', index_type => 'BTREE')
    SELECT * FROM lance_versions('/data/events.lance')

Each returns typed rows, with lance-spark's procedure columns first:

* ``lance_optimize(uri, **compaction options)`` → ``fragments_removed, fragments_added,
  files_removed, files_added`` (bigint) and ``version`` (the version after it). Options are
  pylance's ``compact_files`` keywords.
* ``lance_vacuum(uri, older_than, retain_versions, delete_unverified,
  error_if_tagged_old_versions, dry_run, commit_grace)`` (``cleanup_old_versions``'s keywords;
  ``older_than`` and ``commit_grace`` an interval or seconds) and lance-spark's ``before_version`` /
  ``before_timestamp_millis`` → ``bytes_removed, old_versions, data_files_removed,
  deletion_files_removed, transaction_files_removed, index_files_removed``.
* ``lance_create_index(uri, column, index_type => 'BTREE', name => ..., replace => true)``
  → ``fragments_indexed`` (bigint), ``index_name`` (string), ``version``.
* ``lance_versions(uri)`` → ``version`` (bigint), ``timestamp`` (timestamp),
  ``operation`` (string), ``total_rows`` (bigint), ``tags`` (array<string>).

Every function also takes ``storage_options => '<JSON object>'``. A table function runs in
one Spark task, so the operation runs in that executor's Python worker with local threads;
the Python API (:func:`lance_format.spark.compact_files`, ...) spreads the work over the
executors instead. Spark's SQL parser has no ``OPTIMIZE`` / ``VACUUM`` statements for
Python data sources (lance-spark adds them with a JVM SQL extension), hence functions.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from lance_format.dataset import LanceDataset
from lance_format.errors import InvalidInputError
from lance_format.spark.options import dataset_uri

#: Registered name → (class, Spark return type).
FUNCTIONS: dict[str, tuple[type, str]] = {}


def _plain(value: Any) -> Any:
    # SQL literals arrive as Decimal (1.5) and int; the Lance API wants float and int.
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _open(uri: Any, options: dict[str, Any]) -> LanceDataset:
    if not isinstance(uri, str) or not uri:
        raise InvalidInputError(f"lance table function: the first argument must be a dataset URI, got {uri!r}")
    raw = options.pop("storage_options", None)
    try:
        storage = json.loads(raw) if raw else None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"lance table function: storage_options is not a JSON object: {exc}") from None
    if storage is not None and not isinstance(storage, dict):
        raise InvalidInputError("lance table function: storage_options must be a JSON object")
    return LanceDataset(dataset_uri(uri), storage_options=storage)


def _function(name: str, return_type: str) -> Any:
    def register(cls: type) -> type:
        FUNCTIONS[name] = (cls, return_type)
        return cls

    return register


@_function("lance_optimize", "fragments_removed bigint, fragments_added bigint, files_removed bigint, "
                             "files_added bigint, version bigint")
class LanceOptimize:
    """``lance_optimize(uri, **options)``: compact the latest version (see the module docstring)."""

    def eval(self, uri: str, **options: Any) -> Iterator[tuple[int, ...]]:
        """Compact and yield one row of metrics."""
        ds = _open(uri, options)
        metrics = ds.optimize.compact_files(**{k: _plain(v) for k, v in options.items()})
        yield (metrics.fragments_removed, metrics.fragments_added, metrics.files_removed, metrics.files_added,
               ds.checkout_latest().version)


def _older_than(value: Any) -> dt.timedelta | None:
    if value is None or isinstance(value, dt.timedelta):
        return value
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return dt.timedelta(seconds=float(value))
    raise InvalidInputError(f"lance_vacuum: older_than must be an interval or seconds, got {value!r}")


@_function("lance_vacuum", "bytes_removed bigint, old_versions bigint, data_files_removed bigint, "
                           "deletion_files_removed bigint, transaction_files_removed bigint, "
                           "index_files_removed bigint")
class LanceVacuum:
    """``lance_vacuum(uri, ...)``: remove old versions (see the module docstring)."""

    def eval(self, uri: str, **options: Any) -> Iterator[tuple[int, ...]]:
        """Clean up and yield one row of statistics."""
        ds = _open(uri, options)
        older_than = _older_than(options.pop("older_than", None))
        retain = options.pop("retain_versions", None)
        before_version = options.pop("before_version", None)
        before_ms = options.pop("before_timestamp_millis", None)
        if before_version is not None:  # lance-spark: versions below it go
            retain = max(1, ds.version - int(before_version) + 1)
            older_than = older_than if older_than is not None else dt.timedelta(0)
        if before_ms is not None:
            when = dt.datetime.fromtimestamp(int(before_ms) / 1000, tz=dt.UTC)
            older_than = max(dt.timedelta(0), dt.datetime.now(tz=dt.UTC) - when)
        delete_unverified = bool(options.pop("delete_unverified", False))
        error_if_tagged = bool(options.pop("error_if_tagged_old_versions", True))
        dry_run = bool(options.pop("dry_run", False))
        grace = _older_than(options.pop("commit_grace", None))
        if options:
            raise InvalidInputError(f"lance_vacuum: unknown argument(s) {sorted(options)}")
        stats = ds.cleanup_old_versions(older_than, None if retain is None else int(retain),
                                        delete_unverified=delete_unverified,
                                        error_if_tagged_old_versions=error_if_tagged, dry_run=dry_run,
                                        commit_grace=grace)
        yield (stats.bytes_removed, stats.old_versions, stats.data_files_removed, stats.deletion_files_removed,
               stats.transaction_files_removed, stats.index_files_removed)


@_function("lance_create_index", "fragments_indexed bigint, index_name string, version bigint")
class LanceCreateIndex:
    """``lance_create_index(uri, column, index_type => 'BTREE', name => ..., replace => ...)``."""

    def eval(self, uri: str, column: str, **options: Any) -> Iterator[tuple[Any, ...]]:
        """Build the scalar index and yield what it covers."""
        ds = _open(uri, options)
        index_type = str(options.pop("index_type", "BTREE")).upper()  # the registry refuses unknown kinds
        done = ds.create_scalar_index(column, index_type, **options)
        name = options.get("name") or f"{column}_idx"
        info = next(i for i in done.list_indices() if i.name == name)
        yield (len(info.fragment_ids), info.name, done.version)


@_function("lance_versions", "version bigint, timestamp timestamp, operation string, total_rows bigint, "
                             "tags array<string>")
class LanceVersions:
    """``lance_versions(uri)``: every version with its time, operation, row count and tags."""

    def eval(self, uri: str, **options: Any) -> Iterator[tuple[Any, ...]]:
        """Yield one row per version, oldest first."""
        ds = _open(uri, options)
        tags: dict[int, list[str]] = {}
        for tag, info in ds.tags.list().items():
            tags.setdefault(info.version, []).append(tag)
        for v in ds.versions():
            rows = v.get("metadata", {}).get("total_rows")
            yield (v["version"], v["timestamp"], v.get("operation"), None if rows is None else int(rows),
                   sorted(tags.get(v["version"], [])))


def register_functions(spark: Any) -> None:
    """Register every Lance table function with ``spark`` (classic or Connect)."""
    from pyspark.sql.functions import udtf

    for name, (cls, return_type) in FUNCTIONS.items():
        spark.udtf.register(name, udtf(cls, returnType=return_type))


__all__ = ["FUNCTIONS", "LanceCreateIndex", "LanceOptimize", "LanceVacuum", "LanceVersions", "register_functions"]
