"""Round trips of every supported type through our 2.0 writer and reader, checked against pylance."""

from __future__ import annotations

import decimal
from pathlib import Path

import lance.file
import numpy as np
import pyarrow as pa
import pytest

from lance_format._pb import encodings_v2_0_pb2
from lance_format.errors import InvalidInputError, SchemaError
from lance_format.file import LanceFileReader, LanceFileWriter
from lance_format.storage import open_store

from .datagen import PRIMITIVES, random_array


def _ours(path: Path, table: pa.Table, **kw: object) -> LanceFileWriter:
    with LanceFileWriter(str(path), table.schema, **kw) as w:
        w.write_batch(table)
    return w


def _theirs(path: Path, table: pa.Table, **kw: object) -> None:
    with lance.file.LanceFileWriter(str(path), table.schema, version="2.0", **kw) as w:
        w.write_batch(table)


def _read_both(path: Path) -> tuple[pa.Table, pa.Table]:
    return (
        LanceFileReader(str(path)).read_all().to_table(),
        lance.file.LanceFileReader(str(path)).read_all().to_table(),
    )


def _all_types_table(n: int = 257) -> pa.Table:
    rng = np.random.default_rng(7)
    cols = {f"p{i}": random_array(t, n, rng) for i, t in enumerate(PRIMITIVES)}
    cols["nulls_only"] = pa.nulls(n, pa.int32())
    cols["strs_only_null"] = pa.nulls(n, pa.string())
    cols["empty_strings"] = pa.array([""] * n)
    cols["lowcard"] = pa.array([f"cat{i % 7}" if i % 5 else None for i in range(n)])
    cols["vec"] = random_array(pa.list_(pa.float32(), 16), n, rng)
    cols["fsl_fsl"] = random_array(pa.list_(pa.list_(pa.int16(), 2), 3), n, rng)
    cols["dict_s"] = random_array(pa.dictionary(pa.int16(), pa.string()), n, rng)
    cols["dict_i"] = random_array(pa.dictionary(pa.int8(), pa.int64()), n, rng)
    cols["lst"] = random_array(pa.list_(pa.int32()), n, rng)
    cols["llst"] = random_array(pa.large_list(pa.string()), n, rng)
    cols["lst_fsl"] = random_array(pa.list_(pa.list_(pa.uint8(), 2)), n, rng)
    cols["st"] = random_array(pa.struct([("a", pa.int64()), ("b", pa.list_(pa.bool_()))]), n, rng)
    cols["deep"] = random_array(
        pa.list_(
            pa.struct([("x", pa.list_(pa.struct([("y", pa.list_(pa.large_string())), ("z", pa.float64())])))])
        ),
        n,
        rng,
    )
    return pa.table(cols)


def test_all_types_byte_identical_to_pylance(tmp_path: Path) -> None:
    t = _all_types_table()
    _ours(tmp_path / "ours.lance", t)
    _theirs(tmp_path / "theirs.lance", t)
    assert (tmp_path / "ours.lance").read_bytes() == (tmp_path / "theirs.lance").read_bytes()
    ours, theirs = _read_both(tmp_path / "ours.lance")
    assert ours.equals(theirs)
    assert ours.drop_columns(["dict_s", "dict_i"]).equals(t.drop_columns(["dict_s", "dict_i"]))


def test_small_values(tmp_path: Path) -> None:
    t = pa.table(
        {
            "dec": pa.array([decimal.Decimal("1.23"), None, decimal.Decimal("-9.99")], pa.decimal128(5, 2)),
            "s": pa.array(["", None, "x"]),
            "l": pa.array([[], None, [None, 1]], pa.list_(pa.int64())),
            "ls": pa.array([[""], [None], []], pa.list_(pa.string())),
            "b": pa.array([True, None, False]),
            "n": pa.nulls(3),
        }
    )
    _ours(tmp_path / "a.lance", t)
    ours, theirs = _read_both(tmp_path / "a.lance")
    assert ours.equals(t) and theirs.equals(t)


