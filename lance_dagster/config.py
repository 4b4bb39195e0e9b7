"""Settings shared by the IO manager and the resource, write options, and asset key → dataset URI."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from lance_format.errors import InvalidInputError

from .commit_options import CommitOptions, check_properties, check_writer_options
from .masking import env_resolved_options

#: ``overwrite`` replaces the table (or, for a partitioned asset, exactly its partitions); ``append`` adds
#: rows; ``merge`` upserts on keys; ``error`` / ``ignore`` refuse / skip when the target already has rows.
WriteMode = Literal["overwrite", "append", "merge", "error", "ignore"]
WRITE_MODES: tuple[str, ...] = get_args(WriteMode)

#: ``strict`` refuses a schema change (columns or types); ``merge`` adds new columns (old rows read them
#: as null) and widens columns by safe promotion (:mod:`lance_dagster.schema_types`);
#: ``overwrite`` replaces the schema (only with write mode ``overwrite`` of a whole table).
SchemaMode = Literal["strict", "merge", "overwrite"]
SCHEMA_MODES: tuple[str, ...] = get_args(SchemaMode)

# Metadata keys (definition metadata of an asset / output, overridable by run-time output metadata).
MODE_KEY = "mode"
SCHEMA_MODE_KEY = "schema_mode"
PARTITION_EXPR_KEY = "partition_expr"
MERGE_ON_KEY = "merge_on"
WHEN_MATCHED_UPDATE_KEY = "when_matched_update"
WHEN_NOT_MATCHED_INSERT_KEY = "when_not_matched_insert"
WHEN_NOT_MATCHED_BY_SOURCE_DELETE_KEY = "when_not_matched_by_source_delete"

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


def raw_value(value: Any) -> Any:
    """The plain value of a metadata entry (Dagster may wrap it in a ``MetadataValue``)."""
    return getattr(value, "value", value)


def parse_mode(value: Any, *, where: str) -> WriteMode:
    """Validate a write mode taken from config or metadata.

    Args:
        value: the raw value (a str, or a Dagster ``TextMetadataValue``).
        where: what the value came from, for the error message.

    Raises:
        InvalidInputError: if the value is not one of :data:`WRITE_MODES`.
    """
    return cast(WriteMode, _one_of(value, WRITE_MODES, what="write mode", where=where))


def parse_schema_mode(value: Any, *, where: str) -> SchemaMode:
    """Validate a schema mode taken from config or metadata.

    Raises:
        InvalidInputError: if the value is not one of :data:`SCHEMA_MODES`.
    """
    return cast(SchemaMode, _one_of(value, SCHEMA_MODES, what="schema mode", where=where))


def _one_of(value: Any, options: tuple[str, ...], *, what: str, where: str) -> str:
    raw = raw_value(value)
    if not isinstance(raw, str) or raw not in options:
        raise InvalidInputError(f"{where}: {what} must be one of {options}, got {raw!r}")
    return raw


def namespace_parts(namespace: str | Sequence[str] | None, *, where: str) -> tuple[str, ...]:
    """A namespace (``"team_a"``, ``"team_a/prod"`` or a list) as path components.

    Raises:
        InvalidInputError: an empty component, or one that would leave the root.
    """
    if namespace is None:
        return ()
    raw = [namespace] if isinstance(namespace, str) else list(namespace)
    parts = tuple(q for p in raw for q in str(p).split("/") if q)
    for part in parts:
        if part in (".", "..") or "\\" in part:
            raise InvalidInputError(f"{where}: invalid namespace component {part!r} in {namespace!r}")
    return parts


def dataset_uri(root_uri: str, path: Sequence[str] | str) -> str:
    """Return the URI of the dataset for an asset key path (or a plain dataset name).

    ``["sales", "orders"]`` under root ``s3://bucket/lake`` becomes
    ``s3://bucket/lake/sales/orders.lance``. A name that already ends in ``.lance`` keeps it.

    Raises:
        InvalidInputError: if a path component is empty or tries to leave the root.
    """
    parts = ([p for p in path.split("/") if p] or [path]) if isinstance(path, str) else list(path)
    for part in parts:
        if not part or part in (".", "..") or "\\" in part:
            raise InvalidInputError(f"invalid dataset path component {part!r} in {path!r}")
    rel = "/".join(parts)
    if not rel.endswith(DATASET_SUFFIX):
        rel += DATASET_SUFFIX
    return f"{root_uri.rstrip('/')}/{rel}"


@dataclass(frozen=True)
class MergeOptions:
    """How ``mode="merge"`` upserts (the clauses of pylance's ``merge_insert``).

    Attributes:
        on: key columns; ``None`` uses the table's unenforced primary key.
        when_matched_update: update target rows whose keys match a source row.
        when_not_matched_insert: insert source rows whose keys match no target row.
        when_not_matched_by_source_delete: delete target rows (of the partition, when
            partitioned) whose keys match no source row.
    """

    on: tuple[str, ...] | None = None
    when_matched_update: bool = True
    when_not_matched_insert: bool = True
    when_not_matched_by_source_delete: bool = False


@dataclass(frozen=True)
class WriteOptions:
    """Everything that decides how one output is written.

    Attributes:
        mode: the write mode.
        schema_mode: what to do when the data's columns differ from the table's.
        merge: upsert options (used by ``mode="merge"`` only).
    """

    mode: WriteMode = "overwrite"
    schema_mode: SchemaMode = "strict"
    merge: MergeOptions = field(default_factory=MergeOptions)


def _bool(value: Any, *, key: str, where: str) -> bool:
    raw = raw_value(value)
    if not isinstance(raw, bool):
        raise InvalidInputError(f"{where}: metadata {key!r} must be true or false, got {raw!r}")
    return raw


def _merge_on(value: Any, *, where: str) -> tuple[str, ...]:
    raw = raw_value(value)
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, Sequence) or not raw or not all(isinstance(c, str) and c for c in raw):
        raise InvalidInputError(f"{where}: metadata {MERGE_ON_KEY!r} must be a column name or a non-empty "
                                f"list of names, got {raw!r}")
    return tuple(raw)


def resolve_write_options(
    default: WriteOptions, layers: Sequence[Mapping[str, Any] | None], *, where: str
) -> WriteOptions:
    """Apply metadata layers (lowest precedence first) over ``default``.

    Each layer may set :data:`MODE_KEY`, :data:`SCHEMA_MODE_KEY`, :data:`MERGE_ON_KEY` and the
    three ``when_*`` switches; a later layer (run-time output metadata) overrides an earlier one
    (definition metadata).

    Raises:
        InvalidInputError: naming the key and the bad value.
    """
    mode, schema_mode, merge = default.mode, default.schema_mode, default.merge
    m_on, m_upd, m_ins, m_del = merge.on, merge.when_matched_update, merge.when_not_matched_insert, \
        merge.when_not_matched_by_source_delete
    for layer in layers:
        if not layer:
            continue
        if layer.get(MODE_KEY) is not None:
            mode = parse_mode(layer[MODE_KEY], where=f"{where} metadata {MODE_KEY!r}")
        if layer.get(SCHEMA_MODE_KEY) is not None:
            schema_mode = parse_schema_mode(layer[SCHEMA_MODE_KEY], where=f"{where} metadata {SCHEMA_MODE_KEY!r}")
        if layer.get(MERGE_ON_KEY) is not None:
            m_on = _merge_on(layer[MERGE_ON_KEY], where=where)
        if layer.get(WHEN_MATCHED_UPDATE_KEY) is not None:
            m_upd = _bool(layer[WHEN_MATCHED_UPDATE_KEY], key=WHEN_MATCHED_UPDATE_KEY, where=where)
        if layer.get(WHEN_NOT_MATCHED_INSERT_KEY) is not None:
            m_ins = _bool(layer[WHEN_NOT_MATCHED_INSERT_KEY], key=WHEN_NOT_MATCHED_INSERT_KEY, where=where)
        if layer.get(WHEN_NOT_MATCHED_BY_SOURCE_DELETE_KEY) is not None:
            m_del = _bool(layer[WHEN_NOT_MATCHED_BY_SOURCE_DELETE_KEY],
                          key=WHEN_NOT_MATCHED_BY_SOURCE_DELETE_KEY, where=where)
    if schema_mode == "overwrite" and mode != "overwrite":
        raise InvalidInputError(f"{where}: schema_mode 'overwrite' needs write mode 'overwrite', got {mode!r}")
    return WriteOptions(mode, schema_mode, MergeOptions(m_on, m_upd, m_ins, m_del))


@dataclass(frozen=True)
class LanceSettings:
    """Resolved storage settings used by the write and read plumbing.

    Attributes:
        root_uri: folder or object-store prefix that holds one dataset per asset.
        storage_options: passed to ``lance_format`` (credentials, endpoints); ``dg.EnvVar`` values
            are read from the environment when used (:attr:`options`).
        default_mode: write mode used when neither definition nor output metadata names one.
        data_storage_version: Lance file version for new datasets (``None``: the library default).
        default_schema_mode: schema mode used when no metadata names one.
        namespace: path components between the root and every dataset, so code locations
            sharing a root keep apart (as dagster-iceberg's ``namespace`` and dagster-deltalake's
            ``schema``).
        commit_properties: extra transaction properties of every commit.
        writer_options: default writer options (see :mod:`lance_dagster.commit_options`).
    """

    root_uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)  # credentials: never shown
    default_mode: WriteMode = "overwrite"
    data_storage_version: str | None = None
    default_schema_mode: SchemaMode = "strict"
    namespace: tuple[str, ...] = ()
    commit_properties: Mapping[str, str] = field(default_factory=dict)
    writer_options: Mapping[str, Any] = field(default_factory=dict)

    def uri_for(self, path: Sequence[str] | str) -> str:
        """Return the dataset URI for an asset key path or dataset name (under the namespace)."""
        parts = ([p for p in path.split("/") if p] or [path]) if isinstance(path, str) else list(path)
        return dataset_uri(self.root_uri, [*self.namespace, *parts])

    @property
    def default_commit_options(self) -> CommitOptions:
        """Commit properties and writer options before any metadata applies."""
        return CommitOptions(dict(self.commit_properties), dict(self.writer_options))

    @property
    def options(self) -> dict[str, str] | None:
        """Storage options as ``lance_format`` takes them (``None`` when empty).

        ``dg.EnvVar`` values are read from the environment here, at use: inside a run Dagster has
        resolved a resource's ``EnvVar`` already, but objects used outside runs (a sensor's bound
        resource, ``build_lance_asset_checks(storage_options=...)``) still hold the reference.

        Raises:
            InvalidInputError: an ``EnvVar``'s variable is not set.
        """
        return env_resolved_options(self.storage_options, where="LanceSettings") or None

    @property
    def default_write_options(self) -> WriteOptions:
        """The write options before any metadata applies."""
        return WriteOptions(self.default_mode, self.default_schema_mode)


def make_settings(
    root_uri: str | None,
    storage_options: Mapping[str, str] | None,
    default_mode: str,
    data_storage_version: str | None,
    default_schema_mode: str = "strict",
    *,
    namespace: str | Sequence[str] | None = None,
    commit_properties: Mapping[str, str] | None = None,
    writer_options: Mapping[str, Any] | None = None,
) -> LanceSettings:
    """Build :class:`LanceSettings` from raw config values, validating them.

    Raises:
        InvalidInputError: a bad mode, namespace, commit property or writer option (named), or a
            ``memory://`` root (each open of a ``memory://`` URI is a new, empty store, as in pylance,
            so nothing one step writes would be there for the next).
    """
    if root_uri is not None and root_uri.strip().lower().startswith("memory://"):
        raise InvalidInputError(f"root_uri {root_uri!r}: memory:// datasets live only in the handle that wrote "
                                "them (every open of a memory:// URI starts an empty store, as in pylance); "
                                "use a local folder or an object store")
    return LanceSettings(
        root_uri=root_uri or default_root_uri(),
        storage_options=dict(storage_options or {}),
        default_mode=parse_mode(default_mode, where="config write_mode"),
        data_storage_version=data_storage_version or None,
        default_schema_mode=parse_schema_mode(default_schema_mode, where="config schema_mode"),
        namespace=namespace_parts(namespace, where="config namespace"),
        commit_properties=check_properties(dict(commit_properties or {}), where="config"),
        writer_options=check_writer_options(dict(writer_options or {}), where="config"),
    )
