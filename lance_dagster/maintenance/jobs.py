"""``build_lance_maintenance_job``: compaction → index optimization → cleanup for each dataset.

Every dataset gets its own chain of three ops, each in the dataset's concurrency pool
(``lance_maintenance_<name>``), so with the pool limit at 1 two maintenance runs never work on
one dataset at once while different datasets proceed in parallel. The run config is one typed
:class:`LanceMaintenanceConfig`, mapped onto the ops; its ``datasets`` field restricts a run to
some datasets (the health sensor uses it).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from dagster import (
    AssetsDefinition,
    AssetSelection,
    GraphDefinition,
    In,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpDefinition,
    OpExecutionContext,
    Out,
    RunConfig,
    config_mapping,
    in_process_executor,
    op,
)
from dagster import graph as graph_decorator

from ..resource import LanceResource
from .config import (
    CleanupStepConfig,
    CompactionStepConfig,
    IndexStepConfig,
    LanceMaintenanceConfig,
    config_with_defaults,
)
from .resources import SPARK_RESOURCE_KEY, lance_pyspark_resource
from .steps import run_cleanup, run_compaction, run_optimize_indices
from .targets import MaintenanceTarget, resolve_targets

#: Run tag on every maintenance run (the health sensor and the UI filter by it).
MAINTENANCE_TAG = "lance/maintenance"
#: Job metadata key listing the job's datasets (read by the health sensor).
TARGETS_METADATA = "lance/maintenance_targets"

StepFn = Callable[[OpExecutionContext, MaintenanceTarget, Any], None]


def _step_op(target: MaintenanceTarget, step: str, config_cls: type, fn: StepFn, first: bool) -> OpDefinition:
    ins = {} if first else {"after": In(Nothing)}

    def body(context, config):  # type: ignore[no-untyped-def]
        fn(context, target, config)

    # Annotations are set as objects (not strings) so Dagster sees the typed config class.
    body.__annotations__ = {"context": OpExecutionContext, "config": config_cls, "return": None}
    decorated: OpDefinition = op(
        name=f"{step}__{target.name}",
        description=f"{step.replace('_', ' ').capitalize()} of {target.label}",
        ins=ins,
        out=Out(Nothing),
        pool=target.pool,
        required_resource_keys={"lance", SPARK_RESOURCE_KEY},
        tags={"lance/dataset": target.label},
    )(body)
    return decorated


def targets_from_job(job: JobDefinition) -> list[MaintenanceTarget]:
    """The datasets a job built by :func:`build_lance_maintenance_job` maintains."""
    from dagster import AssetKey

    raw = job.metadata.get(TARGETS_METADATA)
    if raw is None:
        raise ValueError(f"job {job.name!r} was not built by build_lance_maintenance_job")
    data: list[dict[str, Any]] = json.loads(json.dumps(getattr(raw, "value", raw)))
    return [
        MaintenanceTarget(t["name"], AssetKey.from_user_string(t["asset_key"]) if t["asset_key"] else None,
                          t["uri"], frozenset(t["pinned_versions"]))
        for t in data
    ]


def _map_config(targets: Sequence[MaintenanceTarget], config_cls: type[LanceMaintenanceConfig]) -> Any:
    names = {t.name for t in targets} | {t.label for t in targets}

    def _mapping(cfg: LanceMaintenanceConfig) -> RunConfig:
        chosen = set(cfg.datasets) if cfg.datasets is not None else None
        unknown = sorted((chosen or set()) - names)
        if unknown:
            raise ValueError(f"datasets {unknown} are not maintained by this job; known: {sorted(names)}")
        ops: dict[str, Any] = {}
        for t in targets:
            selected = chosen is None or t.name in chosen or t.label in chosen
            common = {"runner": cfg.runner}
            ops[f"compact__{t.name}"] = {"config": {
                **cfg.compaction.model_dump(), **common,
                "enabled": selected and cfg.compaction.enabled,
                "dry_run": cfg.dry_run or cfg.compaction.dry_run}}
            ops[f"optimize_indices__{t.name}"] = {"config": {
                **cfg.index.model_dump(), **common,
                "enabled": selected and cfg.index.enabled,
                "dry_run": cfg.dry_run or cfg.index.dry_run}}
            ops[f"cleanup__{t.name}"] = {"config": {
                **cfg.cleanup.model_dump(), **common,
                "enabled": selected and cfg.cleanup.enabled,
                "dry_run": cfg.dry_run or cfg.cleanup.dry_run}}
        return RunConfig(ops=ops)

    # Real classes, not postponed strings, so Dagster derives the typed config schema.
    _mapping.__annotations__ = {"cfg": config_cls, "return": RunConfig}
    return config_mapping(_mapping)


def build_lance_maintenance_job(
    name: str = "lance_maintenance",
    *,
    assets: Sequence[AssetsDefinition] = (),
    selection: AssetSelection | str | Sequence[str] | None = None,
    dataset_uris: Mapping[str, str] | Sequence[str] = (),
    asset_uris: Mapping[Any, str] | None = None,
    lance: LanceResource | None = None,
    pyspark: Any | None = None,
    description: str | None = None,
    tags: Mapping[str, str] | None = None,
    config_defaults: Mapping[str, Any] | None = None,
) -> JobDefinition:
    """Build a job that compacts, re-indexes and cleans up Lance datasets.

    For every selected asset (and every bare dataset URI) the job runs three ops in order:
    ``compact__<name>`` (rewrite tasks on Spark through the ``lance_pyspark`` resource, or local
    threads), ``optimize_indices__<name>`` (remap deferred indices, index new fragments) and
    ``cleanup__<name>`` (delete old versions' files, never the latest, tagged, pinned or retained
    ones). Each commit is recorded as an observation on the maintained asset.

    Args:
        name: job name.
        assets: all asset definitions of the code location; ``selection`` is resolved against
            them and every ``AssetIn(metadata={"version": N})`` among them pins version N against cleanup.
        selection: which assets to maintain (``AssetSelection``, selection string, or key strings).
        dataset_uris: datasets that are not assets, as ``{name: uri}`` or a list of URIs.
        asset_uris: assets not among ``assets`` (external ``AssetSpec``s) as ``{asset key: uri}``;
            maintenance events are recorded on them.
        lance: the resource mapping asset keys to dataset URIs (the IO manager's ``root_uri``).
            ``None``: the ``Definitions`` provide the ``lance`` and ``lance_pyspark`` resources.
        pyspark: a dagster-pyspark ``PySparkResource``/``LazyPySparkResource`` (only with
            ``lance``); default: a lazy loopback-only ``local[*]`` session (:func:`lance_pyspark_resource`).
        description: job description.
        tags: extra run tags.
        config_defaults: a :class:`LanceMaintenanceConfig` as a dict (e.g. ``{"runner": "local",
            "cleanup": {"older_than": "1d"}}``) that becomes the defaults of the job's run config:
            what the Launchpad shows and what a run launched by hand, a schedule or a sensor uses
            for anything its run config leaves out.

    Raises:
        ValueError: when the selection and URIs name no dataset.
        pydantic.ValidationError: ``config_defaults`` breaks a constraint of the config.
    """
    targets = resolve_targets(assets=assets, selection=selection, dataset_uris=dataset_uris,
                              asset_uris=asset_uris)
    op_defs: list[OpDefinition] = []
    for t in targets:
        op_defs += [
            _step_op(t, "compact", CompactionStepConfig, run_compaction, True),
            _step_op(t, "optimize_indices", IndexStepConfig, run_optimize_indices, False),
            _step_op(t, "cleanup", CleanupStepConfig, run_cleanup, False),
        ]

    @graph_decorator(name=name)
    def _graph() -> None:
        for i in range(0, len(op_defs), 3):
            compact, index, cleanup = op_defs[i : i + 3]
            cleanup(after=index(after=compact()))

    graph: GraphDefinition = _graph
    # Dagster binds a job's resources all at once: with ``lance`` given the job carries both of its
    # resources; without it, the Definitions provide ``lance`` and ``lance_pyspark`` (a job that
    # binds only some of its resources is rejected before Definitions can fill in the rest).
    resource_defs: dict[str, Any] = {}
    if lance is not None:
        resource_defs = {"lance": lance, SPARK_RESOURCE_KEY: pyspark or lance_pyspark_resource()}
    elif pyspark is not None:
        raise ValueError("pass `lance` together with `pyspark`, or provide both resources in Definitions")
    listing = [{"name": t.name, "asset_key": t.asset_key.to_user_string() if t.asset_key else None,
                "uri": t.uri, "pinned_versions": sorted(t.pinned_versions)} for t in targets]
    job = graph.to_job(
        name=name,
        description=description or "Compaction → index optimization → cleanup of "
        + ", ".join(t.label for t in targets),
        config=_map_config(targets, cast(type[LanceMaintenanceConfig], config_with_defaults(
            LanceMaintenanceConfig, config_defaults)) if config_defaults else LanceMaintenanceConfig),
        resource_defs=resource_defs,
        # One process: the Spark session (one JVM) is shared by every step of the run.
        executor_def=in_process_executor,
        tags={MAINTENANCE_TAG: "true", **(tags or {})},
        metadata={TARGETS_METADATA: MetadataValue.json(listing),
                  "lance/datasets": MetadataValue.text(json.dumps([t.label for t in targets]))},
    )
    if lance is not None:
        _BOUND_LANCE[job] = lance
    return job


#: The ``LanceResource`` each job was built with (the health sensor finds the datasets through it).
_BOUND_LANCE: weakref.WeakKeyDictionary[JobDefinition, LanceResource] = weakref.WeakKeyDictionary()


def bound_lance_resource(job: JobDefinition) -> LanceResource | None:
    """The ``lance`` resource passed to :func:`build_lance_maintenance_job`, if any."""
    return _BOUND_LANCE.get(job)
