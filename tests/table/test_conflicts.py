"""The conflict matrix between concurrent operations."""

from __future__ import annotations

import pyarrow as pa

from lance_format.schema import LanceSchema
from lance_format.table import conflicts
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def frag(fid: int, rows: int = 10, deleted: int = 0) -> FragmentMetadata:
    df = DataFile(f"f{fid}.lance", (0, 1), (0, 1), 2, 0, 100)
    d = DeletionFile(1, 7, "array", deleted) if deleted else None
    return FragmentMetadata(fid, (df,), rows, d)


def test_conflict_matrix() -> None:
    L = LanceOperation
    base = {0: frag(0).files, 1: frag(1).files}

    def t(op: LanceOperation.BaseOperation) -> Transaction:
        return Transaction(1, op)

    ok, retry, bad = conflicts.Outcome.COMPATIBLE, conflicts.Outcome.RETRYABLE, conflicts.Outcome.INCOMPATIBLE
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Append([frag(0)])), base) is ok
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Overwrite(SCHEMA, [])), base) is bad
    assert conflicts.check(t(L.Append([frag(0)])), t(L.Restore(1)), base) is bad
    d0 = L.Delete([frag(0, deleted=1)], [], "a")
    d1 = L.Delete([frag(1, deleted=1)], [], "b")
    assert conflicts.check(t(d0), t(d1), base) is ok
    assert conflicts.check(t(d0), t(d0), base) is conflicts.Outcome.REBASE_DELETIONS
    assert conflicts.check(t(d0), t(L.Delete([], [0], "c")), base) is retry
    rw = L.Rewrite([L.RewriteGroup([frag(0)], [frag(9)])])
    assert conflicts.check(t(d0), t(rw), base) is retry
    assert conflicts.check(t(d1), t(rw), base) is ok
    assert conflicts.check(t(L.Overwrite(SCHEMA, [])), t(L.Overwrite(SCHEMA, [])), base) is retry  # as pylance 14.0.2
    assert conflicts.check(t(L.Project(SCHEMA)), t(L.Project(SCHEMA)), base) is retry
    assert conflicts.check(t(L.Restore(1)), t(L.Append([])), base) is ok
