"""Merge keys as one comparable column, for upserts whose rows are written by an engine's workers.

A single key column is compared as it is; a composite key as the text of its columns joined by a
separator no key holds (``\\x1f``), so one ``is_in`` over a value set decides matches on the workers
(filtering rows) and on the driver (the deletion filter of the commit). A null in any key column
never matches, as in ``merge_insert``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

SEPARATOR = "\x1f"


class MergeSpec:
    """What the workers of an upsert need (pickled to them): the key columns and, to keep only the
    rows to write, the table's keys and whether the matched or the unmatched rows stay."""

    def __init__(self, keys: tuple[str, ...], target: pa.Array | None = None, keep_matched: bool = True) -> None:
        self.keys = keys
        self.target = target
        self.keep_matched = keep_matched


def key_values(data: pa.Table | pa.RecordBatch, keys: Sequence[str]) -> pa.Array:
    """The merge key of each row (the column itself for one key, joined text for several)."""
    if len(keys) == 1:
        column = data.column(keys[0])
        return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    parts = [pc.cast(data.column(k), pa.string()) for k in keys]
    joined = pc.binary_join_element_wise(*parts, SEPARATOR)
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def key_expression(keys: Sequence[str]) -> pc.Expression:
    """The expression whose value is :func:`key_values` of a row."""
    if len(keys) == 1:
        return pc.field(keys[0])
    return pc.Expression._call("binary_join_element_wise",
                               [pc.field(k).cast(pa.string()) for k in keys] + [pc.scalar(SEPARATOR)])


def non_null(values: pa.Array) -> pa.Array:
    """``values`` without nulls: a value set with a null would match rows whose key is null."""
    return values.drop_null() if values.null_count else values


def matching(data: pa.RecordBatch, keys: Sequence[str], values: pa.Array) -> pa.Array:
    """Which rows of ``data`` have a key among ``values`` (nulls never match)."""
    values = non_null(values)
    mine = key_values(data, keys)
    if len(keys) == 1 and not mine.type.equals(values.type):
        values = values.cast(mine.type)
    return pc.fill_null(pc.is_in(mine, value_set=values), False)
