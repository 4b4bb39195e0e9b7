"""Files written by pylance 14.0.2 (2.1 and 2.2) read identically by our 2.1 decoder."""

from __future__ import annotations

import decimal
from pathlib import Path

import lance.file as lf
import numpy as np
import pyarrow as pa
import pytest

from . import tables
from .helpers import open_decoder, read_table, take_table

VERSIONS = ["2.1", "2.2"]


def _pylance_write(path: Path, table: pa.Table, version: str, batch: int | None = None, **kw: object) -> str:
    w = lf.LanceFileWriter(str(path), table.schema, version=version, **kw)
    for b in table.to_batches(max_chunksize=batch) if batch else [table]:
        w.write_batch(b)
    w.close()
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[str, pa.Table]]:
    d = tmp_path_factory.mktemp("pylance21")
    out = {}
    var = tables.variety_table(20000)
    nest = tables.nested_table(2000)
    for v in VERSIONS:
        out[("var", v)] = (_pylance_write(d / f"var_{v}.lance", var, v), var)
        out[("var10", v)] = (_pylance_write(d / f"var10_{v}.lance", var.slice(0, 10), v), var.slice(0, 10))
        out[("nest", v)] = (_pylance_write(d / f"nest_{v}.lance", nest, v), nest)
        out[("paged", v)] = (
            _pylance_write(
                d / f"paged_{v}.lance",
                var.select(["i32_seq", "str_nulls", "list_nulls", "struct"]),
                v,
                batch=1000,
                data_cache_bytes=16 * 1024,
            ),
            var.select(["i32_seq", "str_nulls", "list_nulls", "struct"]),
        )
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["var", "var10", "nest", "paged"])
def test_full_read(files: dict, name: str, version: str) -> None:
    path, expected = files[(name, version)]
    got = read_table(path)
    for col in expected.column_names:
        assert got.column(col).equals(expected.column(col)), col


@pytest.mark.parametrize("version", VERSIONS)
def test_projection_and_ranges(files: dict, version: str) -> None:
    path, expected = files[("var", version)]
    cols = ["struct_nulls", "str_long", "i32_seq", "list_str"]
    dec = open_decoder(path, cols)
    for start, stop in [(0, 1), (5, 5), (1000, 3333), (19990, 20000), (0, 20000)]:
        got = dec.read_range(start, stop)
        assert pa.Table.from_batches([got]).equals(expected.select(cols).slice(start, stop - start))


@pytest.mark.parametrize("version", VERSIONS)
def test_ranges_across_pages(files: dict, version: str) -> None:
    path, expected = files[("paged", version)]
    dec = open_decoder(path)
    assert max(len(leaf.column.pages) for leaves in dec._leaves for leaf in leaves) > 3
    for start, stop in [(0, 20000), (4000, 9000), (12345, 12400)]:
        got = pa.Table.from_batches([dec.read_range(start, stop)])
        assert got.equals(expected.slice(start, stop - start))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["var", "nest", "paged"])
def test_take(files: dict, name: str, version: str) -> None:
    path, expected = files[(name, version)]
    rng = np.random.default_rng(3)
    idx = np.concatenate([rng.integers(0, expected.num_rows, 200), [0, 0, expected.num_rows - 1]])
    assert take_table(path, idx).equals(expected.take(idx))


METADATA_VARIANTS = [
    {"lance-encoding:compression": "zstd"},
    {"lance-encoding:compression": "lz4"},
    {"lance-encoding:compression": "none"},
    {"lance-encoding:compression": "fsst"},
    {"lance-encoding:compression": "zstd", "lance-encoding:compression-level": "9"},
    {"lance-encoding:structural-encoding": "fullzip"},
    {"lance-encoding:structural-encoding": "miniblock"},
    {"lance-encoding:compression": "zstd", "lance-encoding:bss": "on"},
    {"lance-encoding:dict-size-ratio": "0.99"},
    {"lance-encoding:rle-threshold": "0.9"},
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "meta", METADATA_VARIANTS, ids=lambda m: ",".join(f"{k[15:]}={v}" for k, v in m.items())
)
def test_metadata_variants(tmp_path: Path, meta: dict[str, str], version: str) -> None:
    base = tables.variety_table(3000)
    table = pa.table(base.columns, schema=pa.schema([f.with_metadata(meta) for f in base.schema]))
    path = _pylance_write(tmp_path / "m.lance", table, version)
    expected = lf.LanceFileReader(path).read_all().to_table()
    assert read_table(path).equals(expected)


