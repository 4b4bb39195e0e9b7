"""``LanceIOManager``: stores each asset as a Lance dataset, one commit per materialization."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

import pyarrow as pa
from dagster import (
    ConfigurableIOManagerFactory,
    DagsterInvariantViolationError,
    DataVersion,
    InitResourceContext,
    InputContext,
    IOManager,
    MetadataValue,
    OutputContext,
)
from pydantic import Field

from lance_format.errors import DatasetNotFoundError, InvalidInputError, VersionNotFoundError

from .commit_options import LanceWriterOptions, resolve_commit_options
from .config import LanceSettings, SchemaMode, WriteMode, make_settings, raw_value, resolve_write_options
from .handlers import FrameHandler, default_handlers, handler_for_type, handler_for_value
from .lineage import transaction_properties
from .masking import MaskedCredentials, env_resolved
from .metadata import input_versions_metadata, load_metadata, write_metadata
from .partitions import PartitionSlice, build_slice, partition_expr_of
from .reader import ArrowSource, ReadSpec, declared_schema, open_dataset
from .writer import commit_arrow

#: Extra materialization metadata written by this module (besides lance_dagster.metadata's keys).
PARTITION_FILTER = "lance/partition_filter"
ROWS_DELETED = "lance/rows_deleted"
SKIPPED = "lance/skipped"
SCHEMA_MODE = "lance/schema_mode"
#: Output metadata naming an op output's dataset, and a prefix in front of it.
TABLE_KEY = "table"
KEY_PREFIX_KEY = "key_prefix"


class LanceIOManager(MaskedCredentials, ConfigurableIOManagerFactory):  # type: ignore[type-arg]
    """IO manager that stores every asset as a Lance dataset under ``root_uri``.

    The dataset of asset ``["a", "b"]`` is ``{root_uri}/a/b.lance``; an op output's is
    ``{root_uri}/<op>/<output>.lance`` or the ``Out(metadata={"table": ...})`` name, the same in
    every run (:func:`op_output_path`). Outputs may be ``pyarrow.Table``
    / ``RecordBatchReader``, ``pandas.DataFrame`` or ``polars.DataFrame`` / ``LazyFrame``; inputs are
    loaded as whatever the parameter is annotated with (``pyarrow.Table`` when untyped), including
    ``lance_format.LanceDataset`` for a lazy handle pinned to the version read.

    Per-asset behaviour comes from definition metadata, overridden at run time by output metadata
    with the same key (``Output(df, metadata=...)`` or ``context.add_output_metadata``):

    * ``mode``: ``overwrite`` (default), ``append``, ``merge`` (upsert on ``merge_on`` keys, with
      ``when_matched_update`` / ``when_not_matched_insert`` / ``when_not_matched_by_source_delete``),
      ``error`` or ``ignore`` (refuse / skip when the target already has rows);
    * ``schema_mode``: ``strict`` (default: same columns and types, anything else refused),
      ``merge`` (add new columns and struct fields, widen columns by safe promotion such as
      int32→int64) or ``overwrite``;
    * ``partition_expr`` (required for partitioned assets): the column holding the partition, or a
      dict of dimension -> column. A partition materialization replaces exactly that partition's
      rows in one commit; a partitioned load reads only its partitions' rows.

    ``AssetIn(metadata={"version": 3})`` or ``{"tag": "gold"}`` pins the version read,
    ``{"columns": [...]}`` selects columns, ``{"filter": "x > 0"}`` filters rows. The version
    actually read is recorded on the LOADED_INPUT event and as ``lance/input_version/<asset>`` on the
    consumer's materialization. Dagster offers an IO manager no public hook to set the input data
    version it stores as provenance (``dagster/input_data_version/<asset>``), which is the upstream's
    latest data version; for a pinned read the recorded pin is the authoritative one.
    Subclass and override :meth:`frame_handlers` to support another frame library.
    """

    root_uri: str | None = Field(
        default=None,
        description="Folder or object-store URI holding the datasets (default: a local folder under "
        "$DAGSTER_HOME/storage, else ./lance_storage).",
    )
    storage_options: dict[str, str] = Field(
        # repr=False: credentials must never show in reprs, logs or errors (issue 14 item 5).
        default_factory=dict, repr=False,
        description="Storage options passed to lance_format (credentials, endpoint).",
    )
    write_mode: WriteMode = Field(
        default="overwrite",
        description="Write mode when an asset's metadata names none: overwrite, append, merge, error, ignore.",
    )
    schema_mode: SchemaMode = Field(
        default="strict", description="Schema mode when an asset's metadata names none: strict, merge, overwrite."
    )
    data_storage_version: str | None = Field(
        default=None, description="Lance data storage (file) version for new datasets: '2.0', '2.1' or '2.2' "
        "(default 2.2, as pylance)."
    )
    namespace: str | None = Field(
        default=None, description="Path under root_uri holding every dataset ('team_a' or 'team_a/prod'), so code "
        "locations sharing a root keep apart (dagster-iceberg's namespace, dagster-deltalake's schema).")
    commit_properties: dict[str, str] = Field(
        default_factory=dict, description="Extra Lance transaction properties of every commit (output metadata "
        "'commit_properties' adds to them; dagster/* keys are the lineage's).")
    writer_options: LanceWriterOptions = Field(
        default_factory=LanceWriterOptions, description="How new data files are cut (output metadata "
        "'writer_options' overrides per key).")

    @classmethod
    def frame_handlers(cls) -> Sequence[FrameHandler]:
        """Frame handlers tried in order for outputs and inputs."""
        return default_handlers()

    def settings(self) -> LanceSettings:
        """The resolved storage settings (``dg.EnvVar`` values read from the environment)."""
        return make_settings(env_resolved(self.root_uri, where="LanceIOManager root_uri"), self.storage_options,
                             self.write_mode, self.data_storage_version, self.schema_mode,
                             namespace=self.namespace, commit_properties=self.commit_properties,
                             writer_options=self.writer_options.as_dict())

    def create_io_manager(self, context: InitResourceContext) -> LanceStorageIOManager:
        """Build the per-run IO manager."""
        return LanceStorageIOManager(self.settings(), self.frame_handlers())


def _key_path(context: OutputContext | InputContext) -> list[str]:
    if context.has_asset_key:
        return list(context.asset_key.path)
    if isinstance(context, InputContext):
        if context.upstream_output is None:
            raise InvalidInputError(f"{_describe(context)}: no upstream output to load (LanceIOManager loads "
                                    "asset and op outputs only)")
        return op_output_path(context.upstream_output)
    return op_output_path(context)


def op_output_path(context: OutputContext) -> list[str]:
    """The dataset path of an op output: stable across runs, so append, merge and ignore act on one table.

    ``Out(metadata={"table": "a/b"})`` names it; otherwise it is ``<op>/<output>`` (the op's
    node path inside graphs, without a dynamic mapping key: mapped copies write to one table).
    ``Out(metadata={"key_prefix": ...})`` (a string or a list) goes in front, as an asset's
    ``key_prefix`` does. Like dagster-deltalake's and dagster-iceberg's table per output, and
    unlike the run-scoped paths of Dagster's filesystem IO manager.

    Raises:
        InvalidInputError: ``table`` or ``key_prefix`` is not a string (or list of strings).
    """
    meta = context.definition_metadata or {}
    where = f"output {context.name!r}"
    table = raw_value(meta.get(TABLE_KEY))
    if table is not None:
        if not isinstance(table, str) or not table.strip("/"):
            raise InvalidInputError(f"{where}: metadata {TABLE_KEY!r} must be a dataset name or 'a/b' path, "
                                    f"got {table!r}")
        path = [p for p in table.split("/") if p]
    else:
        node = context.step_key if context.step_key else context.op_def.name
        path = [*re.sub(r"\[.*\]$", "", node).split("."), context.name]
    return _prefix(meta.get(KEY_PREFIX_KEY), where) + path


def _prefix(value: Any, where: str) -> list[str]:
    raw = raw_value(value)
    if raw is None:
        return []
    parts = [raw] if isinstance(raw, str) else raw
    if not isinstance(parts, list | tuple) or not all(isinstance(p, str) and p for p in parts):
        raise InvalidInputError(f"{where}: metadata {KEY_PREFIX_KEY!r} must be a string or a list of strings, "
                                f"got {raw!r}")
    return [q for p in parts for q in p.split("/") if q]


def _describe(context: OutputContext | InputContext) -> str:
    if context.has_asset_key:
        return f"asset {context.asset_key.to_user_string()!r}"
    return f"output {context.name!r}" if isinstance(context, OutputContext) else "input"


def output_slice(context: OutputContext, where: str) -> PartitionSlice | None:
    """The partition slice a partitioned asset's step writes (``None`` when unpartitioned).

    Raises:
        InvalidInputError: the asset is partitioned but has no usable ``partition_expr``.
    """
    if not context.has_asset_partitions:
        return None
    return build_slice(context.asset_partitions_def, context.asset_partition_keys,
                       partition_expr_of(context.definition_metadata), where=where)


def input_slice(context: InputContext, where: str) -> PartitionSlice | None:
    """The partition slice of the upstream a partitioned load reads (``None``: every row).

    A partition mapping may map to no upstream partition: the first partition of a self-dependent
    asset (``TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)``) reads the day before
    the first one. That is :meth:`PartitionSlice.nothing`, which loads no rows (as Dagster's
    ``DbIOManager`` integrations load an empty table).
    """
    if not context.has_asset_partitions or context.upstream_output is None:
        return None
    if not context.asset_partition_keys:
        return PartitionSlice.nothing()
    return build_slice(context.asset_partitions_def, context.asset_partition_keys,
                       partition_expr_of(context.upstream_output.definition_metadata),
                       where=f"{where} (upstream)")


class LanceStorageIOManager(IOManager):
    """The IO manager instance behind :class:`LanceIOManager` (one per run or step process)."""

    def __init__(self, settings: LanceSettings, handlers: Sequence[FrameHandler]) -> None:
        self.settings = settings
        self.handlers = list(handlers)
        # (run id, step key) -> {upstream asset key: version read}, reported by the step's outputs.
        self._reads: dict[tuple[str, str], dict[str, int]] = {}

    # -- writing ----------------------------------------------------------------------------

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """Write ``obj`` as one Lance commit and attach the materialization metadata.

        Everything that can be refused (options, frame type, partition column, schema) is checked
        before the first data file is written.
        """
        where = _describe(context)
        if obj is None:
            raise InvalidInputError(f"{where}: LanceIOManager cannot store None (annotate the output as "
                                    "Nothing or return a table)")
        layers = [context.definition_metadata, context.output_metadata]
        options = resolve_write_options(self.settings.default_write_options, layers, where=where)
        extra = resolve_commit_options(self.settings.default_commit_options, layers, where=where)
        handler = handler_for_value(self.handlers, obj, where=where)
        part = output_slice(context, where)
        uri = self.settings.uri_for(_key_path(context))
        asset = context.asset_key.to_user_string() if context.has_asset_key else None
        props = transaction_properties(
            run_id=context.run_id,
            asset_key=asset,
            partition_key=_partition_key(context),
            code_version=_code_version(context),
            job_name=context.job_name,
            mode=options.mode,
            op=_op_name(context),
            extra=extra.properties,
        )
        message = f"dagster {options.mode} of {asset or uri} in run {context.run_id}"
        if handler.distributed:
            from .distributed import DistributedHandler, commit_distributed  # imports the engine (pyspark)

            result = commit_distributed(self.settings, uri, cast(DistributedHandler, handler), obj,
                                        mode=options.mode, properties=props, commit_message=message,
                                        schema_mode=options.schema_mode, partition=part, where=where,
                                        merge=options.merge, writer=extra.writer)
        else:
            result = commit_arrow(self.settings, uri, handler.to_arrow(obj), mode=options.mode, properties=props,
                                  commit_message=message, schema_mode=options.schema_mode, partition=part,
                                  merge=options.merge, where=where, writer=extra.writer)
        metadata = write_metadata(result)
        metadata[SCHEMA_MODE] = MetadataValue.text(options.schema_mode)
        if result.predicate is not None:
            metadata[PARTITION_FILTER] = MetadataValue.text(result.predicate)
        if result.rows_deleted is not None:
            metadata[ROWS_DELETED] = MetadataValue.int(result.rows_deleted)
        if result.skipped:
            metadata[SKIPPED] = MetadataValue.bool(True)
        metadata.update(input_versions_metadata(self._inputs_of(context)))
        context.add_output_metadata(metadata)
        if context.has_asset_key:
            _set_data_version(context, DataVersion(str(result.version)))
        verb = "kept (mode ignore)" if result.skipped else "commit"
        context.log.info(f"Lance {verb}: {uri} version {result.version} ({options.mode})")

    def _inputs_of(self, context: OutputContext) -> dict[str, int]:
        try:
            reads = self._reads.get((context.run_id, context.step_key), {})
        except DagsterInvariantViolationError:  # build_output_context() without a step
            return {}
        if not reads or not context.has_asset_key:
            return dict(reads)
        try:
            parents = {dep.asset_key.to_user_string() for dep in context.asset_spec.deps}
        except DagsterInvariantViolationError:  # a hand-built context carries no spec: report every read
            return dict(reads)
        return {k: v for k, v in reads.items() if k in parents}

    # -- reading ----------------------------------------------------------------------------

    def load_input(self, context: InputContext) -> Any:
        """Read the upstream dataset (latest, or the pinned version/tag) as the annotated type.

        A partitioned load reads only the rows of the mapped upstream partitions (the filter is
        pushed down to the Lance scan). The version read is recorded on the LOADED_INPUT event and
        on the consumer's materialization (``lance/input_version/<asset>``).
        """
        where = _describe(context)
        spec = ReadSpec.from_metadata(context.definition_metadata, where=f"{where} input metadata")
        handler = handler_for_type(self.handlers, context.dagster_type.typing_type, where=where)
        part = input_slice(context, where)
        uri = self.settings.uri_for(_key_path(context))
        try:
            ds = open_dataset(self.settings, uri, spec.pin)
        except VersionNotFoundError as exc:
            raise VersionNotFoundError(f"{where}: {uri} has no version {spec.pin!r}: {exc}") from exc
        except DatasetNotFoundError as exc:
            if part is not None and not part.keys:
                return self._load_nothing(context, handler, uri, spec, where)
            raise DatasetNotFoundError(
                f"{where}: no Lance dataset at {uri}; materialize the upstream asset first"
            ) from exc
        source = ArrowSource(ds, spec, part.expression(ds.schema, where=where) if part is not None else None,
                             partition_sql=part.sql(ds.schema, where=where) if part is not None else None,
                             storage_options=self.settings.options)
        value = handler.from_arrow(source, context.dagster_type.typing_type)
        pin = {"version": spec.version, "tag": spec.tag,
               "filter": None if source.row_filter is None else str(source.row_filter)}
        # Dagster 1.13 attaches input metadata to an observation of one upstream partition and fails
        # (CheckError in InputContext.asset_partition_key) when the input spans several, so a
        # multi-partition load reports its version on the consumer's materialization only.
        if not context.has_asset_partitions or len(context.asset_partition_keys) == 1:
            context.add_input_metadata(load_metadata(uri, source.version, int(ds.latest_version), pin))
        if context.has_asset_key:
            self._record_read(context, context.asset_key.to_user_string(), source.version)
        context.log.info(f"Lance read: {uri} version {source.version}"
                         + (f" columns {list(spec.columns)}" if spec.columns else "")
                         + (f" rows where {source.row_filter}" if source.row_filter is not None else ""))
        return value

    def _load_nothing(self, context: InputContext, handler: FrameHandler, uri: str, spec: ReadSpec,
                      where: str) -> Any:
        """No upstream partition of a dataset not written yet: an empty frame of the declared schema.

        The schema is the upstream's ``dagster/column_schema`` definition metadata (no columns when
        it declares none). Nothing was read, so no version is recorded.
        """
        upstream = context.upstream_output
        schema = declared_schema(upstream.definition_metadata if upstream is not None else None,
                                 where=f"{where} (upstream)")
        source = ArrowSource.missing(uri, schema if schema is not None else pa.schema([]), spec)
        context.log.info(f"Lance read: {uri} does not exist yet and no upstream partition is mapped; "
                         f"loading an empty input of the {'declared' if schema is not None else 'empty'} schema")
        return handler.from_arrow(source, context.dagster_type.typing_type)

    def _record_read(self, context: InputContext, asset: str, version: int) -> None:
        try:
            step = context.step_context
        except DagsterInvariantViolationError:  # a bare build_input_context() has no step to report to
            return
        self._reads.setdefault((step.run_id, step.step.key), {})[asset] = version


def _partition_key(context: OutputContext) -> str | None:
    if not context.has_asset_partitions:
        return context.partition_key if context.has_partition_key else None
    keys = context.asset_partition_keys
    if len(keys) == 1:
        return keys[0]
    rng = context.asset_partition_key_range
    return f"{rng.start}...{rng.end}"


def _op_name(context: OutputContext) -> str | None:
    try:
        return str(context.op_def.name)
    except DagsterInvariantViolationError:  # build_output_context() without an op
        return None


def _code_version(context: OutputContext) -> str | None:
    if not context.has_asset_key:
        return context.version
    try:
        return context.asset_spec.code_version
    except DagsterInvariantViolationError:  # contexts built by hand carry no spec
        return None


def _set_data_version(context: OutputContext, version: DataVersion) -> None:
    # Dagster has no public API for an IO manager to give a materialization its data version
    # (Output(data_version=...) belongs to the asset function). It reads a data version cached on the
    # step context before it builds the materialization event, so the IO manager fills that cache
    # through StepExecutionContext.set_data_version.
    try:
        step = context.step_context
    except DagsterInvariantViolationError:  # build_output_context() without a step
        return
    if not step.has_data_version(context.asset_key):
        step.set_data_version(context.asset_key, version)
