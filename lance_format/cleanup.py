"""Version cleanup: ``ds.cleanup_old_versions(...)`` and its plan → execute → finish parts.

See :mod:`lance_format.maintenance.cleanup` for the semantics (pylance's).
"""

from __future__ import annotations

from lance_format.maintenance.cleanup import (
    CleanupFile,
    CleanupPlan,
    CleanupStats,
    DeleteBatch,
    auto_cleanup,
    cleanup_old_versions,
    delete_old_manifests,
    execute_cleanup,
    execute_cleanup_batch,
    finish_cleanup,
    plan_cleanup,
    refresh_plan,
)

#: ``execute`` is the execute step's short name (one batch of keys deleted).
execute = execute_cleanup_batch

__all__ = [
    "CleanupFile",
    "CleanupPlan",
    "CleanupStats",
    "DeleteBatch",
    "auto_cleanup",
    "cleanup_old_versions",
    "delete_old_manifests",
    "execute",
    "execute_cleanup",
    "execute_cleanup_batch",
    "finish_cleanup",
    "plan_cleanup",
    "refresh_plan",
]
