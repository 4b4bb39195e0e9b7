"""``merge_insert(...).explain_plan()``: the plan of a merge as text, headed as pylance heads it.

The first line is pylance 14.0.2's (``MergeInsert: on=[...], when_matched=..., when_not_matched=...,
when_not_matched_by_source=...``, or ``DeleteOnlyMergeInsert`` for a merge that only deletes
matched rows), so code that reads it sees the same words. The lines below describe what this
library runs instead of DataFusion's operators: a read of the target's needed columns, an in-memory
hash join on the keys, and the one ``Update`` commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.errors import InvalidInputError
from lance_format.table.scan import filter_expression, referenced_columns


@dataclass(frozen=True)
class MergeClauses:
    """What a ``MergeInsertBuilder`` was told to do.

    Attributes:
        on: Join key columns.
        matched: ``"keep"``, ``"update"``, ``"delete"`` or ``"fail"``.
        update_condition: SQL condition of ``when_matched_update_all``, if any.
        insert: ``when_not_matched_insert_all`` was called.
        delete: ``when_not_matched_by_source_delete`` was called.
        delete_expr: Its filter, if any.
    """

    on: Sequence[str]
    matched: str
    update_condition: str | None
    insert: bool
    delete: bool
    delete_expr: str | pc.Expression | None

    @property
    def changes_nothing(self) -> bool:
        """Whether no clause would change a row (pylance refuses such a merge)."""
        return self.matched == "keep" and not self.insert and not self.delete


def headline(c: MergeClauses) -> str:
    """pylance's first plan line for these clauses."""
    keys = ", ".join(c.on)
    matched = {"keep": "DoNothing", "delete": "Delete", "fail": "Fail"}.get(c.matched)
    if matched is None:
        matched = "UpdateAll" if c.update_condition is None else f"UpdateIf({c.update_condition})"
    not_matched = "InsertAll" if c.insert else "DoNothing"
    if c.matched == "delete" and not c.insert and not c.delete:
        return f"DeleteOnlyMergeInsert: on=[{keys}], when_matched=Delete, when_not_matched={not_matched}"
    by_source = "Keep" if not c.delete else ("Delete" if c.delete_expr is None else "DeleteIf")
    return (f"MergeInsert: on=[{keys}], when_matched={matched}, when_not_matched={not_matched}, "
            f"when_not_matched_by_source={by_source}")


def check_source_schema(uri: str, c: MergeClauses, source: pa.Schema, target: pa.Schema) -> None:
    """Refuse a source schema the merge cannot run on (pylance refuses the same ones).

    Raises:
        InvalidInputError: naming the column (an ``OSError`` too, as pylance's).
    """
    for key in c.on:
        if key not in source.names:
            raise InvalidInputError(f"{uri}: merge_insert explain_plan(): the source schema lacks key column {key!r}")
    for field in source:
        if field.name not in target.names:
            raise InvalidInputError(f"{uri}: merge_insert explain_plan(): source column {field.name!r} is not a "
                                    f"column of the dataset {target.names}")
        want = target.field(field.name).type
        if not pa.types.is_nested(want) and field.type != want:
            raise InvalidInputError(f"{uri}: merge_insert explain_plan(): source column {field.name!r} has type "
                                    f"{field.type}, the dataset's has type {want}")


def target_columns(c: MergeClauses, source: pa.Schema, target: pa.Schema) -> list[str]:
    """Target columns the merge reads (the same choice ``MergeInsertBuilder`` makes when it runs)."""
    update = c.matched == "update"
    full = update and (c.update_condition is not None or len(source) < len(target))
    cols = list(target.names) if full else list(c.on)
    if c.delete and c.delete_expr is not None:
        expr = filter_expression(c.delete_expr, target)
        if expr is not None:
            cols += [n for n in referenced_columns(expr, target.names) if n not in cols]
    return cols


def explain(uri: str, num_fragments: int, c: MergeClauses, source: pa.Schema, target: pa.Schema,
            verbose: bool) -> str:
    """The plan text (ending in a newline, as pylance's)."""
    cols = target_columns(c, source, target)
    src_cols = [f"{f.name}: {f.type}" if verbose else f.name for f in source]
    lines = [
        headline(c),
        f"  HashJoin: in memory (pyarrow), on=[{', '.join(c.on)}]",
        f"    LanceRead: uri={uri}, projection=[{', '.join(cols)}], num_fragments={num_fragments}, row_addr=true",
        f"    Source: projection=[{', '.join(src_cols)}]",
        "  Commit: Update (rewrite rows: changed rows deleted by deletion vectors, written again with the "
        "inserted rows in new fragments)",
    ]
    return "\n".join(lines) + "\n"


__all__ = ["MergeClauses", "check_source_schema", "explain", "headline", "target_columns"]
