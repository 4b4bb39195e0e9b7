"""Random Arrow data for Lance 2.0 file tests: every supported type, nulls, nesting, slicing.

Data is produced with vectorized numpy from a seed, so hypothesis only has to draw a type tree,
a row count and a seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

PRIMITIVES: list[pa.DataType] = [
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(10, 2),
    pa.decimal128(38, 0),
    pa.decimal256(40, 5),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    pa.timestamp("s"),
    pa.timestamp("ms"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="America/New_York"),
    pa.duration("s"),
    pa.duration("ms"),
    pa.duration("us"),
    pa.duration("ns"),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(3),
    pa.binary(16),
    pa.null(),
]
DICTS: list[pa.DataType] = [
    pa.dictionary(pa.int8(), pa.string()),
    pa.dictionary(pa.int16(), pa.int64()),
    pa.dictionary(pa.int32(), pa.large_string()),
    pa.dictionary(pa.uint8(), pa.float32()),
]
FSL_ITEMS: list[pa.DataType] = [pa.float32(), pa.float64(), pa.int8(), pa.int16(), pa.uint8(), pa.float16()]


def _mask(rng: np.random.Generator, n: int, null_p: float) -> np.ndarray | None:
    if null_p <= 0 or n == 0:
        return None
    mask = rng.random(n) < null_p
    return mask if mask.any() else None


def _with_mask(arr: pa.Array, mask: np.ndarray | None) -> pa.Array:
    if mask is None:
        return arr
    valid = np.packbits(~mask, bitorder="little")
    bufs = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [pa.py_buffer(valid), *bufs[1:]], children=None)


def random_array(typ: pa.DataType, n: int, rng: np.random.Generator, null_p: float = 0.2) -> pa.Array:
    """``n`` random values of ``typ`` (struct levels never null; 2.0 cannot store that)."""
    t = pa.types
    mask = _mask(rng, n, null_p)
    if t.is_struct(typ):
        children = [random_array(typ.field(i).type, n, rng, null_p) for i in range(typ.num_fields)]
        return (
            pa.StructArray.from_arrays(children, fields=list(typ))
            if children
            else pa.StructArray.from_buffers(typ, n, [None], children=[])
        )
    if t.is_list(typ) or t.is_large_list(typ):
        lengths = rng.integers(0, 4, n)
        if mask is not None:
            lengths[mask] = 0
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = random_array(typ.value_type, int(offsets[-1]), rng, null_p)
        cls = pa.LargeListArray if t.is_large_list(typ) else pa.ListArray
        off = pa.array(offsets, pa.int64() if t.is_large_list(typ) else pa.int32())
        return cls.from_arrays(off, values, type=typ, mask=None if mask is None else pa.array(mask))
    if t.is_fixed_size_list(typ):
        values = random_array(typ.value_type, n * typ.list_size, rng, null_p / 2)
        return pa.FixedSizeListArray.from_arrays(
            values, type=typ, mask=None if mask is None else pa.array(mask)
        )
    if t.is_dictionary(typ):
        size = int(rng.integers(1, 6))
        items = random_array(typ.value_type, size, rng, 0.0)
        idx = pa.array(rng.integers(0, size, n), pa.int64()).cast(typ.index_type)
        return pa.DictionaryArray.from_arrays(_with_mask(idx, mask), items)
    if t.is_boolean(typ):
        return pa.array(rng.random(n) < 0.5, mask=mask)
    if t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ):
        lengths = rng.integers(0, 12, n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = rng.integers(97, 123, int(offsets[-1]), dtype=np.uint8)
        large = t.is_large_string(typ) or t.is_large_binary(typ)
        off = offsets if large else offsets.astype(np.int32)
        valid = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
        return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(off), pa.py_buffer(data)])
    if t.is_fixed_size_binary(typ):
        data = rng.integers(0, 256, n * typ.byte_width, dtype=np.uint8)
        valid = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
        return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(data)])
    if t.is_decimal(typ):
        ints = pa.array(rng.integers(-(10**6), 10**6, n), pa.int64(), mask=mask)
        wide = pa.decimal128(38, typ.scale) if typ.bit_width == 128 else pa.decimal256(76, typ.scale)
        return ints.cast(wide).cast(typ)
    if t.is_floating(typ):
        vals = rng.standard_normal(n).astype(typ.to_pandas_dtype())
        return pa.array(vals, type=typ, mask=mask)
    if t.is_integer(typ):
        info = np.iinfo(typ.to_pandas_dtype())
        vals = rng.integers(info.min, info.max, n, dtype=typ.to_pandas_dtype(), endpoint=True)
        return pa.array(vals, type=typ, mask=mask)
    if t.is_date32(typ) or t.is_time32(typ):
        hi = 86399 if (t.is_time32(typ) and typ.unit == "s") else 86_399_999 if t.is_time32(typ) else 50_000
        return pa.array(rng.integers(0, hi, n).astype(np.int32), pa.int32(), mask=mask).view(typ)
    if t.is_time64(typ):
        hi = 86_399_999_999 if typ.unit == "us" else 86_399_999_999_999
        return pa.array(rng.integers(0, hi, n), pa.int64(), mask=mask).view(typ)
    if t.is_date64(typ):
        return pa.array(rng.integers(0, 10**6, n) * 86_400_000, pa.int64(), mask=mask).view(typ)
    if t.is_timestamp(typ) or t.is_duration(typ):
        return pa.array(rng.integers(-(10**12), 10**12, n), pa.int64(), mask=mask).view(typ)
    if t.is_null(typ):
        return pa.nulls(n)
    raise NotImplementedError(str(typ))


# -- hypothesis strategies ------------------------------------------------------------------------

#: Children a packed struct may hold (fixed-width, byte-aligned).
PACKABLE: list[pa.DataType] = [pa.int8(), pa.uint16(), pa.int32(), pa.float64(), pa.list_(pa.float32(), 3)]


def _field_metadata(typ: pa.DataType) -> st.SearchStrategy[dict[str, str] | None]:
    """Occasionally ask for general compression of binary-like columns (honoured by 2.0)."""
    t = pa.types
    if t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ):
        return st.sampled_from(
            [None, None, {"lance-encoding:compression": "zstd"}, {"lance-encoding:compression": "lz4"}]
        )
    return st.just(None)


def _types(depth: int) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(PRIMITIVES + DICTS) | st.builds(
        lambda item, d: pa.list_(item, d), st.sampled_from(FSL_ITEMS), st.integers(1, 8)
    )
    if depth <= 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        leaf,
        st.builds(pa.list_, inner),
        st.builds(pa.large_list, inner),
        st.builds(
            lambda ts: pa.struct([(f"f{i}", x) for i, x in enumerate(ts)]),
            st.lists(inner, min_size=1, max_size=3),
        ),
    )


arrow_types = _types(3)


@st.composite
def tables(draw: Any, max_rows: int = 300) -> pa.Table:
    """A random table: 1-4 columns of random types, random nulls, sliced and chunked input."""
    ncols = draw(st.integers(1, 4))
    types = [draw(arrow_types) for _ in range(ncols)]
    n = draw(st.integers(0, max_rows))
    seed = draw(st.integers(0, 2**32 - 1))
    null_p = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    rng = np.random.default_rng(seed)
    pad = int(rng.integers(0, 5))
    fields, arrays = [], []
    for i, typ in enumerate(types):
        arr = random_array(typ, n + 2 * pad, rng, null_p)
        arrays.append(arr.slice(pad, n))  # sliced arrays with non-zero offsets
        fields.append(pa.field(f"c{i}", typ, metadata=draw(_field_metadata(typ))))
    if draw(st.booleans()):
        packed = draw(st.lists(st.sampled_from(PACKABLE), min_size=1, max_size=3))
        ptype = pa.struct([(f"p{i}", t) for i, t in enumerate(packed)])
        arrays.append(random_array(ptype, n + 2 * pad, rng, 0.0).slice(pad, n))
        fields.append(pa.field("packed", ptype, metadata={"packed": "true"}))
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    chunks = draw(st.integers(1, 3))
    if chunks > 1 and n > 2:
        cut = sorted(rng.choice(np.arange(1, n), size=min(chunks - 1, n - 1), replace=False).tolist())
        bounds = [0, *cut, n]
        table = pa.Table.from_batches(
            [
                b
                for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
                for b in table.slice(lo, hi - lo).to_batches()
            ],
            schema=table.schema,
        )
    return table


def _undict(typ: pa.DataType) -> pa.DataType:
    t = pa.types
    if t.is_dictionary(typ):
        return _undict(typ.value_type)
    if t.is_list(typ):
        return pa.list_(typ.value_field.with_type(_undict(typ.value_type)))
    if t.is_large_list(typ):
        return pa.large_list(typ.value_field.with_type(_undict(typ.value_type)))
    if t.is_fixed_size_list(typ):
        return pa.list_(typ.value_field.with_type(_undict(typ.value_type)), typ.list_size)
    if t.is_struct(typ):
        return pa.struct([typ.field(i).with_type(_undict(typ.field(i).type)) for i in range(typ.num_fields)])
    return typ


def _has_dictionary(typ: pa.DataType) -> bool:
    return pa.types.is_dictionary(typ) or any(_has_dictionary(typ.field(i).type) for i in range(typ.num_fields))


def _plain(arr: pa.Array) -> pa.Array:
    """``arr`` with its dictionaries decoded, rebuilt level by level (pyarrow's cast of sliced
    nested arrays holding null-typed children yields arrays that fail validation)."""
    t = arr.type
    if not _has_dictionary(t):
        return arr
    if pa.types.is_dictionary(t):
        return _plain(arr.dictionary_decode())
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t):
        children = [_plain(c) for c in arr.flatten()]
        return pa.StructArray.from_arrays(children, fields=[f.with_type(c.type) for f, c in
                                                             zip(list(t), children, strict=True)], mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = _plain(arr.values)
        offsets = pa.array(arr.offsets.to_numpy(zero_copy_only=False))  # unsliced: masks need offset 0
        if pa.types.is_list(t):
            return pa.ListArray.from_arrays(offsets, values, type=pa.list_(t.value_field.with_type(values.type)),
                                            mask=mask)
        return pa.LargeListArray.from_arrays(offsets, values,
                                             type=pa.large_list(t.value_field.with_type(values.type)), mask=mask)
    return arr.cast(_undict(t))


def logical(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded, so differently-built dictionaries compare equal."""
    schema = pa.schema([f.with_type(_undict(f.type)) for f in table.schema])
    if schema.equals(table.schema):
        return table
    columns = [
        col if col.type.equals(field.type) else pa.chunked_array([_plain(c) for c in col.chunks], type=field.type)
        for col, field in zip(table.columns, schema, strict=True)
    ]
    return pa.Table.from_arrays(columns, schema=schema).combine_chunks()
