"""Opening a file refuses misfiled protobuf fields in column metadata as pylance does, and keeps
unknown field numbers (a newer writer's additions) readable; the fast checks behind the open path
must give the same verdicts as walking every message."""

from __future__ import annotations

import struct
from pathlib import Path

import lance.file as plf
import pyarrow as pa
import pytest

from lance_format._pb import file2_pb2
from lance_format.errors import CorruptFileError
from lance_format.file import LanceFileReader
from lance_format.file.container import FOOTER_SIZE, parse_column_metadata
from lance_format.pbwire import check_wire_types, has_unknown_fields

_FOOTER = struct.Struct("<QQQIIHH4s")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, pa.Table]:
    d = tmp_path_factory.mktemp("open_wire")
    table = pa.table({"i": pa.array(range(2000), pa.int64()),
                      "s": pa.array([f"w{i % 37} x{i % 11}" for i in range(2000)])})
    path = d / "f.lance"
    w = plf.LanceFileWriter(str(path), table.schema, version="2.2")
    w.write_batch(table)
    w.close()
    return path.read_bytes(), table


def _append_to_last_column(data: bytes, extra: bytes) -> bytes:
    """The file with ``extra`` appended to its last column's metadata (tables and footer moved)."""
    cm_start, cmo_start, gbo_start, n_gb, n_cols, major, minor, magic = _FOOTER.unpack(data[-FOOTER_SIZE:])
    cmo_start = gbo_start - 16 * n_cols
    cmo = bytearray(data[cmo_start:gbo_start])
    pos, size = struct.unpack_from("<QQ", cmo, 16 * (n_cols - 1))
    assert pos + size == cmo_start  # the usual layout: metadata right before the CMO table
    struct.pack_into("<QQ", cmo, 16 * (n_cols - 1), pos, size + len(extra))
    footer = _FOOTER.pack(cm_start, cmo_start + len(extra), gbo_start + len(extra), n_gb, n_cols, major, minor,
                          magic)
    return data[:cmo_start] + extra + bytes(cmo) + data[gbo_start:-FOOTER_SIZE] + footer


def _pylance_reads(path: Path) -> pa.Table | None:
    try:
        return plf.LanceFileReader(str(path)).read_all().to_table()
    except Exception:  # noqa: BLE001 - any refusal counts
        return None


# ColumnMetadata.buffer_offsets (#3) sent as a 32-bit field; .pages (#2) sent as a varint
@pytest.mark.parametrize("extra", [b"\x1d\x00\x00\x00\x00", b"\x10\x05"])
def test_misfiled_column_metadata_field_is_refused_naming_the_file(
    tmp_path: Path, sample: tuple[bytes, pa.Table], extra: bytes
) -> None:
    path = tmp_path / "bad.lance"
    path.write_bytes(_append_to_last_column(sample[0], extra))
    assert _pylance_reads(path) is None
    with pytest.raises(CorruptFileError, match="bad.lance.*wire type"):
        LanceFileReader(str(path)).read_all().to_table()


def test_unknown_column_metadata_field_reads_as_pylance_reads(tmp_path: Path,
                                                              sample: tuple[bytes, pa.Table]) -> None:
    path = tmp_path / "newer.lance"
    path.write_bytes(_append_to_last_column(sample[0], b"\xf8\x01\x07"))  # field #31, a varint
    expected = _pylance_reads(path)
    assert expected is not None and expected.equals(sample[1])
    assert LanceFileReader(str(path)).read_all().to_table().equals(expected)


def _raw_columns(data: bytes, path: Path) -> list[bytes]:
    path.write_bytes(data)
    meta = LanceFileReader(str(path))._meta
    return [bytes(r) for r in meta.columns._raw]  # type: ignore[attr-defined]


def test_misfiled_field_in_a_page_encoding_is_refused(tmp_path: Path, sample: tuple[bytes, pa.Table]) -> None:
    for raw in _raw_columns(sample[0], tmp_path / "ok.lance"):
        cm = file2_pb2.ColumnMetadata.FromString(raw)
        # Any.type_url (#1) as a 32-bit field, after the real one
        cm.pages[0].encoding.direct.encoding += b"\x0d\x00\x00\x00\x00"
        with pytest.raises(CorruptFileError, match="x.lance: column .* page 0.*type_url"):
            parse_column_metadata(cm.SerializeToString(), 0, "x.lance", 1 << 40)


def test_fast_unknown_field_check_agrees_with_walking_the_tree(tmp_path: Path,
                                                              sample: tuple[bytes, pa.Table]) -> None:
    raws = _raw_columns(sample[0], tmp_path / "ok.lance")
    for raw in raws:
        clean = file2_pb2.ColumnMetadata.FromString(raw)
        assert not has_unknown_fields(clean)
        check_wire_types(clean, "x")
        before = clean.SerializeToString()
        unknown = file2_pb2.ColumnMetadata.FromString(raw + b"\xf8\x01\x07")
        assert has_unknown_fields(unknown)
        check_wire_types(unknown, "x")  # an unknown number is no error
        assert unknown.SerializeToString() == raw + b"\xf8\x01\x07"  # the message is left as it was
        assert clean.SerializeToString() == before
        nested = file2_pb2.ColumnMetadata.FromString(raw)
        page = nested.pages[0]
        # a page (a sub-message) with .length (#3, a varint) sent as a 64-bit field
        misfiled = page.SerializeToString() + b"\x19" + bytes(8)
        nested.pages[0].ParseFromString(misfiled)
        assert has_unknown_fields(nested)
        with pytest.raises(CorruptFileError, match="'length'"):
            check_wire_types(nested, "x")
