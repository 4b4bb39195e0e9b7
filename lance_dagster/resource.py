"""``LanceResource``: direct dataset access for ops and assets that do their own reads and writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetExecutionContext, ConfigurableResource, OpExecutionContext
from pydantic import Field

from lance_format.dataset import LanceDataset
from lance_format.errors import DatasetNotFoundError, InvalidInputError

from .commit_options import (
    COMMIT_PROPERTIES_KEY,
    WRITER_OPTIONS_KEY,
    LanceWriterOptions,
    resolve_commit_options,
)
from .config import (
    MERGE_ON_KEY,
    MODE_KEY,
    SCHEMA_MODE_KEY,
    LanceSettings,
    SchemaMode,
    WriteMode,
    make_settings,
    resolve_write_options,
)
from .handlers import FrameHandler, default_handlers, handler_for_value
from .lineage import VersionRecord, transaction_properties, version_history
from .masking import MaskedCredentials, env_resolved
from .partitions import PartitionSlice, build_slice
from .reader import open_dataset
from .writer import WriteResult, commit_arrow


class LanceResource(MaskedCredentials, ConfigurableResource):  # type: ignore[type-arg]
    """Opens and writes Lance datasets under ``root_uri`` by name.

    ``resource.dataset("events")`` returns a ``lance_format`` dataset; ``resource.write("events",
    table, context=context)`` commits once and records the same lineage properties the IO manager
    does. Turn the result into a Dagster materialization with
    :func:`lance_dagster.materialize_result`. Names map to URIs exactly as the IO manager maps
    asset keys (``"a/b"`` or ``["a", "b"]`` -> ``{root_uri}/a/b.lance``).
    """

    root_uri: str | None = Field(
        default=None,
        description="Folder or object-store URI holding the datasets (default: same as LanceIOManager).",
    )
    storage_options: dict[str, str] = Field(
        # repr=False: credentials must never show in reprs, logs or errors (issue 14 item 5).
        default_factory=dict, repr=False,
        description="Storage options passed to lance_format (credentials, endpoint).",
    )
    write_mode: WriteMode = Field(default="overwrite", description="Default write mode: overwrite, append, merge, "
                                  "error or ignore.")
    schema_mode: SchemaMode = Field(default="strict", description="Default schema mode: strict, merge or overwrite.")
    data_storage_version: str | None = Field(
        default=None, description="Lance data storage (file) version for new datasets."
    )
    namespace: str | None = Field(
        default=None, description="Path under root_uri holding every dataset (same as LanceIOManager's).")
    commit_properties: dict[str, str] = Field(
        default_factory=dict, description="Extra Lance transaction properties of every commit.")
    writer_options: LanceWriterOptions = Field(
        default_factory=LanceWriterOptions, description="How new data files are cut.")

    def settings(self) -> LanceSettings:
        """The resolved storage settings (``dg.EnvVar`` values read from the environment)."""
        return make_settings(env_resolved(self.root_uri, where="LanceResource root_uri"), self.storage_options,
                             self.write_mode, self.data_storage_version, self.schema_mode,
                             namespace=self.namespace, commit_properties=self.commit_properties,
                             writer_options=self.writer_options.as_dict())

    def uri(self, name: str | Sequence[str]) -> str:
        """URI of the dataset called ``name`` (a name, ``"a/b"`` path, or asset key path list)."""
        return self.settings().uri_for(name)

    def exists(self, name: str | Sequence[str]) -> bool:
        """Whether the dataset has at least one version."""
        try:
            self.dataset(name)
        except DatasetNotFoundError:
            return False
        return True

    def dataset(self, name: str | Sequence[str], *, version: int | str | None = None) -> LanceDataset:
        """Open a dataset, at its latest version or a pinned version number / tag.

        Raises:
            lance_format.errors.DatasetNotFoundError: no dataset with that name.
            lance_format.errors.VersionNotFoundError: the version or tag does not exist.
        """
        settings = self.settings()
        return open_dataset(settings, settings.uri_for(name), version)

    def history(self, name: str | Sequence[str], *, limit: int | None = None) -> list[VersionRecord]:
        """The dataset's versions, newest first, with Dagster lineage from transaction properties."""
        return version_history(self.dataset(name), limit=limit)

    def write(
        self,
        name: str | Sequence[str],
        data: Any,
        *,
        mode: str | None = None,
        schema_mode: str | None = None,
        context: AssetExecutionContext | OpExecutionContext | None = None,
        partition_expr: str | Mapping[str, str] | None = None,
        merge_on: Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
        handlers: Sequence[FrameHandler] | None = None,
        writer_options: Mapping[str, Any] | None = None,
    ) -> WriteResult:
        """Write ``data`` (any frame a handler stores) as exactly one Lance commit.

        Args:
            name: dataset name or asset key path.
            data: the rows to write.
            mode: a :data:`~lance_dagster.config.WriteMode` (default: the resource's ``write_mode``).
            schema_mode: a :data:`~lance_dagster.config.SchemaMode` (default: the resource's).
            context: the running op/asset context; its run id, asset key, partition key and code
                version are stored as transaction properties.
            partition_expr: for a partitioned asset's context, the partition column (or dimension ->
                column dict); the write is then confined to the context's partitions, as in the IO
                manager. An ``overwrite`` from a partitioned context without it is refused.
            merge_on: key columns for ``mode="merge"``.
            properties: extra transaction properties (added to the resource's ``commit_properties``).
            commit_message: stored with the commit (default names the run).
            handlers: frame handlers to convert ``data`` (default: every stock handler).
            writer_options: writer options (override the resource's per key).

        Raises:
            InvalidInputError: bad mode, or an overwrite from a partitioned context without
                ``partition_expr``.
        """
        settings = self.settings()
        where = f"LanceResource.write({name!r})"
        layer: dict[str, Any] = {MODE_KEY: mode, SCHEMA_MODE_KEY: schema_mode,
                                 COMMIT_PROPERTIES_KEY: properties, WRITER_OPTIONS_KEY: writer_options}
        if merge_on is not None:
            layer[MERGE_ON_KEY] = list(merge_on)
        options = resolve_write_options(settings.default_write_options, [layer], where=where)
        extra = resolve_commit_options(settings.default_commit_options, [layer], where=where)
        arrow = handler_for_value(handlers or default_handlers(), data, where=where).to_arrow(data)
        part = _slice(context, partition_expr, options.mode, where)
        props = transaction_properties(mode=options.mode, extra=extra.properties, **_lineage(context))
        if commit_message is None and context is not None:
            commit_message = f"dagster {options.mode} of {name} in run {context.run_id}"
        return commit_arrow(
            settings,
            settings.uri_for(name),
            arrow,
            mode=options.mode,
            properties=props,
            commit_message=commit_message,
            schema_mode=options.schema_mode,
            partition=part,
            merge=options.merge,
            where=where,
            writer=extra.writer,
        )


