"""``AutoCleanupConfig``: pylance's automatic version cleanup settings, stored as table config.

Lance runs a cleanup after a commit whose version the ``lance.auto_cleanup.interval`` key divides,
removing versions older than ``lance.auto_cleanup.older_than`` (``lance_format.maintenance.cleanup.
auto_cleanup``). ``write_dataset(..., auto_cleanup_options=...)`` writes both keys into a new
dataset's config, ``ds.optimize.enable_auto_cleanup`` into an existing one's, as pylance 14.0.2
writes them (``"{interval}"`` and ``"{older_than_seconds}s"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from lance_format.errors import InvalidInputError

INTERVAL_KEY = "lance.auto_cleanup.interval"
OLDER_THAN_KEY = "lance.auto_cleanup.older_than"


class AutoCleanupConfig(TypedDict):
    """Every ``interval`` versions, clean up versions older than ``older_than_seconds``."""

    interval: int
    older_than_seconds: int


def auto_cleanup_config_values(config: Mapping[str, Any], where: str) -> dict[str, str]:
    """The table config keys ``config`` stands for.

    Raises:
        InvalidInputError: a key is missing or not an integer (naming ``where``).
    """
    if not isinstance(config, Mapping):
        raise InvalidInputError(f"{where}: auto cleanup options must be a dict with 'interval' and "
                                f"'older_than_seconds', got {type(config).__name__}")
    values = {}
    for key in ("interval", "older_than_seconds"):
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{where}: auto cleanup option {key!r} must be a non-negative integer, "
                                    f"got {value!r}")
        values[key] = value
    return {INTERVAL_KEY: str(values["interval"]), OLDER_THAN_KEY: f"{values['older_than_seconds']}s"}


__all__ = ["INTERVAL_KEY", "OLDER_THAN_KEY", "AutoCleanupConfig", "auto_cleanup_config_values"]