def _special_columns(n: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(1)
    items = pa.array(rng.random(n * 4).astype(np.float32), mask=rng.random(n * 4) < 0.1)
    return {
        "fsl_inner_nulls": pa.FixedSizeListArray.from_arrays(items, 4),
        "fsl_outer_nulls": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 4).astype(np.float32)), 4, mask=pa.array(rng.random(n) < 0.2)
        ),
        "dict_nulls": pa.array([None if i % 5 == 0 else f"k{i % 7}" for i in range(n)]).dictionary_encode(),
        "lls": pa.array([[[{"x": j}] * (j % 2) for j in range(i % 3)] if i % 4 else None for i in range(n)]),
        "empty_lists": pa.array([[] for _ in range(n)], pa.list_(pa.int32())),
        "null_lists": pa.array([None] * n, pa.list_(pa.int32())),
        "str_allnull": pa.nulls(n, pa.string()),
        "const_str": pa.array(["same"] * n),
        "const_lstr": pa.array(["q"] * n, pa.large_string()),
        "const_bool": pa.array([True] * n),
        "const_dec": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(10, 2)),
        "const_list": pa.array([[7, 7]] * n, pa.list_(pa.int32())),
        "const_struct_str": pa.StructArray.from_arrays(
            [pa.array(["k"] * n)], ["s"], mask=pa.array(np.arange(n) % 3 == 0)
        ),
        "bigstr": pa.array(
            ["y" * (40000 + i) if i % 10 == 0 else None for i in range(200)] + ["z"] * (n - 200)
        ),
        "list_long_str": pa.array([["w" * 300] * (i % 3) for i in range(n)]),
        "time64": pa.array(np.arange(n, dtype=np.int64), pa.time64("ns")),
        "dur": pa.array(np.arange(n, dtype=np.int64), pa.duration("ms")),
        "fsl_wide": pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 128).astype(np.float32)), 128, mask=pa.array(rng.random(n) < 0.1)
        ),
        "list_fsl_wide": pa.ListArray.from_arrays(
            pa.array(np.arange(0, n + 1, dtype=np.int32) // 2 * 2),
            pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 128).astype(np.float32)), 128),
        ),
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", list(_special_columns(10)))
def test_special_columns(tmp_path: Path, name: str, version: str) -> None:
    n = 2000
    table = pa.table({name: _special_columns(n)[name]})
    path = _pylance_write(tmp_path / "s.lance", table, version)
    assert read_table(path).equals(table)
    idx = np.array([5, 1999, 0, 700, 700])
    assert take_table(path, idx).equals(table.take(idx))


@pytest.mark.parametrize("version", VERSIONS)
def test_packed_struct(tmp_path: Path, version: str) -> None:
    n = 1500
    arr = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), pa.array(np.arange(n) * 0.5)], ["a", "b"]
    )
    schema = pa.schema([pa.field("p", arr.type, metadata={"lance-encoding:packed": "true"})])
    table = pa.table([arr], schema=schema)
    path = _pylance_write(tmp_path / "p.lance", table, version)
    assert read_table(path).column(0).equals(table.column(0))


def test_public_reader_dispatch(files: dict) -> None:
    from lance_format.file.reader import LanceFileReader

    path, expected = files[("var", "2.2")]
    reader = LanceFileReader(path, columns=["i64_nulls", "str_words", "list_nulls"])
    assert reader.read_all().to_table().equals(expected.select(["i64_nulls", "str_words", "list_nulls"]))


@pytest.mark.parametrize("version", VERSIONS)
def test_blob_column(tmp_path: Path, version: str) -> None:
    n = 1500
    arr = pa.array([b"x" * ((i * 37) % 5000) if i % 7 else None for i in range(n)], pa.large_binary())
    schema = pa.schema([pa.field("b", arr.type, metadata={"lance-encoding:blob": "true"})])
    path = _pylance_write(tmp_path / "b.lance", pa.table([arr], schema=schema), version)
    expected = lf.LanceFileReader(path).read_all().to_table()
    assert read_table(path).equals(expected)
    assert take_table(path, np.array([3, 1, 1499])).equals(expected.take([3, 1, 1499]))


