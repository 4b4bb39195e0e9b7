"""Modules loaded on first use, for the code paths that only sometimes need them.

A fresh process that opens a dataset and reads it (a Dagster code server, a Spark worker, a first
query) should not pay for the modules only writes, commits, schema evolution, maintenance or
searches need (issue 28: ~0.1-0.3 s of CPU each on a cold start). A module bound to
:class:`OnFirstUse` is imported the first time one of its attributes is read; the type checker
reads the real module from a ``TYPE_CHECKING`` import of the same name.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class OnFirstUse:
    """A module imported when one of its attributes is first read (``_nearest.nearest_scanner``).

    ``importlib.import_module`` runs once; later reads go straight to the loaded module.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:  # later reads skip the import machinery's lookup
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"OnFirstUse({self._name!r}, loaded={self._module is not None})"


__all__ = ["OnFirstUse"]
