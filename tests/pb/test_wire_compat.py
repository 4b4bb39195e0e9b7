"""Protobuf layer: generated code is fresh and our messages are wire-compatible with pylance 14.0.2.

The wire tests write small datasets with the real library (test-only oracle), decode every
manifest, transaction, index section and data-file page with our messages and require that
nothing decodes into unknown fields except the documented, deliberately omitted ones.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.protobuf.unknown_fields import UnknownFieldSet

from lance_format._pb import (
    encodings_v2_0_pb2,
    encodings_v2_1_pb2,
    file2_pb2,
    file_pb2,
    table_pb2,
    transaction_pb2,
)

ROOT = Path(__file__).resolve().parents[2]

lance = pytest.importorskip("lance")


def test_generated_code_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "protos" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_type_urls_match_upstream_names() -> None:
    assert encodings_v2_0_pb2.ArrayEncoding.DESCRIPTOR.full_name == "lance.encodings.ArrayEncoding"
    assert encodings_v2_0_pb2.ColumnEncoding.DESCRIPTOR.full_name == "lance.encodings.ColumnEncoding"
    assert encodings_v2_1_pb2.PageLayout.DESCRIPTOR.full_name == "lance.encodings21.PageLayout"
    assert table_pb2.BTreeIndexDetails.DESCRIPTOR.full_name == "lance.table.BTreeIndexDetails"
    assert table_pb2.BitmapIndexDetails.DESCRIPTOR.full_name == "lance.table.BitmapIndexDetails"
    assert file2_pb2.ColumnMetadata.DESCRIPTOR.full_name == "lance.file.v2.ColumnMetadata"
    assert transaction_pb2.Transaction.DESCRIPTOR.full_name == "lance.table.Transaction"


# --------------------------------------------------------------------------- helpers


def unknown_fields(msg: Message, path: str = "") -> list[str]:
    """Return ``path.field_number`` for every unknown field anywhere inside ``msg``."""
    found = [f"{path}#{f.field_number}" for f in UnknownFieldSet(msg)]
    for desc, value in msg.ListFields():
        child = f"{path}.{desc.name}"
        if desc.message_type is None:
            continue
        if desc.message_type.GetOptions().map_entry:
            value_desc = desc.message_type.fields_by_name["value"]
            if value_desc.message_type is not None:
                for key, item in value.items():
                    found += unknown_fields(item, f"{child}[{key}]")
        elif desc.label == desc.LABEL_REPEATED:
            for i, item in enumerate(value):
                found += unknown_fields(item, f"{child}[{i}]")
        else:
            found += unknown_fields(value, child)
    return found


def read_lp(data: bytes, pos: int, cls: type[Any]) -> Any:
    (size,) = struct.unpack_from("<I", data, pos)
    msg = cls()
    msg.ParseFromString(data[pos + 4 : pos + 4 + size])
    return msg


def read_manifest(path: Path) -> tuple[Any, bytes]:
    data = path.read_bytes()
    assert data[-4:] == b"LANC"
    (pos,) = struct.unpack_from("<q", data, len(data) - 16)
    (size,) = struct.unpack_from("<I", data, pos)
    # The manifest message ends exactly where the 16-byte footer starts.
    assert pos + 4 + size == len(data) - 16
    return read_lp(data, pos, table_pb2.Manifest), data


def decode_data_file(path: Path) -> tuple[Any, list[Any], list[Any], tuple[int, int]]:
    """Decode container, FileDescriptor, column metadata and every page encoding of a 2.x file."""
    data = path.read_bytes()
    assert data[-4:] == b"LANC"
    meta_start, _cmo_start, gbo_start, n_gb, n_cols, major, minor = struct.unpack_from(
        "<QQQIIHH", data, len(data) - 40
    )
    gb0_pos, gb0_size = struct.unpack_from("<QQ", data, gbo_start)
    assert n_gb >= 1
    desc = file_pb2.FileDescriptor()
    desc.ParseFromString(data[gb0_pos : gb0_pos + gb0_size])
    cmo_start = gbo_start - 16 * n_cols
    assert cmo_start >= meta_start
    columns, pages = [], []
    for i in range(n_cols):
        pos, size = struct.unpack_from("<QQ", data, cmo_start + 16 * i)
        col = file2_pb2.ColumnMetadata()
        col.ParseFromString(data[pos : pos + size])
        columns.append(col)
        wrapped = any_pb2.Any()
        wrapped.ParseFromString(col.encoding.direct.encoding)
        assert wrapped.type_url == "/lance.encodings.ColumnEncoding"
        col_enc = encodings_v2_0_pb2.ColumnEncoding()
        col_enc.ParseFromString(wrapped.value)
        pages.append(col_enc)
        for page in col.pages:
            wrapped = any_pb2.Any()
            wrapped.ParseFromString(page.encoding.direct.encoding)
            cls = {
                "/lance.encodings.ArrayEncoding": encodings_v2_0_pb2.ArrayEncoding,
                "/lance.encodings21.PageLayout": encodings_v2_1_pb2.PageLayout,
            }[wrapped.type_url]
            layout = cls()
            layout.ParseFromString(wrapped.value)
            pages.append(layout)
    return desc, columns, pages, (major, minor)


def _types_table(n: int) -> pa.Table:
    ints = pa.array(range(n), pa.int32())
    return pa.table(
        {
            "i32": ints,
            "const": pa.array([5] * n, pa.int32()),
            "i64_nulls": pa.array([None if i % 7 == 0 else i % 50 for i in range(n)], pa.int64()),
            "all_null": pa.nulls(n, pa.int32()),
            "f64": pa.array([i / 3 for i in range(n)], pa.float64()),
            "flag": pa.array([i % 3 == 0 for i in range(n)]),
            "s": pa.array([f"row{i}" for i in range(n)]),
            "few": pa.array([("a", "bb", "ccc")[i % 3] for i in range(n)]),
            "long": pa.array(["x" * 300 + str(i) for i in range(n)]),
            "ls": pa.array([f"row{i}" for i in range(n)], pa.large_string()),
            "bin": pa.array([bytes([i % 256]) * 4 for i in range(n)]),
            "lst": pa.array([list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
            "st": pa.array(
                [{"x": i, "y": f"v{i}"} for i in range(n)],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "fsl": pa.array([[float(i)] * 4 for i in range(n)], pa.list_(pa.float32(), 4)),
            "ts": pa.array(range(n), pa.timestamp("us")),
            "u8runs": pa.array([i // 1000 for i in range(n)], pa.uint8()),
        }
    )


@pytest.fixture(scope="module")
def ops_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2.2 dataset with create, append, index, add/drop column, delete and compaction commits."""
    uri = tmp_path_factory.mktemp("protos") / "ops"
    tbl = pa.table({"a": pa.array(range(100), pa.int32()), "s": [f"x{i}" for i in range(100)]})
    ds = lance.write_dataset(tbl, str(uri))
    ds = lance.write_dataset(tbl, str(uri), mode="append")
    ds.create_scalar_index("a", "BTREE")
    ds.add_columns({"b": "a + 1"})
    ds.drop_columns(["b"])
    ds.delete("a < 10")
    ds.optimize.compact_files()
    return uri