def test_variable_packed_struct_22(tmp_path: Path) -> None:
    n = 800
    arr = pa.StructArray.from_arrays(
        [pa.array(np.arange(n, dtype=np.int32)), pa.array([f"s{i}" for i in range(n)])],
        ["a", "b"],
        mask=pa.array(np.arange(n) % 5 == 1),
    )
    schema = pa.schema([pa.field("v", arr.type, metadata={"lance-encoding:packed": "true"})])
    table = pa.table([arr], schema=schema)
    path = _pylance_write(tmp_path / "v.lance", table, "2.2")
    assert read_table(path).equals(table)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_struct_and_null_type(tmp_path: Path, version: str) -> None:
    table = pa.table({"e": pa.array([{}] * 50, pa.struct([])), "z": pa.nulls(50)})
    path = _pylance_write(tmp_path / "e.lance", table, version)
    assert read_table(path).equals(table)


def test_write_dataset_default_data_file(tmp_path: Path) -> None:
    import glob

    import lance

    table = tables.variety_table(3000).select(
        ["i32_seq", "str_words", "list_nulls", "struct_nulls", "fsl_f32"]
    )
    lance.write_dataset(table, str(tmp_path / "ds"))
    files = glob.glob(str(tmp_path / "ds" / "data" / "*.lance"))
    assert len(files) == 1
    dec = open_decoder(files[0])
    assert dec.version == "2.2"
    assert pa.Table.from_batches([dec.read_range(0, dec.num_rows)]).equals(table)


@pytest.mark.parametrize("version", VERSIONS)
def test_nested_ranges(files: dict, version: str) -> None:
    path, expected = files[("nest", version)]
    dec = open_decoder(path)
    for start, stop in [(0, 7), (123, 1500), (1999, 2000)]:
        got = pa.Table.from_batches([dec.read_range(start, stop)])
        assert got.equals(expected.slice(start, stop - start))


@pytest.mark.parametrize("version", VERSIONS)
def test_long_lists_span_chunks_and_pages(tmp_path: Path, version: str) -> None:
    # rows of thousands of items cross chunk and page boundaries; some pages carry def levels
    # bit-packed to width 0 (no null or empty list in that page)
    n = 40
    rng = np.random.default_rng(0)
    lens = rng.integers(0, 9000, n).astype(np.int32)
    lens[5] = 0
    offs = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
    m = int(lens.sum())
    items = pa.array(rng.integers(0, 1000, m).astype(np.int32), mask=rng.random(m) < 0.05)
    table = pa.table(
        {
            "l": pa.ListArray.from_arrays(offs, items, mask=pa.array(np.arange(n) % 9 == 4)),
            "ls": pa.ListArray.from_arrays(offs, pa.array([f"s{i % 77}" for i in range(m)])),
        }
    )
    path = _pylance_write(tmp_path / "ll.lance", table, version)
    assert read_table(path).equals(table)
    assert take_table(path, np.array([3, 39, 0])).equals(table.take([3, 39, 0]))
    from .helpers import write_file

    ours = str(tmp_path / "ours.lance")
    write_file(ours, table, version)
    assert lf.LanceFileReader(ours).read_all().to_table().equals(table)


@pytest.mark.parametrize("version", VERSIONS)
def test_single_rows_every_column(files: dict, version: str) -> None:
    # small ranges and takes decode only the mini-block chunks they need
    path, expected = files[("var", version)]
    for row in [0, 4095, 4096, 12345, 19999]:
        dec = open_decoder(path)
        got = pa.Table.from_batches([dec.read_range(row, row + 1)])
        assert got.equals(expected.slice(row, 1)), row
    dec = open_decoder(path)
    idx = np.array([19999, 7, 7, 4096, 0])
    assert pa.Table.from_batches([dec.take(idx)]).equals(expected.take(idx))
