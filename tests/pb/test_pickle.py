"""Generated messages and the table models cross process boundaries (Spark, runners) by pickle."""

from __future__ import annotations

import pickle

import pyarrow as pa

from lance_format._pb import table_pb2, transaction_pb2
from lance_format.schema import LanceSchema
from lance_format.table.index_metadata import IndexDetails, IndexMetadata
from lance_format.table.manifest import Manifest
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction


def test_generated_messages_pickle_by_their_package_name() -> None:
    frag = table_pb2.DataFragment(id=3, physical_rows=10)
    frag.MergeFromString(b"\xe8\x04\x05")  # an unknown field rides along
    txn = transaction_pb2.Transaction(read_version=2, uuid="u")
    for msg in (frag, txn):
        assert type(msg).__module__.startswith("lance_format._pb.")
        back = pickle.loads(pickle.dumps(msg))
        assert back == msg and back.SerializeToString() == msg.SerializeToString()


def test_models_pickle_with_unknown_fields() -> None:
    frag = FragmentMetadata(4, (DataFile("a.lance", (0,), (0,), 2, 2, 10, unknown_fields=b"\xe8\x04\x05"),), 7,
                            DeletionFile(1, 9, "bitmap", 2))
    schema = LanceSchema.from_arrow(pa.schema([("a", pa.int64())]))
    index = IndexMetadata("0b5f3a0e-5c57-4f55-9d0c-2b7f6cbb3f5d", "a_idx", (0,), 1, frozenset({4}),
                          IndexDetails("/lance.table.BTreeIndexDetails"))
    manifest = Manifest(schema, (frag,), 1, indices=(index,), unknown_fields=b"\x98\x06\x2a")
    txn = Transaction(1, LanceOperation.CreateIndex([index]))
    for obj in (frag, manifest, txn):
        assert pickle.loads(pickle.dumps(obj)) == obj
