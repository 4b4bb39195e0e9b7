"""Where a search's own column (``_distance``, ``_score``) goes when the projection names it.

pylance accepts its search column inside ``columns=`` and returns it at that position
(``columns=["_distance", "id"]`` gives ``_distance`` first); without it the column comes after
the projected ones. The scanners compute their result in their own order; this module takes the
name out of the projection before it is planned and gives the scanners the requested order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa


def split_column(columns: Any, name: str) -> tuple[Any, list[str] | None]:
    """``columns`` without ``name``, and the requested output order when ``name`` was in it.

    Args:
        columns: The ``columns=`` argument as given (a list, a mapping of expressions, or None).
        name: The search's own column.

    Returns:
        The projection to plan, and the names in the order the user asked for (None when the
        user did not name ``name`` or passed a mapping, where the search column comes last).
    """
    if columns is None or isinstance(columns, (str, Mapping)):
        return columns, None
    names = list(columns)
    if name not in names:
        return names, None
    return [c for c in names if c != name], list(dict.fromkeys(names))


def placed(schema: pa.Schema, order: Sequence[str] | None) -> pa.Schema:
    """``schema`` with the requested names first, in their order; the rest (row ids) after."""
    if not order:
        return schema
    rest = [n for n in schema.names if n not in order]
    return pa.schema([schema.field(n) for n in [*order, *rest]])