def test_manifests_and_transactions_decode_fully(ops_dataset: Path) -> None:
    manifests = sorted((ops_dataset / "_versions").glob("*.manifest"))
    assert len(manifests) >= 7
    seen_ops: set[str] = set()
    for path in manifests:
        manifest, data = read_manifest(path)
        assert unknown_fields(manifest) == [], path.name
        assert manifest.writer_version.library == "lance"
        assert manifest.writer_version.version == "14.0.2"
        assert manifest.data_format.file_format == "lance"
        assert manifest.data_format.version == "2.2"
        assert manifest.HasField("transaction_section")
        assert not manifest.HasField("transaction_section_deprecated")
        assert manifest.fragments
        for frag in manifest.fragments:
            assert frag.physical_rows > 0
            for f in frag.files:
                assert (f.file_major_version, f.file_minor_version) == (2, 2)
                assert f.file_size_bytes == (ops_dataset / "data" / f.path).stat().st_size
        inline = read_lp(data, manifest.transaction_section, transaction_pb2.Transaction)
        txn_bytes = (ops_dataset / "_transactions" / manifest.transaction_file).read_bytes()
        txn = transaction_pb2.Transaction.FromString(txn_bytes)
        assert inline == txn
        assert unknown_fields(txn) == [], manifest.transaction_file
        assert manifest.transaction_file.startswith(f"{txn.read_version}-{txn.uuid}")
        op = txn.WhichOneof("operation")
        assert op is not None
        seen_ops.add(op)
        if op == "merge":
            assert txn.merge.preserves_nullability
        if op == "project":
            assert txn.project.preserves_nullability
        if manifest.HasField("index_section"):
            section = read_lp(data, manifest.index_section, table_pb2.IndexSection)
            assert unknown_fields(section) == []
            btree = [i for i in section.indices if i.index_details.type_url.endswith("BTreeIndexDetails")]
            for idx in btree:
                assert idx.index_details.type_url == "/lance.table.BTreeIndexDetails"
                assert {f.path for f in idx.files} >= {"page_data.lance", "page_lookup.lance"}
                assert all(f.size_bytes > 0 for f in idx.files)
    assert {"overwrite", "append", "create_index", "merge", "project", "delete", "rewrite"} <= seen_ops


def test_schema_fields_in_manifest(ops_dataset: Path) -> None:
    latest = min((ops_dataset / "_versions").glob("*.manifest"), key=lambda p: int(p.name.split(".")[0]))
    manifest, _ = read_manifest(latest)
    names = [(f.name, f.id, f.parent_id, f.logical_type) for f in manifest.fields]
    assert names == [("a", 0, -1, "int32"), ("s", 1, -1, "string")]


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.2"])
def test_data_file_pages_decode_fully(tmp_path: Path, version: str) -> None:
    uri = tmp_path / "types"
    lance.write_dataset(_types_table(3000), str(uri), data_storage_version=version)
    (manifest_path,) = (uri / "_versions").glob("*.manifest")
    manifest, _ = read_manifest(manifest_path)
    assert manifest.data_format.version == version
    ((data_file,),) = [list(frag.files) for frag in manifest.fragments]
    desc, columns, pages, footer_version = decode_data_file(uri / "data" / data_file.path)
    assert footer_version == {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}[version]
    assert desc.length == 3000
    assert [f.id for f in desc.schema.fields] == [f.id for f in manifest.fields]
    assert len(columns) == len(data_file.column_indices)
    for msg in [desc, *columns, *pages]:
        assert unknown_fields(msg) == []
    layouts = [p for p in pages if isinstance(p, encodings_v2_1_pb2.PageLayout)]
    if version == "2.2":
        assert any(p.mini_block_layout.has_large_chunk for p in layouts)
        assert any(p.constant_layout.HasField("inline_value") for p in layouts)
        const = [
            p.constant_layout.inline_value for p in layouts if p.constant_layout.HasField("inline_value")
        ]
        assert struct.pack("<i", 5) in const
    if version != "2.0":
        assert any(
            p.WhichOneof("layout") == "constant_layout" and not p.constant_layout.HasField("inline_value")
            for p in layouts
        )
