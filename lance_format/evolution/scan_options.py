"""Validation of pylance's scanner keyword arguments.

pylance's ``scanner()`` takes many options. Those that only tune performance are
accepted and have no effect here; those that change the result and are not implemented
raise :class:`NotSupportedError` instead of being ignored (an ignored ``nearest=`` or
``full_text_query=`` would return unfiltered rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lance_format.errors import InvalidInputError, NotSupportedError

#: Options that change which rows or values come back and are not implemented.
_UNSUPPORTED_WHEN_SET = ("nearest", "full_text_query", "index_segments", "substrait_filter",
                         "row_addr_allowlist", "row_addr_blocklist",
                         "batch_size_bytes")
#: Options that are pure hints (readahead, I/O sizes, index use): accepted, no effect.
PERFORMANCE_HINTS = ("batch_readahead", "fragment_readahead", "scan_in_order", "prefilter", "use_stats",
                     "fast_search", "io_buffer_size", "late_materialization", "use_scalar_index",
                     "strict_batch_size", "disable_scoring_autoprojection")


@dataclass(frozen=True)
class ColumnOrdering:
    """One sort key of ``order_by`` (pylance's ``lance.dataset.ColumnOrdering``).

    Attributes:
        column_name: Column to sort by.
        ascending: Ascending (default) or descending.
        nulls_first: Nulls before (True) or after (False, default) the values.
    """

    column_name: str
    ascending: bool = True
    nulls_first: bool = False


def check_unsupported(options: Mapping[str, Any]) -> None:
    """Raise for result-changing options that are set but not implemented.

    Raises:
        NotSupportedError: naming the option.
    """
    for name in _UNSUPPORTED_WHEN_SET:
        if options.get(name) is not None:
            raise NotSupportedError(f"scanner option {name}= is not supported by lance_format")
    if options.get("with_fragments") is not None:
        raise NotSupportedError("scanner option with_fragments= is not supported by lance_format")
    blob = options.get("blob_handling")
    if blob is not None and blob != "all_binary":
        raise NotSupportedError(f"scanner option blob_handling={blob!r} is not supported by lance_format")


def normalize_order_by(order_by: Sequence[Any] | None, names: Sequence[str]) -> tuple[tuple[str, bool, bool], ...]:
    """Turn pylance's ``order_by`` (column names or ``ColumnOrdering``) into sort keys.

    A plain name sorts ascending with nulls last, as pylance does.

    Raises:
        InvalidInputError: for an unknown column or a malformed entry.
    """
    if order_by is None:
        return ()
    if isinstance(order_by, (str, bytes)):
        order_by = [order_by]
    if not isinstance(order_by, Sequence):
        raise InvalidInputError(f"order_by must be a list of column names or ColumnOrdering, got "
                                f"{type(order_by).__name__} {order_by!r:.80}")
    keys = []
    for item in order_by:
        if isinstance(item, str):
            name, ascending, nulls_first = item, True, False
        elif hasattr(item, "column_name"):
            name = item.column_name
            ascending = bool(getattr(item, "ascending", True))
            nulls_first = bool(getattr(item, "nulls_first", False))
        else:
            raise InvalidInputError(f"order_by entries must be column names or ColumnOrdering, got {item!r}")
        if name not in names:
            raise InvalidInputError(f"order_by column {name!r} is not in the dataset schema {list(names)}")
        keys.append((name, ascending, nulls_first))
    return tuple(keys)
