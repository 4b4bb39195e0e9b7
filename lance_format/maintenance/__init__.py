"""Dataset maintenance: compaction and version cleanup as plan → execute → commit."""

from __future__ import annotations

from lance_format.maintenance.runner import LocalRunner, ProcessRunner, Runner

__all__ = ["LocalRunner", "ProcessRunner", "Runner"]
