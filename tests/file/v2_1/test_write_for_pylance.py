"""Files written by our 2.1/2.2 encoder read identically by pylance 14.0.2 and by our decoder."""

from __future__ import annotations

from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from . import tables
from .helpers import read_table, take_table, write_file
from .test_read_pylance_files import METADATA_VARIANTS, _special_columns

VERSIONS = ["2.1", "2.2"]


def _check(path: str, table: pa.Table) -> None:
    theirs = lf.LanceFileReader(path).read_all().to_table()
    for col in table.column_names:
        assert theirs.column(col).equals(table.column(col)), col
    ours = read_table(path)
    for col in table.column_names:
        assert ours.column(col).equals(table.column(col)), col


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rows", [10, 20000])
def test_variety_roundtrip(tmp_path: Path, rows: int, version: str) -> None:
    table = tables.variety_table(rows)
    path = str(tmp_path / "o.lance")
    write_file(path, table, version)
    _check(path, table)
    idx = np.unique(np.random.default_rng(5).integers(0, rows, 60))
    theirs = lf.LanceFileReader(path).take_rows(idx.tolist()).to_table()
    assert theirs.equals(table.take(idx))
    assert take_table(path, idx).equals(table.take(idx))


@pytest.mark.parametrize("version", VERSIONS)
def test_nested_roundtrip(tmp_path: Path, version: str) -> None:
    table = tables.nested_table(3000)
    path = str(tmp_path / "n.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_multi_page(tmp_path: Path, version: str) -> None:
    table = tables.variety_table(20000).select(["i32_seq", "str_nulls", "list_nulls", "struct", "fsl_f32"])
    path = str(tmp_path / "p.lance")
    with open(path, "wb") as fh:
        from lance_format.file.container import ContainerWriter
        from lance_format.file.v2_1 import FileEncoder21
        from lance_format.schema import LanceSchema
        from lance_format.schema_codec import schema_to_pb

        ver = (2, 1) if version == "2.1" else (2, 2)
        cw = ContainerWriter(fh, path)
        enc = FileEncoder21(cw, table.schema, max_page_bytes=20_000, version=ver)
        for b in table.to_batches(max_chunksize=1500):
            enc.write_batch(b)
        cols = enc.finish()
        assert max(len(c.pages) for c in cols) > 5
        fields, meta = schema_to_pb(LanceSchema.from_arrow(table.schema))
        cw.finish(fields, meta, table.num_rows, cols, ver)
    _check(path, table)
    reader = lf.LanceFileReader(path)
    assert reader.read_range(7000, 5000).to_table().equals(table.slice(7000, 5000))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "meta", METADATA_VARIANTS, ids=lambda m: ",".join(f"{k[15:]}={v}" for k, v in m.items())
)
def test_metadata_variants(tmp_path: Path, meta: dict[str, str], version: str) -> None:
    base = tables.variety_table(3000)
    table = pa.table(base.columns, schema=pa.schema([f.with_metadata(meta) for f in base.schema]))
    path = str(tmp_path / "m.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_special_columns(tmp_path: Path, version: str) -> None:
    table = pa.table(_special_columns(2000))
    path = str(tmp_path / "s.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_public_writer_and_reader(tmp_path: Path, version: str) -> None:
    from lance_format.file.reader import LanceFileReader
    from lance_format.file.writer import LanceFileWriter

    table = tables.variety_table(4000)
    path = str(tmp_path / "pub.lance")
    w = LanceFileWriter(path, table.schema, version=version)
    for batch in table.to_batches(max_chunksize=1000):
        w.write_batch(batch)
    w.close()
    assert w.file_version == ((2, 1) if version == "2.1" else (2, 2))
    assert lf.LanceFileReader(path).read_all().to_table().equals(table)
    assert LanceFileReader(path).read_all().to_table().equals(table)


def test_empty_table(tmp_path: Path) -> None:
    table = tables.variety_table(10).slice(0, 0)
    path = str(tmp_path / "e.lance")
    write_file(path, table, "2.2")
    assert lf.LanceFileReader(path).read_all().to_table().num_rows == 0
    assert read_table(path).num_rows == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_packed_structs(tmp_path: Path, version: str) -> None:
    n = 800
    fixed = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), pa.array(np.arange(n) * 0.5)],
        ["a", "b"],
        mask=pa.array(np.arange(n) % 5 == 1),
    )
    plain = pa.StructArray.from_arrays(
        [pa.array(np.full(n, 7, np.int64)), pa.array(np.arange(n, dtype=np.int16))], ["c", "d"]
    )
    cols = {"ps": fixed, "ps_no_nulls": plain}
    if version == "2.2":
        cols["vps"] = pa.StructArray.from_arrays(
            [
                pa.array(np.arange(n)),
                pa.array([f"s{i}" for i in range(n)]),
                pa.array(["q"] * n, pa.large_string()),
            ],
            ["a", "b", "c"],
            mask=pa.array(np.arange(n) % 3 == 1),
        )
    md = {"lance-encoding:packed": "true"}
    table = pa.table(
        list(cols.values()), schema=pa.schema([pa.field(k, v.type, metadata=md) for k, v in cols.items()])
    )
    path = str(tmp_path / "ps.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_struct_null_type_wide_fsl(tmp_path: Path, version: str) -> None:
    rng = np.random.default_rng(2)
    n = 600
    # (pylance 14.0.2 itself panics reading an empty struct next to a full-zip column, so the
    # empty struct is checked on its own)
    small = pa.table({"e": pa.array([{}] * n, pa.struct([])), "z": pa.nulls(n)})
    write_file(str(tmp_path / "e.lance"), small, version)
    _check(str(tmp_path / "e.lance"), small)
    table = pa.table(
        {
            "z": pa.nulls(n),
            "wide": pa.FixedSizeListArray.from_arrays(
                pa.array(rng.random(n * 128).astype(np.float32)), 128, mask=pa.array(rng.random(n) < 0.1)
            ),
            "lwide": pa.ListArray.from_arrays(
                pa.array(np.arange(0, n + 1, dtype=np.int32) // 2 * 2),
                pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 64).astype(np.float32)), 64),
            ),
        }
    )
    path = str(tmp_path / "w.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_sparse_lists_keep_chunks_small(tmp_path: Path, version: str) -> None:
    # mostly empty lists: chunks must be cut so no chunk holds more than 65535 levels
    n = 200_000
    lens = np.zeros(n, np.int32)
    lens[::200] = 3
    offs = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    m = int(lens.sum())
    table = pa.table(
        {
            "l": pa.ListArray.from_arrays(offs, pa.array(np.arange(m, dtype=np.int32))),
            "ls": pa.ListArray.from_arrays(offs, pa.array([str(i) for i in range(m)])),
            "lb": pa.ListArray.from_arrays(offs, pa.array(np.arange(m) % 3 == 0)),
        }
    )
    path = str(tmp_path / "sp.lance")
    write_file(path, table, version)
    _check(path, table)


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_metadata_writes_blob_layout(tmp_path: Path, version: str) -> None:
    n = 1200
    arr = pa.array([b"x" * ((i * 37) % 5000) if i % 7 else None for i in range(n)], pa.large_binary())
    schema = pa.schema(
        [pa.field("b", arr.type, metadata={"lance-encoding:blob": "true"}), pa.field("i", pa.int64())]
    )
    table = pa.table([arr, pa.array(np.arange(n))], schema=schema)
    path = str(tmp_path / "blob.lance")
    write_file(path, table, version)
    _check(path, table)
    assert lf.LanceFileReader(path).take_rows([1, 3, 1199]).to_table().equals(table.take([1, 3, 1199]))


def _more_types(n: int) -> dict[str, pa.Array]:
    import decimal

    rng = np.random.default_rng(0)
    words = pa.array(["a", "b", "c", "d", "e"])
    return {
        "dec256": pa.array([decimal.Decimal(i) / 10 for i in range(n)], pa.decimal256(40, 1)),
        "t32": pa.array(np.arange(n, dtype=np.int32), pa.time32("ms")),
        "d64": pa.array(np.arange(n, dtype=np.int64) * 86400000, pa.date64()),
        "dict_i8": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 5, n).astype(np.int8)), words),
        "dict_u16": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, 5, n).astype(np.uint16)), words),
        "dict_int_vals": pa.DictionaryArray.from_arrays(
            pa.array(rng.integers(0, 5, n).astype(np.int32)), pa.array([10, 20, 30, 40, 50], pa.int64())
        ),
        "int_card": pa.array(rng.integers(0, 3000, n) * 7919 + 2**40),
        "llstruct": pa.array(
            [[{"a": i, "b": [i % 100] * (i % 3)}] * (i % 2) for i in range(n)],
            pa.large_list(pa.struct([("a", pa.int64()), ("b", pa.list_(pa.int8()))])),
        ),
        "dur_nulls": pa.array(np.arange(n), pa.duration("us"), mask=rng.random(n) < 0.3),
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_more_types_both_directions(tmp_path: Path, version: str) -> None:
    table = pa.table(_more_types(5000))
    ours = str(tmp_path / "o.lance")
    write_file(ours, table, version)
    _check(ours, table)
    theirs = str(tmp_path / "p.lance")
    w = lf.LanceFileWriter(theirs, table.schema, version=version)
    w.write_batch(table)
    w.close()
    assert read_table(theirs).equals(lf.LanceFileReader(theirs).read_all().to_table())


@pytest.mark.parametrize("version", VERSIONS)
def test_sliced_inputs(tmp_path: Path, version: str) -> None:
    for i, table in enumerate(
        [tables.variety_table(3000).slice(1234, 1000), tables.nested_table(3000).slice(777, 1500)]
    ):
        path = str(tmp_path / f"s{i}.lance")
        write_file(path, table, version)
        _check(path, table)
