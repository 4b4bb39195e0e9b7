"""Version cleanup: ``ds.cleanup_old_versions(...)`` and its plan → execute → finish parts.

See :mod:`lance_format.maintenance.cleanup` for the semantics: pylance's, plus a commit grace
(:data:`COMMIT_GRACE`; a version that was the latest that recently stays, so a commit in flight
finds the version it read) and a full sweep of leftovers with ``delete_unverified``.
"""

from __future__ import annotations

from lance_format.maintenance.cleanup import (
    COMMIT_GRACE,
    COMMIT_GRACE_ENV,
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
    resolve_commit_grace,
)

#: ``execute`` is the execute step's short name (one batch of keys deleted).
execute = execute_cleanup_batch

__all__ = [
    "COMMIT_GRACE",
    "COMMIT_GRACE_ENV",
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
    "resolve_commit_grace",
]
