"""Transactions: every operation survives encode and decode."""

from __future__ import annotations

import pyarrow as pa

from lance_format.schema import LanceSchema
from lance_format.table.codec.transaction import decode_transaction, encode_transaction
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def frag(fid: int, rows: int = 10, deleted: int = 0) -> FragmentMetadata:
    df = DataFile(f"f{fid}.lance", (0, 1), (0, 1), 2, 0, 100)
    d = DeletionFile(1, 7, "array", deleted) if deleted else None
    return FragmentMetadata(fid, (df,), rows, d)


def test_all_operations_roundtrip() -> None:
    L = LanceOperation
    ops = [
        L.Append([frag(0)]),
        L.Overwrite(SCHEMA, [frag(0)], {"c": "1"}),
        L.Delete([frag(1, deleted=3)], [2], "a > 1"),
        L.Update([1], [frag(2, deleted=1)], [frag(0)], [0], [], "rewrite_rows"),
        L.Project(SCHEMA),
        L.Restore(4),
        L.ReserveFragments(3),
        L.Rewrite([L.RewriteGroup([frag(1)], [frag(5)])], []),
        L.Merge([frag(1)], SCHEMA),
    ]
    for op in ops:
        txn = Transaction(5, op, transaction_properties={"x": "y"})
        back = decode_transaction(encode_transaction(txn), "t")
        assert back.operation == op and back.read_version == 5 and back.uuid == txn.uuid
        assert dict(back.transaction_properties) == {"x": "y"}
