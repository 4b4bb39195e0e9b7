"""Typed run configuration of Lance maintenance jobs (shown and validated in the launchpad)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from dagster import Config
from pydantic import Field, create_model

RunnerKind = Literal["spark", "local"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str, *, where: str) -> dt.timedelta:
    """Parse ``"7d"``, ``"12h"``, ``"30m"``, ``"90s"`` or ``"2w"`` into a ``timedelta``.

    Raises:
        ValueError: naming ``where`` when the text is not a duration.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{where}: expected a duration like '7d', '12h', '30m' or '0s', got {text!r}")
    return dt.timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


class CompactionConfig(Config):
    """Compaction: rewrite small fragments and fragments with many deleted rows into full ones."""

    enabled: bool = Field(default=True, description="Run compaction.")
    target_rows_per_fragment: int = Field(default=1024 * 1024, gt=0,
                                          description="Rows per fragment after compaction.")
    max_rows_per_group: int = Field(default=1024, gt=0, description="Rows per page group in rewritten files.")
    materialize_deletions: bool = Field(default=True, description="Rewrite fragments with many deleted rows.")
    materialize_deletions_threshold: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Deleted fraction above which a fragment is rewritten.")
    defer_index_remap: bool = Field(
        default=False, description="Record a fragment-reuse index instead of remapping indices in the commit.")
    dry_run: bool = Field(default=False, description="Plan only: report what would be rewritten.")


class IndexConfig(Config):
    """Index maintenance: remap deferred indices and fold unindexed fragments into the indices."""

    enabled: bool = Field(default=True, description="Run optimize_indices.")
    dry_run: bool = Field(default=False, description="Report which indices would be updated.")


class CleanupConfig(Config):
    """Cleanup: delete files only old versions reference.

    Never removed: the latest version, tagged versions (including the ``dagster-pin-v*`` tags kept
    for versions pinned by asset inputs), the newest ``retain_versions`` versions, and versions
    younger than ``older_than``.
    """

    enabled: bool = Field(default=True, description="Run cleanup.")
    older_than: str = Field(default="7d", description="Only versions older than this go ('7d', '12h', '0s').")
    retain_versions: int = Field(default=1, ge=1, description="Always keep this many newest versions.")
    delete_unverified: bool = Field(
        default=False, description="Also delete unreferenced files younger than 7 days (unsafe while writers run).")
    commit_grace: str | None = Field(
        default=None, description="Keep every version that was the latest this recently, so a commit in flight "
        "finds the version it read ('5m', '0s'); default: lance_format's (5 minutes, or $LANCE_FORMAT_COMMIT_GRACE).")
    dry_run: bool = Field(default=False, description="Report exactly what would be deleted, delete nothing.")


class LanceMaintenanceConfig(Config):
    """Run config of a job built by ``build_lance_maintenance_job``.

    ``datasets`` picks a subset of the job's datasets by name (``None``: all of them); the health
    sensor uses it to maintain only the datasets past their thresholds.
    """

    datasets: list[str] | None = Field(default=None, description="Subset of the job's datasets (names).")
    runner: RunnerKind = Field(default="spark", description="Run rewrite tasks on Spark or local threads.")
    dry_run: bool = Field(default=False, description="Dry-run every step.")
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)
    cleanup: CleanupConfig = Field(default_factory=CleanupConfig)


class CompactionStepConfig(CompactionConfig):
    """Config of one dataset's compaction op (filled in from :class:`LanceMaintenanceConfig`)."""

    runner: RunnerKind = "spark"


class IndexStepConfig(IndexConfig):
    """Config of one dataset's index op."""

    runner: RunnerKind = "spark"


class CleanupStepConfig(CleanupConfig):
    """Config of one dataset's cleanup op."""

    runner: RunnerKind = "spark"


def config_with_defaults(cls: type[Config], defaults: Mapping[str, Any]) -> type[Config]:
    """A subclass of ``cls`` whose fields default to ``defaults`` (nested configs given as dicts).

    A job's run config schema is its config class, so these become the defaults the Launchpad
    shows and a run launched without config uses. Constraints and descriptions are kept, and the
    defaults are validated here.

    Raises:
        pydantic.ValidationError: a default breaks a field's constraint.
        KeyError: a default names no field of ``cls``.
    """
    cls.model_validate(dict(defaults))  # the defaults themselves, now, when the definitions load
    fields: dict[str, Any] = {}
    for name, value in defaults.items():
        info = cls.model_fields[name]
        annotation = info.annotation
        if isinstance(value, Mapping) and isinstance(annotation, type) and issubclass(annotation, Config):
            sub = config_with_defaults(annotation, value)
            fields[name] = (sub, Field(default_factory=sub, description=info.description))
        else:
            typed = Annotated[annotation, *info.metadata] if info.metadata else annotation
            fields[name] = (typed, Field(default=value, description=info.description))
    made: type[Config] = create_model(cls.__name__, __base__=cls, **fields)
    return made
