"""Building the next manifest: fragment ids and feature flags."""

from __future__ import annotations

import pyarrow as pa

from lance_format.schema import LanceSchema
from lance_format.table.commit import build_manifest
from lance_format.table.models import DataFile, DeletionFile, FragmentMetadata
from lance_format.table.transaction import LanceOperation, Transaction

SCHEMA = LanceSchema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))


def frag(fid: int, rows: int = 10, deleted: int = 0) -> FragmentMetadata:
    df = DataFile(f"f{fid}.lance", (0, 1), (0, 1), 2, 0, 100)
    d = DeletionFile(1, 7, "array", deleted) if deleted else None
    return FragmentMetadata(fid, (df,), rows, d)


def test_build_manifest_ids_and_flags() -> None:
    L = LanceOperation
    v1 = build_manifest(None, Transaction(0, L.Overwrite(SCHEMA, [frag(0), frag(0)])), version=1)
    assert [f.id for f in v1.fragments] == [0, 1] and v1.max_fragment_id == 1
    v2 = build_manifest(v1, Transaction(1, L.Append([frag(0)])), version=2)
    assert [f.id for f in v2.fragments] == [0, 1, 2]
    v3 = build_manifest(v2, Transaction(2, L.Delete([frag(1, deleted=2)], [0], "x")), version=3)
    assert [f.id for f in v3.fragments] == [1, 2] and v3.reader_feature_flags & 1
    assert v3.max_fragment_id == 2
    v4 = build_manifest(v3, Transaction(3, L.Overwrite(SCHEMA, [frag(0)])), version=4)
    assert [f.id for f in v4.fragments] == [3]  # 14.0.2: ids continue after max_fragment_id
    v5 = build_manifest(v4, Transaction(4, L.ReserveFragments(2)), version=5)
    assert v5.max_fragment_id == 5
    v6 = build_manifest(v5, Transaction(5, L.Restore(3)), version=6, load_version=lambda v: v3)
    assert [f.id for f in v6.fragments] == [1, 2] and v6.max_fragment_id == 5
    assert v6.writer_version is not None and v6.writer_version.library == "lance-dagster"
