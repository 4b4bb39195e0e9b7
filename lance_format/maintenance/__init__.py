"""Dataset maintenance: compaction and version cleanup as plan → execute → commit."""

from __future__ import annotations

from lance_format.maintenance.runner import LocalRunner, Runner

__all__ = ["LocalRunner", "Runner"]
