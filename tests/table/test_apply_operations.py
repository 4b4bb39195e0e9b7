"""Each operation is applied to a base manifest by its own registered function (``table.apply``)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pytest

from lance_format.errors import InvalidInputError
from lance_format.schema import LanceSchema
from lance_format.table.apply import apply_operation, build_manifest
from lance_format.table.codec.manifest import decode_manifest, encode_manifest
from lance_format.table.codec.transaction import decode_transaction, encode_transaction
from lance_format.table.index_metadata import IndexDetails, IndexFile, IndexMetadata
from lance_format.table.models import BasePath, DataFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction

L = LanceOperation
SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64())]))
UUID_A = "8a3f2a55-0b7e-4a43-9d41-6b3c3c0e2f10"
UUID_B = "1c1f7b8e-3a54-4c39-8f0e-6d2d5b9a7e21"


def frag(fid: int) -> FragmentMetadata:
    return FragmentMetadata(fid, (DataFile(f"f{fid}.lance", (0,), (0,), 2, 2, 100),), 10)


def index(uuid: str = UUID_A, frags: frozenset[int] = frozenset({0, 1})) -> IndexMetadata:
    created = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    return IndexMetadata(uuid, "a_idx", (0,), 1, frags, IndexDetails("/lance.table.BTreeIndexDetails"), 0,
                         created, None, (IndexFile("page_data.lance", 10),))


def base_with_index() -> object:
    v1 = build_manifest(None, Transaction(0, L.Overwrite(SCHEMA, [frag(0), frag(0), frag(0)])), version=1)
    return build_manifest(v1, Transaction(1, L.CreateIndex([index()])), version=2)


def test_an_operation_without_a_registered_function_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Mystery(L.BaseOperation):
        kind = "mystery"

    v1 = build_manifest(None, Transaction(0, L.Overwrite(SCHEMA, [frag(0)])), version=1)
    with pytest.raises(InvalidInputError, match="mystery"):
        build_manifest(v1, Transaction(1, Mystery()), version=2)
    assert L.Append in apply_operation.registry and L.Rewrite in apply_operation.registry


def test_create_index_adds_and_removes_segments_by_uuid() -> None:
    v2 = base_with_index()
    assert [i.uuid for i in v2.indices] == [UUID_A]  # type: ignore[attr-defined]
    v3 = build_manifest(v2, Transaction(2, L.CreateIndex([index(UUID_B)], [index()])), version=3)  # type: ignore[arg-type]
    assert [i.uuid for i in v3.indices] == [UUID_B]


def test_a_remapped_index_follows_its_rewrite_group_and_others_keep_their_bitmap() -> None:
    v2 = base_with_index()
    group = L.RewriteGroup([frag(0), frag(1)], [frag(0)])
    remap = L.RewrittenIndex(UUID_A, UUID_B, new_index_version=1, new_index_files=(IndexFile("x.lance", 5),))
    v3 = build_manifest(v2, Transaction(2, L.Rewrite([group], [remap])), version=3)  # type: ignore[arg-type]
    (moved,) = v3.indices
    assert moved.uuid == UUID_B and moved.fragment_bitmap == frozenset({3}) and moved.index_version == 1
    assert moved.files == (IndexFile("x.lance", 5),) and moved.index_details == index().index_details
    stale = build_manifest(v2, Transaction(2, L.Rewrite([group])), version=3)  # type: ignore[arg-type]
    assert stale.indices[0].fragment_bitmap == frozenset({0, 1})
    half = L.RewriteGroup([frag(1), frag(2)], [frag(0)])
    with pytest.raises(InvalidInputError, match="mixes indexed fragments"):
        build_manifest(v2, Transaction(2, L.Rewrite([half], [remap])), version=3)  # type: ignore[arg-type]


def test_indices_and_base_paths_round_trip_with_unknown_fields() -> None:
    idx = dataclasses.replace(index(), unknown_fields=b"\xe8\x04\x05")
    bases = (BasePath(1, "s3://b/one", False, "one", unknown_fields=b"\x98\x06\x2a"),)
    v1 = build_manifest(None, Transaction(0, L.Overwrite(SCHEMA, [frag(0)], initial_bases=bases)), version=1)
    assert v1.base_paths == bases
    v2 = build_manifest(v1, Transaction(1, L.CreateIndex([idx])), version=2)
    back = decode_manifest(encode_manifest(v2, b""), "mem")
    assert back.indices == (idx,) and back.base_paths == bases
    # Unchanged indices are written back byte for byte.
    assert encode_manifest(back, b"") == encode_manifest(decode_manifest(encode_manifest(back, b""), "m"), b"")
    txn = Transaction(0, L.Overwrite(SCHEMA, [frag(0)], {}, initial_bases=bases))
    assert decode_transaction(encode_transaction(txn), "t").operation == txn.operation