def test_pylance_files_read_identically(tmp_path: Path) -> None:
    t = _all_types_table(300)
    _theirs(tmp_path / "t.lance", t, max_page_bytes=4096)
    ours, theirs = _read_both(tmp_path / "t.lance")
    assert ours.equals(theirs)
    r = LanceFileReader(str(tmp_path / "t.lance"))
    idx = [0, 5, 77, 150, 299]
    assert (
        r.take_rows(idx)
        .to_table()
        .equals(lance.file.LanceFileReader(str(tmp_path / "t.lance")).take_rows(idx).to_table())
    )
    assert (
        r.read_range(33, 200)
        .to_table()
        .equals(lance.file.LanceFileReader(str(tmp_path / "t.lance")).read_range(33, 200).to_table())
    )


def test_multi_page_sliced_chunked(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 5000
    base = pa.table(
        {
            "i": random_array(pa.int64(), n + 10, rng),
            "s": random_array(pa.string(), n + 10, rng),
            "l": random_array(pa.list_(pa.list_(pa.int32())), n + 10, rng),
            "v": random_array(pa.list_(pa.float32(), 8), n + 10, rng),
            "st": random_array(pa.struct([("a", pa.int8()), ("b", pa.large_binary())]), n + 10, rng),
        }
    ).slice(7, n)
    chunked = pa.Table.from_batches(base.to_batches(max_chunksize=333))
    w = _ours(tmp_path / "m.lance", chunked, max_page_bytes=4096)
    meta = LanceFileReader(str(tmp_path / "m.lance")).metadata()
    assert all(len(c.pages) > 1 for c in meta.columns if c.pages[0].buffer_offsets)
    ours, theirs = _read_both(tmp_path / "m.lance")
    assert ours.equals(theirs) and ours.equals(base)
    assert w.num_rows == n and w.field_ids == list(range(9)) and w.column_indices == list(range(9))
    r = LanceFileReader(str(tmp_path / "m.lance"))
    idx = np.array([4999, 0, 17, 17, 2500, 1], dtype=np.int64)
    assert r.take_rows(idx).to_table().equals(base.take(pa.array(idx)))
    assert r.read_range(1234, 2000, batch_size=100).to_table().equals(base.slice(1234, 2000))
    batches = list(r.read_all(batch_size=512).to_batches())
    assert all(len(b) == 512 for b in batches[:-1]) and sum(len(b) for b in batches) == n


def test_streaming_is_lazy_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lance_format.file.reader as reader_mod

    n = 50_000
    t = pa.table({"a": pa.array(np.arange(n)), "s": pa.array(np.arange(n).astype(str))})
    _ours(tmp_path / "big.lance", t, max_page_bytes=64 * 1024)
    monkeypatch.setattr(reader_mod, "_CHUNK_BYTES", 64 * 1024)
    r = LanceFileReader(str(tmp_path / "big.lance"))
    calls: list[tuple[int, int]] = []
    original = r._decoder.read_range

    def spy(start: int, stop: int) -> pa.RecordBatch:
        calls.append((start, stop))
        return original(start, stop)

    monkeypatch.setattr(r._decoder, "read_range", spy)
    stream = r.read_all(batch_size=1000).to_batches()
    first = stream.read_next_batch()
    assert len(first) == 1000 and len(calls) == 1 and calls[0][1] - calls[0][0] < n
    rest = sum(len(b) for b in stream)
    assert rest + 1000 == n and max(b - a for a, b in calls) <= 8000


def test_zero_rows(tmp_path: Path) -> None:
    t = _all_types_table(0)
    _ours(tmp_path / "z.lance", t)
    _theirs(tmp_path / "zt.lance", t)
    assert (tmp_path / "z.lance").read_bytes() == (tmp_path / "zt.lance").read_bytes()
    ours, theirs = _read_both(tmp_path / "z.lance")
    assert ours.num_rows == 0 and ours.equals(theirs)
    assert LanceFileReader(str(tmp_path / "z.lance")).take_rows([]).to_table().num_rows == 0


def test_projection_and_errors(tmp_path: Path) -> None:
    t = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [[1], [], None]})
    _ours(tmp_path / "p.lance", t)
    r = LanceFileReader(str(tmp_path / "p.lance"), columns=["c", "a"])
    assert r.read_all().to_table().equals(t.select(["c", "a"]))
    assert r.take_rows([2, 0]).to_table().equals(t.select(["c", "a"]).take([2, 0]))
    with pytest.raises(SchemaError, match="nope"):
        LanceFileReader(str(tmp_path / "p.lance"), columns=["nope"])
    with pytest.raises(InvalidInputError):
        r.take_rows([3])
    with pytest.raises(InvalidInputError):
        r.read_range(2, 5)


