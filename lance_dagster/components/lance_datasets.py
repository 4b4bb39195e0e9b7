"""``LanceDatasetsComponent``: declare Lance datasets as assets, and their maintenance, in YAML.

A ``defs.yaml`` such as::

    type: lance_dagster.components.LanceDatasetsComponent
    attributes:
      root_uri: /data/lake
      datasets:
        - asset_key: clicks
          description: Click stream written by the tracking service
          group_name: external
        - asset_key: ref/countries
          uri: s3://bucket/reference/countries.lance
      maintenance:
        cron_schedule: "0 3 * * *"
        execution_timezone: Europe/Berlin
        cleanup:
          older_than: 7d

declares one asset per dataset (datasets written outside Dagster, so the assets are external and
their history comes from maintenance observations), a maintenance job over all of them, a
schedule for it and, when ``health_sensor`` is on, the health sensor.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from ..config import dataset_uri, default_root_uri, namespace_parts
from ..maintenance.config import CleanupConfig, CompactionConfig, IndexConfig, LanceMaintenanceConfig
from ..maintenance.health import HealthThresholds
from ..maintenance.jobs import build_lance_maintenance_job
from ..maintenance.resources import lance_pyspark_resource
from ..maintenance.schedules import build_lance_maintenance_schedule
from ..maintenance.sensors import build_lance_health_sensor
from ..metadata import TABLE_NAME, URI, table_name
from ..resource import LanceResource


class LanceDatasetModel(dg.Model):
    """One dataset, declared as an asset."""

    asset_key: str = Field(description="Asset key ('a/b' for a two-part key).")
    uri: str | None = Field(default=None, description="Dataset URI (default: <root_uri>/<asset key>.lance).")
    description: str | None = None
    group_name: str | None = None
    owners: list[str] = Field(default_factory=list)


class LanceHealthModel(HealthThresholds):
    """The health sensor: its thresholds (``HealthThresholds``' fields), whether it runs, how often."""

    enabled: bool = True
    cooldown_hours: float = 6.0
    minimum_interval_seconds: int = 300


class CompactionModel(dg.Model):
    """Compaction settings (see ``lance_dagster.maintenance.CompactionConfig``)."""

    enabled: bool = True
    target_rows_per_fragment: int = 1024 * 1024
    max_rows_per_group: int = 1024
    materialize_deletions: bool = True
    materialize_deletions_threshold: float = 0.1
    defer_index_remap: bool = False


class IndexModel(dg.Model):
    """Index maintenance settings."""

    enabled: bool = True


class CleanupModel(dg.Model):
    """Cleanup settings (see ``lance_dagster.maintenance.CleanupConfig``)."""

    enabled: bool = True
    older_than: str = "7d"
    retain_versions: int = 1
    delete_unverified: bool = False
    commit_grace: str | None = None


class LanceMaintenanceModel(dg.Model):
    """The maintenance job, its schedule and health sensor, and the job's default run config.

    ``runner``, ``dry_run``, ``compaction``, ``index`` and ``cleanup`` are the job's run config
    defaults: the schedule, the health sensor and a run launched by hand all use them.
    """

    runner: Literal["spark", "local"] = "spark"
    dry_run: bool = False
    compaction: CompactionModel = Field(default_factory=CompactionModel)
    index: IndexModel = Field(default_factory=IndexModel)
    cleanup: CleanupModel = Field(default_factory=CleanupModel)
    job_name: str = "lance_maintenance"
    cron_schedule: str = "0 3 * * *"
    execution_timezone: str = "UTC"
    schedule_running: bool = Field(default=False, description="Start the schedule when the code location loads.")
    spark_master: str = "local[*]"
    health: LanceHealthModel = Field(default_factory=LanceHealthModel)


class LanceDatasetsComponent(dg.Component, dg.Resolvable, dg.Model):
    """Lance datasets as assets, with scheduled maintenance (compaction → indices → cleanup)."""

    root_uri: str | None = Field(default=None, description="Folder or object-store URI of the datasets.")
    namespace: str | None = Field(default=None, description="Path under root_uri of every dataset (the IO "
                                  "manager's namespace).")
    storage_options: dict[str, str] = Field(default_factory=dict)
    datasets: list[LanceDatasetModel] = Field(default_factory=list)
    maintenance: LanceMaintenanceModel | None = None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """Build the asset specs, maintenance job, schedule and sensor."""
        root = self.root_uri or default_root_uri()
        prefix = list(namespace_parts(self.namespace, where="LanceDatasetsComponent namespace"))
        uris = {d.asset_key: d.uri or dataset_uri(root, [*prefix, *d.asset_key.split("/")]) for d in self.datasets}
        specs = [
            dg.AssetSpec(
                key=dg.AssetKey.from_user_string(d.asset_key),
                description=d.description,
                group_name=d.group_name,
                owners=d.owners,
                kinds={"lance"},
                metadata={URI: dg.MetadataValue.text(uris[d.asset_key]),
                          TABLE_NAME: dg.MetadataValue.text(table_name(uris[d.asset_key]))},
            )
            for d in self.datasets
        ]
        m = self.maintenance
        if m is None or not specs:
            return dg.Definitions(assets=specs)
        lance = LanceResource(root_uri=root, storage_options=self.storage_options, namespace=self.namespace)
        # Validated here, at load time, rather than at the first scheduled run.
        run_config: dict[str, Any] = LanceMaintenanceConfig(
            runner=m.runner, dry_run=m.dry_run, compaction=CompactionConfig(**m.compaction.model_dump()),
            index=IndexConfig(**m.index.model_dump()), cleanup=CleanupConfig(**m.cleanup.model_dump()),
        ).model_dump(exclude_none=True)
        # The YAML settings are the job's run config defaults, so a run launched by hand (Launchpad,
        # CLI) maintains as the schedule and the sensor do.
        job = build_lance_maintenance_job(
            m.job_name, asset_uris=uris, lance=lance, pyspark=lance_pyspark_resource(m.spark_master),
            config_defaults=run_config)
        schedule = build_lance_maintenance_schedule(
            job, cron_schedule=m.cron_schedule, execution_timezone=m.execution_timezone, run_config=run_config,
            default_status=dg.DefaultScheduleStatus.RUNNING if m.schedule_running else dg.DefaultScheduleStatus.STOPPED)
        sensors = []
        if m.health.enabled:
            h = m.health
            sensors.append(build_lance_health_sensor(
                job,
                thresholds=HealthThresholds(**h.model_dump(include=set(HealthThresholds.model_fields))),
                cooldown=dt.timedelta(hours=h.cooldown_hours),
                minimum_interval_seconds=h.minimum_interval_seconds,
                run_config={k: v for k, v in run_config.items() if k != "datasets"},
            ))
        return dg.Definitions(assets=specs, jobs=[job], schedules=[schedule], sensors=sensors)
