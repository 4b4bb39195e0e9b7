"""Hypothesis: random schemas / data written by pylance read by us, and written by us read by pylance."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import lance.file as lf
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from .helpers import read_table, take_table, write_file

LEAVES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.date32(),
    pa.timestamp("us"),
    pa.float16(),
    pa.list_(pa.float32(), 3),
]


def types(depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(LEAVES)
    if depth == 0:
        return leaf
    inner = types(depth - 1)
    return st.one_of(
        leaf,
        inner.map(pa.list_),
        inner.map(pa.large_list),
        st.lists(inner, min_size=1, max_size=3).map(
            lambda ts: pa.struct([pa.field(f"c{i}", t) for i, t in enumerate(ts)])
        ),
    )


def _random_array(t: pa.DataType, n: int, rng: np.random.Generator, p_null: float, style: int) -> pa.Array:
    mask = rng.random(n) < p_null if p_null else None
    if pa.types.is_struct(t):
        children = [_random_array(t.field(i).type, n, rng, p_null, style) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(
            children, fields=list(t), mask=pa.array(mask) if mask is not None else None
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        lens = rng.integers(0, 4, n)
        if style == 1:
            lens[:] = 0
        offs = np.concatenate([[0], np.cumsum(lens)])
        child = _random_array(t.value_type, int(offs[-1]), rng, p_null, style)
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        offs_arr = pa.array(offs.astype(np.int64 if pa.types.is_large_list(t) else np.int32))
        return cls.from_arrays(offs_arr, child, mask=pa.array(mask) if mask is not None else None)
    if pa.types.is_fixed_size_list(t):
        child = _random_array(t.value_type, n * t.list_size, rng, 0.0, style)
        return pa.FixedSizeListArray.from_arrays(
            child, t.list_size, mask=pa.array(mask) if mask is not None else None
        )
    if pa.types.is_dictionary(t):
        words = pa.array([f"w{int(v)}" for v in rng.integers(0, 7, n)], mask=mask)
        enc = words.dictionary_encode()
        return pa.DictionaryArray.from_arrays(enc.indices.cast(t.index_type), enc.dictionary)
    if pa.types.is_decimal(t):
        return pa.array(rng.integers(-(10**6), 10**6, n), pa.int64(), mask=mask).cast(t)
    if pa.types.is_fixed_size_binary(t):
        raw = rng.integers(0, 256, n * t.byte_width, dtype=np.uint8).tobytes()
        return pa.array([raw[i * t.byte_width : (i + 1) * t.byte_width] for i in range(n)], t, mask=mask)
    if pa.types.is_boolean(t):
        vals: Any = rng.random(n) < 0.5
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        k = 3 if style == 2 else 1000
        words = [("s" * int(rng.integers(0, 12))) + str(int(v)) for v in rng.integers(0, k, n)]
        if style == 3:
            words = [w * 40 for w in words]
        vals = [w.encode() for w in words] if pa.types.is_binary(t) else words
    elif pa.types.is_floating(t):
        vals = rng.random(n).astype(t.to_pandas_dtype())
    elif pa.types.is_date(t) or pa.types.is_timestamp(t):
        raw = rng.integers(0, 10**6, n).astype(np.int32 if pa.types.is_date(t) else np.int64)
        return pa.array(raw, t, mask=mask)
    else:
        info = np.iinfo(t.to_pandas_dtype())
        hi = 50 if style == 2 else info.max
        vals = rng.integers(max(info.min, -(2**62)), min(hi, 2**62), n).astype(t.to_pandas_dtype())
        if style == 1 and n:
            vals[:] = vals[0]
    return pa.array(vals, t, mask=mask)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    ncols = draw(st.integers(1, 3))
    ts = [draw(types()) for _ in range(ncols)]
    n = draw(st.sampled_from([0, 1, 7, 300, 2500]))
    seed = draw(st.integers(0, 2**32 - 1))
    p_null = draw(st.sampled_from([0.0, 0.1, 0.9, 1.0]))
    style = draw(st.integers(0, 3))
    rng = np.random.default_rng(seed)
    cols = {f"f{i}": _random_array(t, n, rng, p_null, style) for i, t in enumerate(ts)}
    return pa.table(cols)


@settings(max_examples=int(__import__("os").environ.get("F21_EXAMPLES", "30")))
@given(table=tables(), version=st.sampled_from(["2.1", "2.2"]))
def test_pylance_written_read_by_us(table: pa.Table, version: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "h.lance")
        w = lf.LanceFileWriter(path, table.schema, version=version)
        w.write_batch(table)
        w.close()
        expected = lf.LanceFileReader(path).read_all().to_table()
        assert read_table(path).equals(expected)
        if table.num_rows:
            idx = np.array([table.num_rows - 1, 0, table.num_rows // 2])
            assert take_table(path, idx).equals(expected.take(idx))


@settings(max_examples=int(__import__("os").environ.get("F21_EXAMPLES", "30")))
@given(table=tables(), version=st.sampled_from(["2.1", "2.2"]))
def test_our_files_read_by_pylance(table: pa.Table, version: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "o.lance")
        write_file(path, table, version)
        assert lf.LanceFileReader(path).read_all().to_table().equals(table)
        assert read_table(path).equals(table)