def test_struct_nulls_refused(tmp_path: Path) -> None:
    t = pa.table({"s": pa.array([{"a": 1}, None], pa.struct([("a", pa.int32())]))})
    with (
        pytest.raises(InvalidInputError, match="struct validity"),
        LanceFileWriter(str(tmp_path / "s.lance"), t.schema) as w,
    ):
        w.write_batch(t)


def _page_kinds(path: Path) -> list[str]:
    kinds = []
    for col in LanceFileReader(str(path)).metadata().columns:
        enc = encodings_v2_0_pb2.ArrayEncoding()
        enc.ParseFromString(col.pages[0].encoding_bytes)
        kinds.append(enc.WhichOneof("array_encoding"))
    return kinds


def test_string_dictionary_switch(tmp_path: Path) -> None:
    t = pa.table(
        {
            "few": pa.array([f"c{i % 10}" for i in range(150)]),
            "many": pa.array([str(i) for i in range(150)]),
            "large": pa.array(["a"] * 150, pa.large_string()),
        }
    )
    _ours(tmp_path / "d.lance", t)
    assert _page_kinds(tmp_path / "d.lance") == ["dictionary", "binary", "binary"]
    _theirs(tmp_path / "dt.lance", t)
    assert (tmp_path / "d.lance").read_bytes() == (tmp_path / "dt.lance").read_bytes()
    short = pa.table({"short": pa.array(["a", "b"] * 20)})
    _ours(tmp_path / "s.lance", short)
    assert _page_kinds(tmp_path / "s.lance") == ["binary"]


def test_store_key_and_lance_schema(tmp_path: Path) -> None:
    from lance_format.schema import LanceSchema

    t = pa.table({"a": [1, 2], "s": pa.array([{"x": 1.5}, {"x": None}], pa.struct([("x", pa.float64())]))})
    store = open_store(str(tmp_path))
    schema = LanceSchema.from_arrow(t.schema, start_id=10)
    with LanceFileWriter(store=store, key="data/x.lance", lance_schema=schema) as w:
        w.write_batch(t.to_batches()[0])
    assert w.field_ids == [10, 11, 12] and w.file_size == store.size("data/x.lance")
    r = LanceFileReader(store=store, key="data/x.lance", file_size=w.file_size)
    assert [f.id for f in r.lance_schema.flat()] == [10, 11, 12]
    assert r.read_all().to_table().equals(t)
    assert lance.file.LanceFileReader(str(tmp_path / "data/x.lance")).read_all().to_table().equals(t)


def test_object_store_uri() -> None:
    t = pa.table({"a": pa.array(np.arange(20_000)), "s": pa.array([f"x{i}" for i in range(20_000)])})
    store = open_store("memory://f20test")  # each open of a memory:// URI is a new, empty store
    with LanceFileWriter(None, t.schema, max_page_bytes=16_384, store=store, key="f.lance") as w:
        w.write_batch(t)
    r = LanceFileReader(None, store=store, key="f.lance")
    assert r.read_all().to_table().equals(t)
    idx = [19_999, 5, 10_000, 3]
    assert r.take_rows(idx).to_table().equals(t.take(idx))
    with pytest.raises(FileNotFoundError):
        LanceFileReader("memory://f20test/f.lance")


def test_schema_from_first_batch_and_casting(tmp_path: Path) -> None:
    t = pa.table({"a": pa.array([1, 2], pa.int32())})
    with LanceFileWriter(str(tmp_path / "c.lance")) as w:
        w.write_batch(t)
        w.write_batch(pa.table({"a": pa.array([3], pa.int64())}))
    assert LanceFileReader(str(tmp_path / "c.lance")).read_all().to_table().column("a").to_pylist() == [
        1,
        2,
        3,
    ]
    with pytest.raises(InvalidInputError), LanceFileWriter(str(tmp_path / "d.lance"), t.schema) as w2:
        w2.write_batch(pa.table({"b": [1]}))
