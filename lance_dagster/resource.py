"""``LanceResource``: direct dataset access for ops and assets that do their own reads and writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetExecutionContext, ConfigurableResource, OpExecutionContext
from pydantic import Field

from lance_format.errors import DatasetNotFoundError

from .config import LanceSettings, make_settings, parse_mode
from .handlers import FrameHandler, default_handlers, handler_for_value
from .lineage import VersionRecord, transaction_properties, version_history
from .reader import open_dataset
from .writer import WriteResult, commit_arrow


class LanceResource(ConfigurableResource):  # type: ignore[type-arg]
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
        default_factory=dict, description="Storage options passed to lance_format (credentials, endpoint)."
    )
    write_mode: str = Field(default="overwrite", description="Default write mode: overwrite or append.")
    data_storage_version: str | None = Field(
        default=None, description="Lance data storage (file) version for new datasets."
    )

    def settings(self) -> LanceSettings:
        """The resolved storage settings."""
        return make_settings(self.root_uri, self.storage_options, self.write_mode, self.data_storage_version)

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

    def dataset(self, name: str | Sequence[str], *, version: int | str | None = None) -> Any:
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
        context: AssetExecutionContext | OpExecutionContext | None = None,
        properties: Mapping[str, str] | None = None,
        commit_message: str | None = None,
        handlers: Sequence[FrameHandler] | None = None,
    ) -> WriteResult:
        """Write ``data`` (Arrow table/reader or pandas DataFrame) as exactly one Lance commit.

        Args:
            name: dataset name or asset key path.
            data: the rows to write.
            mode: ``"overwrite"`` or ``"append"`` (default: the resource's ``write_mode``).
            context: the running op/asset context; its run id, asset key, partition key and code
                version are stored as transaction properties.
            properties: extra transaction properties.
            commit_message: stored with the commit (default names the run).
            handlers: frame handlers to convert ``data`` (default: pyarrow, pandas).
        """
        settings = self.settings()
        chosen = parse_mode(mode, where="LanceResource.write mode") if mode else settings.default_mode
        where = f"LanceResource.write({name!r})"
        arrow = handler_for_value(handlers or default_handlers(), data, where=where).to_arrow(data)
        props = transaction_properties(mode=chosen, extra=properties, **_lineage(context))
        if commit_message is None and context is not None:
            commit_message = f"dagster {chosen} of {name} in run {context.run_id}"
        return commit_arrow(
            settings,
            settings.uri_for(name),
            arrow,
            mode=chosen,
            properties=props,
            commit_message=commit_message,
        )


def _lineage(context: AssetExecutionContext | OpExecutionContext | None) -> dict[str, str | None]:
    if context is None:
        return {"run_id": None, "asset_key": None}
    out: dict[str, str | None] = {
        "run_id": context.run_id,
        "asset_key": None,
        "job_name": context.job_name,
        "partition_key": context.partition_key if context.has_partition_key else None,
    }
    try:
        key = context.asset_key  # raises unless the step materializes exactly one asset
    except Exception:
        return out
    out["asset_key"] = key.to_user_string()
    try:
        out["code_version"] = context.assets_def.code_versions_by_key.get(key)
    except Exception:
        out["code_version"] = None
    return out
