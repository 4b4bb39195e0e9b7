"""``LanceIOManager``: stores each asset as a Lance dataset, one commit per materialization."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import (
    ConfigurableIOManagerFactory,
    DataVersion,
    InitResourceContext,
    InputContext,
    IOManager,
    OutputContext,
)
from pydantic import Field

from lance_format.errors import DatasetNotFoundError, VersionNotFoundError

from .config import LanceSettings, WriteMode, make_settings, parse_mode
from .handlers import FrameHandler, default_handlers, handler_for_type, handler_for_value
from .lineage import PARTITION_KEY, transaction_properties
from .metadata import input_version_key, write_metadata
from .reader import ArrowSource, ReadSpec, open_dataset
from .writer import commit_arrow

MODE_KEY = "mode"


class LanceIOManager(ConfigurableIOManagerFactory):  # type: ignore[type-arg]
    """IO manager that stores every asset as a Lance dataset under ``root_uri``.

    The dataset of asset ``["a", "b"]`` is ``{root_uri}/a/b.lance``. Outputs may be
    ``pyarrow.Table``, ``pyarrow.RecordBatchReader`` or ``pandas.DataFrame``; inputs are loaded
    as whatever the parameter is annotated with (``pyarrow.Table`` when untyped).

    Per-asset behaviour comes from metadata:

    * definition metadata ``{"mode": "append"}`` (or ``"overwrite"``), overridden at run time by
      output metadata with the same key (``Output(df, metadata={"mode": "append"})`` or
      ``context.add_output_metadata``);
    * ``AssetIn(metadata={"version": 3})`` or ``{"tag": "gold"}`` pins the version read,
      ``{"columns": [...]}`` selects columns, ``{"filter": "x > 0"}`` filters rows.

    Subclass and override :meth:`frame_handlers` to support another frame library.
    """

    root_uri: str | None = Field(
        default=None,
        description="Folder or object-store URI holding the datasets (default: a local folder under "
        "$DAGSTER_HOME/storage, else ./lance_storage).",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="Storage options passed to lance_format (credentials, endpoint)."
    )
    write_mode: str = Field(
        default="overwrite", description="Write mode when an asset's metadata names none: overwrite or append."
    )
    data_storage_version: str | None = Field(
        default=None, description="Lance data storage (file) version for new datasets: '2.0', '2.1' or '2.2' (default 2.2, as pylance)."
    )

    @classmethod
    def frame_handlers(cls) -> Sequence[FrameHandler]:
        """Frame handlers tried in order for outputs and inputs."""
        return default_handlers()

    def settings(self) -> LanceSettings:
        """The resolved storage settings."""
        return make_settings(self.root_uri, self.storage_options, self.write_mode, self.data_storage_version)

    def create_io_manager(self, context: InitResourceContext) -> LanceStorageIOManager:
        """Build the per-run IO manager."""
        return LanceStorageIOManager(self.settings(), self.frame_handlers())


def _key_path(context: OutputContext | InputContext) -> list[str]:
    if context.has_asset_key:
        return list(context.asset_key.path)
    if isinstance(context, InputContext):
        return list(context.upstream_output.get_identifier()) if context.upstream_output else []
    return list(context.get_identifier())


def _describe(context: OutputContext | InputContext) -> str:
    if context.has_asset_key:
        return f"asset {context.asset_key.to_user_string()!r}"
    return f"output {context.name!r}" if isinstance(context, OutputContext) else "input"


class LanceStorageIOManager(IOManager):
    """The IO manager instance behind :class:`LanceIOManager` (one per run or step process)."""

    def __init__(self, settings: LanceSettings, handlers: Sequence[FrameHandler]) -> None:
        self.settings = settings
        self.handlers = list(handlers)
        # (run id, step key) -> {upstream asset key: version read}, reported by the step's outputs.
        self._reads: dict[tuple[str, str], dict[str, int]] = {}

    # -- writing ----------------------------------------------------------------------------

    def write_mode(self, context: OutputContext) -> WriteMode:
        """Mode from output metadata, else definition metadata, else the configured default."""
        where = _describe(context)
        for source in (context.output_metadata, context.definition_metadata):
            if source and source.get(MODE_KEY) is not None:
                return parse_mode(source[MODE_KEY], where=f"{where} metadata {MODE_KEY!r}")
        return self.settings.default_mode

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        """Write ``obj`` as one Lance commit and attach the materialization metadata."""
        where = _describe(context)
        if obj is None:
            raise TypeError(f"{where}: LanceIOManager cannot store None (annotate the output as Nothing "
                            "or return a table)")
        mode = self.write_mode(context)
        data = handler_for_value(self.handlers, obj, where=where).to_arrow(obj)
        uri = self.settings.uri_for(_key_path(context))
        asset = context.asset_key.to_user_string() if context.has_asset_key else None
        props = transaction_properties(
            run_id=context.run_id,
            asset_key=asset,
            partition_key=_partition_key(context),
            code_version=_code_version(context),
            job_name=context.job_name,
            mode=mode,
        )
        if mode == "overwrite" and context.has_asset_partitions:
            # Partition-scoped replacement arrives with partition support; until then say what happens.
            context.log.warning(f"{where}: mode 'overwrite' replaces the whole table, not only partition "
                                f"{props.get(PARTITION_KEY)!r}; use metadata {{'mode': 'append'}} to add rows")
        message = f"dagster {mode} of {asset or uri} in run {context.run_id}"
        result = commit_arrow(self.settings, uri, data, mode=mode, properties=props, commit_message=message)
        metadata = write_metadata(result)
        for upstream, version in self._inputs_of(context).items():
            metadata[input_version_key(upstream)] = version
        context.add_output_metadata(metadata)
        if context.has_asset_key:
            _set_data_version(context, DataVersion(str(result.version)))
        context.log.info(f"Lance commit: {uri} version {result.version} ({mode})")

    def _inputs_of(self, context: OutputContext) -> dict[str, int]:
        reads = self._reads.get((context.run_id, context.step_key), {})
        if not reads or not context.has_asset_key:
            return dict(reads)
        try:
            node = context.step_context.job_def.asset_layer.get(context.asset_key)
            parents = {k.to_user_string() for k in node.parent_keys}
        except Exception:  # outside a full run (e.g. build_output_context) report every read
            return dict(reads)
        return {k: v for k, v in reads.items() if k in parents}

    # -- reading ----------------------------------------------------------------------------

    def load_input(self, context: InputContext) -> Any:
        """Read the upstream dataset (latest, or the pinned version/tag) as the annotated type."""
        where = _describe(context)
        spec = ReadSpec.from_metadata(context.definition_metadata, where=f"{where} input metadata")
        uri = self.settings.uri_for(_key_path(context))
        try:
            ds = open_dataset(self.settings, uri, spec.pin)
        except VersionNotFoundError as exc:
            raise VersionNotFoundError(f"{where}: {uri} has no version {spec.pin!r}: {exc}") from exc
        except DatasetNotFoundError as exc:
            raise DatasetNotFoundError(
                f"{where}: no Lance dataset at {uri}; materialize the upstream asset first"
            ) from exc
        handler = handler_for_type(self.handlers, context.dagster_type.typing_type, where=where)
        source = ArrowSource(ds, spec)
        value = handler.from_arrow(source, context.dagster_type.typing_type)
        if context.has_asset_key:
            self._record_read(context, context.asset_key.to_user_string(), source.version)
        context.log.info(f"Lance read: {uri} version {source.version}"
                         + (f" columns {list(spec.columns)}" if spec.columns else ""))
        return value

    def _record_read(self, context: InputContext, asset: str, version: int) -> None:
        try:
            step = context.step_context
        except Exception:  # a bare build_input_context() has no step to report to
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


def _code_version(context: OutputContext) -> str | None:
    if not context.has_asset_key:
        return context.version
    try:
        return context.asset_spec.code_version
    except Exception:  # contexts built by hand carry no spec
        return None


def _set_data_version(context: OutputContext, version: DataVersion) -> None:
    # Dagster reads a data version cached on the step before it builds the materialization event,
    # which is the only way an IO manager can supply one (Output(data_version=...) is the asset's).
    try:
        step = context.step_context
    except Exception:
        return
    if not step.has_data_version(context.asset_key):
        step.set_data_version(context.asset_key, version)
