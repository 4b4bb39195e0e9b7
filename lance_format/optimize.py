"""Compaction, named as pylance's ``lance.optimize``, and the ``ds.optimize`` verb group.

``Compaction.plan(ds, options) -> CompactionPlan``; ``task.execute(ds) -> RewriteResult``
(or ``execute_compaction_task(task)`` on any :class:`~lance_format.maintenance.Runner`);
``Compaction.commit(ds, results) -> CompactionMetrics`` as one ``Rewrite``;
``ds.optimize.compact_files(...)`` runs all three locally. See
:mod:`lance_format.maintenance.compaction` for the semantics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from lance_format.errors import InvalidInputError
from lance_format.evolution.arguments import U64_MAX, flag, integer, optional_integer, real
from lance_format.index.optimize import IndexOptimization, optimize_indices
from lance_format.maintenance.compaction import (
    Compaction,
    CompactionMetrics,
    CompactionOptions,
    CompactionPlan,
    CompactionTask,
    RewriteResult,
    compact_files,
    execute_compaction_task,
    plan_compaction,
)
from lance_format.table.auto_cleanup import (
    INTERVAL_KEY,
    OLDER_THAN_KEY,
    AutoCleanupConfig,
    auto_cleanup_config_values,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.maintenance.runner import Runner


class Optimize:
    """``ds.optimize``: table maintenance verbs (``compact_files``; indices add ``optimize_indices``)."""

    def __init__(self, ds: LanceDataset) -> None:
        self._ds = ds

    def compact_files(
        self,
        *,
        target_rows_per_fragment: int | None = 1_048_576,
        max_rows_per_group: int | None = 1024,
        max_bytes_per_file: int | None = None,
        materialize_deletions: bool | None = True,
        materialize_deletions_threshold: float | None = 0.1,
        num_threads: int | None = None,
        batch_size: int | None = None,
        defer_index_remap: bool | None = False,
        max_source_fragments: int | None = None,
        max_source_rows: int | None = None,
        excluded_fragment_ids: tuple[int, ...] | list[int] | None = (),
        runner: Runner | None = None,
        transaction_properties: Mapping[str, str] | None = None,
    ) -> CompactionMetrics:
        """Compact small fragments and materialize deletions; the dataset handle moves to the new version.

        Arguments are pylance's (see :class:`CompactionOptions`); ``runner`` chooses where
        the rewrite tasks run (local threads by default, ``SparkRunner`` on a cluster).

        ``None`` means the default, as in pylance; numbers are checked for type and the
        ``u64`` range here, so a wrong one is an ``InvalidInputError`` naming it.

        Returns:
            Metrics; all zero and no new version when there is nothing to compact.
        """
        counts = {"target_rows_per_fragment": target_rows_per_fragment, "max_rows_per_group": max_rows_per_group,
                  "max_bytes_per_file": max_bytes_per_file, "num_threads": num_threads, "batch_size": batch_size,
                  "max_source_fragments": max_source_fragments, "max_source_rows": max_source_rows}
        checked = {name: optional_integer(value, f"compact_files(): {name}", maximum=U64_MAX)
                   for name, value in counts.items()}
        defaults = CompactionOptions()
        excluded = [] if excluded_fragment_ids is None else excluded_fragment_ids
        if isinstance(excluded, (str, bytes)) or not isinstance(excluded, Sequence):
            raise InvalidInputError(f"compact_files(): excluded_fragment_ids must be a list of integers, got "
                                    f"{type(excluded).__name__}")
        threshold = materialize_deletions_threshold
        return compact_files(
            self._ds, runner=runner, transaction_properties=transaction_properties,
            target_rows_per_fragment=_or(checked["target_rows_per_fragment"], defaults.target_rows_per_fragment),
            max_rows_per_group=_or(checked["max_rows_per_group"], defaults.max_rows_per_group),
            max_bytes_per_file=checked["max_bytes_per_file"],
            materialize_deletions=_or(flag(materialize_deletions, "compact_files(): materialize_deletions"),
                                      defaults.materialize_deletions),
            materialize_deletions_threshold=defaults.materialize_deletions_threshold if threshold is None
            else real(threshold, "compact_files(): materialize_deletions_threshold"),
            num_threads=checked["num_threads"], batch_size=checked["batch_size"],
            defer_index_remap=_or(flag(defer_index_remap, "compact_files(): defer_index_remap"),
                                  defaults.defer_index_remap),
            max_source_fragments=checked["max_source_fragments"], max_source_rows=checked["max_source_rows"],
            excluded_fragment_ids=tuple(integer(i, "compact_files(): excluded_fragment_ids item",
                                                maximum=U64_MAX) for i in excluded))

    def optimize_indices(self, *, index_names: list[str] | None = None, runner: Runner | None = None,
                         transaction_properties: Mapping[str, str] | None = None, retrain: bool = False,
                         num_indices_to_merge: int | None = None) -> IndexOptimization:
        """Index fragments added since each index was built and fold deferred remaps.

        See :func:`lance_format.index.optimize.optimize_indices`; the dataset handle moves to
        the new version when something was committed, and that commit carries
        ``transaction_properties``.

        Returns:
            What was rebuilt, extended, and left alone because we cannot maintain its kind
            (pylance returns ``None``; code written for it ignores the value).
        """
        result = optimize_indices(self._ds, index_names=index_names, runner=runner,
                                  transaction_properties=transaction_properties, retrain=retrain,
                                  num_indices_to_merge=num_indices_to_merge)
        if result.manifest is not None:
            self._ds._set_manifest(result.manifest)
        return result

    def enable_auto_cleanup(self, auto_cleanup_config: AutoCleanupConfig, **kwargs: object) -> None:
        """Clean up old versions automatically from now on (pylance's method; one config commit)."""
        self._ds.update_config(auto_cleanup_config_values(auto_cleanup_config, f"{self._ds.uri}: "
                                                          "enable_auto_cleanup()"))

    def disable_auto_cleanup(self, **kwargs: object) -> None:
        """Stop automatic cleanup (removes the two config keys; one commit)."""
        self._ds.delete_config_keys([INTERVAL_KEY, OLDER_THAN_KEY])


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


__all__ = [
    "Compaction",
    "CompactionMetrics",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionTask",
    "IndexOptimization",
    "Optimize",
    "RewriteResult",
    "compact_files",
    "execute_compaction_task",
    "plan_compaction",
]