def _slice(context: AssetExecutionContext | OpExecutionContext | None, partition_expr: str | Mapping[str, str] | None,
           mode: str, where: str) -> PartitionSlice | None:
    if context is None or not context.has_partition_key:
        return None
    if partition_expr is None:
        if mode == "overwrite":
            raise InvalidInputError(f"{where}: refusing to overwrite the whole dataset from partition "
                                    f"{context.partition_key!r}; pass partition_expr= to replace only that "
                                    "partition's rows")
        return None
    pdef = context.assets_def.partitions_def if context.has_assets_def else None
    if pdef is None:
        raise InvalidInputError(f"{where}: partition_expr given but the context has no partitions definition")
    return build_slice(pdef, context.partition_keys, partition_expr, where=where)


def _lineage(context: AssetExecutionContext | OpExecutionContext | None) -> dict[str, str | None]:
    if context is None:
        return {"run_id": None, "asset_key": None}
    out: dict[str, str | None] = {
        "run_id": context.run_id,
        "asset_key": None,
        "job_name": context.job_name,
        "partition_key": context.partition_key if context.has_partition_key else None,
        "op": context.op_def.name,
    }
    if not context.has_assets_def or len(context.assets_def.keys) != 1:
        return out  # an op, or a multi-asset step: no single asset to name
    key = next(iter(context.assets_def.keys))
    out["asset_key"] = key.to_user_string()
    out["code_version"] = context.assets_def.code_versions_by_key.get(key)
    return out
